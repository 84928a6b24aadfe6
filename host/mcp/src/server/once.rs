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
//! keep), and keys are scoped by who sent them: over HTTP, the holders of the bearer
//! token; over stdio, the session.

use super::calls::error_result;
use super::*;

/// The `_meta` key naming a call.
pub const CALL_KEY: &str = "skillhost/call-key";
/// The longest key taken.
const MAX_KEY: usize = 200;
/// How often a call running on another replica is looked at again.
const POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// An answer as it is kept.
#[derive(serde::Serialize, serde::Deserialize)]
enum Kept {
    Result(CallToolResult),
    Error(ErrorData),
}

impl SkillhostMcp {
    /// The call's key, scoped by who sent it, when it has one and the store keeps claims.
    pub(super) fn call_key(&self, context: &RequestContext<RoleServer>) -> Result<Option<String>, ErrorData> {
        let Some(key) = context.meta.get(CALL_KEY) else { return Ok(None) };
        let Some(key) = key.as_str().filter(|k| !k.is_empty() && k.len() <= MAX_KEY) else {
            return Err(ErrorData::invalid_params(format!("_meta \"{CALL_KEY}\" must be a string of 1 to {MAX_KEY} bytes"), None));
        };
        let http = context.extensions.get::<http::request::Parts>().is_some();
        let scope = if http { "http".to_owned() } else { format!("session:{}", self.session.id) };
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
                    let answer = self.call_skill_tool(tool, params, context).await;
                    let kept = match &answer {
                        Ok(CallToolResponse::Complete(result)) => Some(Kept::Result(result.clone())),
                        Err(error) => Some(Kept::Error(error.clone())),
                        Ok(_) => None,
                    };
                    if let Some(text) = kept.and_then(|k| serde_json::to_string(&k).ok()) {
                        let result = tokio::task::spawn_blocking(move || claims.finish(&key, &text)).await;
                        if let Ok(Err(error)) = result {
                            tracing::warn!(%error, "cannot keep a claimed call's answer; a retry of it will be told its outcome is unknown");
                        }
                    }
                    return answer;
                }
                Claim::Done(text) => {
                    return match serde_json::from_str::<Kept>(&text) {
                        Ok(Kept::Result(result)) => Ok(result.into()),
                        Ok(Kept::Error(error)) => Err(error),
                        Err(e) => Err(ErrorData::internal_error(format!("the kept answer of this call does not read back: {e}"), None)),
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
