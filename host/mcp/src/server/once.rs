//! Calls a client names with `_meta["skillhost/call-key"]`, run at most once across the
//! replicas sharing a state store ([`skillhost_registry::CallClaims`]). A client whose call
//! failed in transit (a dropped connection, a balancer's 502, a draining replica's 503)
//! sends it again with the same key to any replica: the first to claim the key runs it
//! and keeps its answer; another gets that answer, waiting while the call runs. A call
//! whose replica stopped while it ran is answered with an error that says its outcome is
//! unknown and that it will not run again under that key: the only answer that never
//! runs a call twice.
//!
//! Only calls of approved skills are claimed (an approval question is no answer to
//! keep), and keys are scoped by who sent them: over HTTP, the caller (so one caller can
//! neither read another's answer nor spoil its key); over stdio, this process's session.
//! A kept answer is bound to the call it answers (tool and arguments): the same key with
//! another call is refused, never answered with the first call's result. A call whose
//! request went away while it ran (the client hung up) is kept as of unknown outcome, so
//! its retries are answered at once.

use super::calls::error_result;
use super::*;

/// The `_meta` key naming a call.
pub const CALL_KEY: &str = "skillhost/call-key";
/// The longest key taken.
const MAX_KEY: usize = 200;
/// How often a call running on another replica is looked at again.
const POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// An answer as it is kept, with the SHA-256 of the call it answers.
#[derive(serde::Serialize, serde::Deserialize)]
struct Kept {
    call: String,
    answer: Answer,
}

#[derive(serde::Serialize, serde::Deserialize)]
enum Answer {
    Result(CallToolResult),
    Error(ErrorData),
}

/// The SHA-256 of a call: its tool and its arguments as sent.
fn call_hash(params: &CallToolRequestParams) -> String {
    let arguments = serde_json::to_string(&params.arguments).unwrap_or_default();
    let digest = ring::digest::digest(&ring::digest::SHA256, format!("{}\u{1f}{arguments}", params.name).as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A random id of this process, so that two hosts' stdio sessions (numbered from 1 each)
/// never share a key in a shared store.
fn process_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let mut bytes = [0u8; 16];
        let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes);
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    })
}

/// A claimed call whose answer is not kept yet: dropped before [`Unfinished::finish`]
/// (the request's future went away while the call ran), it keeps an answer saying the
/// outcome is unknown, so that retries are not left waiting on it.
struct Unfinished {
    claims: Arc<dyn skillhost_registry::CallClaims>,
    key: String,
    call: String,
    tool: String,
    done: bool,
}

impl Unfinished {
    async fn finish(mut self, answer: Answer) {
        self.done = true;
        let kept = Kept { call: std::mem::take(&mut self.call), answer };
        let Ok(text) = serde_json::to_string(&kept) else { return };
        let (claims, key) = (self.claims.clone(), std::mem::take(&mut self.key));
        if let Ok(Err(error)) = tokio::task::spawn_blocking(move || claims.finish(&key, &text)).await {
            tracing::warn!(%error, "cannot keep a claimed call's answer; a retry of it will be told its outcome is unknown");
        }
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let unknown = error_result(format!(
            "call `{}` with this {CALL_KEY} was running when its request went away: whether it had its effect is unknown, and it will not run again under this key. Check the effect, then call again with a new key if it is still needed",
            self.tool
        ));
        let kept = Kept { call: std::mem::take(&mut self.call), answer: Answer::Result(unknown) };
        let (claims, key) = (self.claims.clone(), std::mem::take(&mut self.key));
        if let Ok(text) = serde_json::to_string(&kept) {
            std::thread::spawn(move || {
                if let Err(error) = claims.finish(&key, &text) {
                    tracing::warn!(%error, "cannot keep the answer of a call whose request went away");
                }
            });
        }
    }
}

impl SkillhostMcp {
    /// The call's key, scoped by who sent it, when it has one and the store keeps claims.
    pub(super) fn call_key(&self, context: &RequestContext<RoleServer>) -> Result<Option<String>, ErrorData> {
        let Some(key) = context.meta.get(CALL_KEY) else { return Ok(None) };
        let Some(key) = key.as_str().filter(|k| !k.is_empty() && k.len() <= MAX_KEY) else {
            return Err(ErrorData::invalid_params(format!("_meta \"{CALL_KEY}\" must be a string of 1 to {MAX_KEY} bytes"), None));
        };
        let scope = match context.extensions.get::<http::request::Parts>() {
            Some(_) => format!("caller:{}", self.scope(context).caller().name),
            None => format!("stdio:{}:{}", process_id(), self.session.id),
        };
        Ok(Some(format!("{scope}\u{1f}{key}")))
    }

    /// Run `tool` at most once for `key` across the replicas.
    pub(super) async fn call_once(
        &self,
        claims: Arc<dyn skillhost_registry::CallClaims>,
        key: String,
        tool: ToolEntry,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        use skillhost_registry::Claim;
        let call = call_hash(&params);
        loop {
            let claim = {
                let (claims, key) = (claims.clone(), key.clone());
                tokio::task::spawn_blocking(move || claims.claim(&key)).await
            };
            let claim = match claim {
                Ok(Ok(claim)) => claim,
                Ok(Err(error)) => return Err(ErrorData::internal_error(format!("cannot claim the call: {error}"), None)),
                Err(error) => return Err(ErrorData::internal_error(format!("cannot claim the call: {error}"), None)),
            };
            match claim {
                Claim::New => {
                    let unfinished = Unfinished { claims, key, call, tool: tool.name.clone(), done: false };
                    let answer = self.call_skill_tool(tool, params, context).await;
                    match &answer {
                        Ok(CallToolResponse::Complete(result)) => unfinished.finish(Answer::Result(result.clone())).await,
                        Err(error) => unfinished.finish(Answer::Error(error.clone())).await,
                        // Never here for an approved tool; kept as of unknown outcome.
                        Ok(_) => drop(unfinished),
                    }
                    return answer;
                }
                Claim::Done(text) => {
                    let kept = serde_json::from_str::<Kept>(&text)
                        .map_err(|e| ErrorData::internal_error(format!("the kept answer of this call does not read back: {e}"), None))?;
                    if kept.call != call {
                        return Err(ErrorData::invalid_params(
                            format!(
                                "_meta \"{CALL_KEY}\" names another call (another tool or other arguments): a key names one call; send this one with a new key"
                            ),
                            None,
                        ));
                    }
                    return match kept.answer {
                        Answer::Result(result) => Ok(result.into()),
                        Answer::Error(error) => Err(error),
                    };
                }
                Claim::Running { .. } => {
                    tokio::select! {
                        () = tokio::time::sleep(POLL) => continue,
                        () = context.ct.cancelled() => return Err(ErrorData::internal_error("cancelled while the call ran on another replica", None)),
                    }
                }
                Claim::Interrupted { replica } => {
                    return Ok(error_result(format!(
                        "call `{}` with this {CALL_KEY} was running on replica `{replica}` when that replica stopped: whether it had its effect is unknown, \
                         and it will not run again under this key. Check the effect, then call again with a new key if it is still needed",
                        tool.name
                    ))
                    .into());
                }
            }
        }
    }
}
