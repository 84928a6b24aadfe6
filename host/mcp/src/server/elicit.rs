//! A human's approval asked over MCP elicitation: of a skill (the question built by the
//! registry, never from a skill's words first, bound to the session, content hash and
//! capability digest shown), or of one call an org policy's `@require_approval` permits
//! only with a human's yes (bound to the session, tool and arguments); and what the
//! answer does.

use super::*;

/// The key of the approval question inside `inputRequests`.
pub(super) const APPROVAL_KEY: &str = "approve";

pub(super) enum Approval {
    Granted,
    Ask(InputRequiredResult),
    Refused(String),
}

pub(super) fn elicit_params(message: String) -> ElicitRequestParams {
    let schema: ElicitationSchema = ElicitationSchema::builder().required_bool("approve").build_unchecked();
    ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema: schema }
}

impl SkillhostMcp {
    /// Who is asking, as far as approval questions go: the HTTP session or bearer token of
    /// a request over HTTP (where a 2026-07-28 client may get a fresh handler per
    /// request), else this connection's session.
    pub(super) fn session_key(&self, context: &RequestContext<RoleServer>) -> String {
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<crate::http::Principal>())
            .map_or_else(|| format!("session:{}", self.session.id), |p| p.0.clone())
    }

    /// Decide whether the unapproved skill `name` may run now (a call of one of its tools,
    /// a `skill_run` of its scripts), asking the human if we can.
    pub(super) async fn approval(
        &self,
        name: &str,
        params: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<Approval, ErrorData> {
        let registry = &self.shared.registry;
        let command = format!("run `skillhost approve {name}` in a terminal, then call again");
        let request = registry.approval_request(name).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        // Who may answer: in a team (a shared state store), only a caller the org policy
        // gives `approve`; without an org policy nobody there (the agent behind a client
        // could write the answer itself), a human approves at a terminal instead.
        if self.shared.registry.claims().is_some() && self.shared.config.org_policy.is_none() {
            return Ok(Approval::Refused(format!(
                "skill `{name}` is {}; this host shares its approvals with a team, where an MCP client's answer approves nothing unless the org policy gives its caller `approve`: {command}",
                request.state.as_str()
            )));
        }
        let scope = self.scope(context);
        if let Err(refused) = scope.check_skill(Action::Approve, name, registry.entry(name).ok().as_deref()) {
            return Ok(Approval::Refused(format!("{refused}; {command}")));
        }
        let supports = context.client_capabilities().is_some_and(|c| c.elicitation.is_some());
        if !self.shared.config.elicit_approvals || !supports {
            return Ok(Approval::Refused(format!(
                "skill `{name}` is {} and this client cannot ask the user to approve it; {command}",
                request.state.as_str()
            )));
        }
        // Its packages: resolved (and recorded) before it is asked about, so the question
        // lists them; not again when the answer comes back (it is about what was shown).
        let declares = registry
            .entry(name)
            .ok()
            .is_some_and(|e| e.loaded.as_ref().and_then(|l| l.scripts.as_ref()).is_some_and(|s| s.declares_packages()));
        let packages = match (&self.shared.packages, declares) {
            (_, false) => None,
            (None, true) => {
                return Ok(Approval::Refused(format!(
                    "skill `{name}` declares packages, which this server cannot install after an answer here; {command}"
                )));
            }
            (Some(packages), true) => Some(packages.clone()),
        };
        let answering = context.protocol_version().is_some_and(|v| !v.has_initialize()) && params.request_state.is_some();
        let request = match &packages {
            Some(packages) if !answering => {
                if let Err(e) = packages.resolve(name).await {
                    return Ok(Approval::Refused(format!("skill `{name}`: its packages could not be resolved: {e}; nothing was approved")));
                }
                registry.approval_request(name).map_err(|e| ErrorData::internal_error(e.to_string(), None))?
            }
            _ => request,
        };
        let message = match request.dialog_question() {
            Ok(message) => message,
            Err(too_long) => return Ok(Approval::Refused(too_long.to_string())),
        };
        let asked = Asked {
            session: self.session_key(context),
            skill: name.to_owned(),
            content_hash: request.content_hash.clone(),
            capability_digest: request.capability_digest.clone(),
            call: None,
        };
        let (accepted, asked) = match self.ask_human(message, asked, params, context).await? {
            Answer::Ask(result) => return Ok(Approval::Ask(result)),
            Answer::Given { accepted, asked } => (accepted, asked),
        };
        if !accepted {
            return Ok(Approval::Refused(format!("the user did not approve skill `{name}`; nothing ran. To approve it later, {command}")));
        }
        // Installed after the yes, before the approval is recorded: a failed install
        // approves nothing.
        if let Some(packages) = &packages
            && let Err(e) = packages.install(name).await
        {
            return Ok(Approval::Refused(format!("skill `{name}`: its packages could not be installed: {e}; nothing was approved")));
        }
        // Bound to what the human was shown: if the skill changed since, this fails.
        match registry.approve(name, &asked.content_hash, &asked.capability_digest, ApprovalChannel::McpElicitation).await {
            Ok(()) => {}
            Err(error @ RegistryError::ChangedSinceReview { .. }) => {
                return Ok(Approval::Refused(format!(
                    "{error}; nothing was approved or ran: call the tool again to be asked about this version"
                )));
            }
            Err(error @ RegistryError::RejectedByHuman { .. }) => return Ok(Approval::Refused(format!("{error}; nothing ran"))),
            Err(error) => return Err(ErrorData::internal_error(error.to_string(), None)),
        }
        tracing::info!(skill = name, session = %asked.session, "approved by the user through MCP elicitation");
        Ok(Approval::Granted)
    }

    /// Decide whether a call the org policy permits only with a human's yes to it
    /// (`@require_approval` in `policies`) may run, asking through the caller's client. Its
    /// answer counts only when the org policy gives the caller `approve` on the skill:
    /// whoever writes the policy says whose client a human answers behind. The answer is
    /// bound to this session, tool and arguments, used once, and audited.
    pub(super) async fn call_approval(
        &self,
        tool: &ToolEntry,
        params: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        scope: &Scope,
        policies: &[String],
    ) -> Result<Approval, ErrorData> {
        let name = tool.skill.as_str();
        let target = crate::access::tool_target(tool);
        let permits = crate::access::quoted(policies);
        let caller = scope.caller().name.clone();
        if let Err(refused) = scope.check_skill(Action::Approve, name, self.shared.registry.entry(name).ok().as_deref()) {
            scope.record(Action::Call, &target, false, policies);
            return Ok(Approval::Refused(format!(
                "{permits} permits caller `{caller}` to call `{}` only once a human approves the call, and only a caller the org policy gives `approve` on skill `{name}` may answer: {refused}; nothing ran",
                tool.name
            )));
        }
        let supports = context.client_capabilities().is_some_and(|c| c.elicitation.is_some());
        if !self.shared.config.elicit_approvals || !supports {
            scope.record(Action::Call, &target, false, policies);
            return Ok(Approval::Refused(format!(
                "{permits} permits caller `{caller}` to call `{}` only once a human approves the call, and this client cannot ask its user; nothing ran",
                tool.name
            )));
        }
        let arguments = Value::Object(params.arguments.clone().unwrap_or_default()).to_string();
        let call = skillhost_access::token::sha256(&format!("{}\0{arguments}", tool.name));
        // Host-written lines first; the agent's arguments last, on one line, as data.
        let message = format!(
            "skillhost: allow caller `{caller}` to call `{}` once?\nThe org policy ({permits}) permits this call only with a human's yes.\nIts arguments (the agent's words):\n  {}\n",
            tool.name,
            skillhost_core::text::one_line(&arguments, ARGUMENTS_SHOWN),
        );
        let asked = Asked {
            session: self.session_key(context),
            skill: name.to_owned(),
            content_hash: String::new(),
            capability_digest: String::new(),
            call: Some(call),
        };
        let accepted = match self.ask_human(message, asked, params, context).await? {
            Answer::Ask(result) => return Ok(Approval::Ask(result)),
            Answer::Given { accepted, .. } => accepted,
        };
        scope.record(Action::Call, &target, accepted, policies);
        if !accepted {
            return Ok(Approval::Refused(format!("the user did not allow this call of `{}`; nothing ran", tool.name)));
        }
        tracing::info!(tool = %tool.name, caller, "one call approved by the user through MCP elicitation");
        Ok(Approval::Granted)
    }

    /// Ask the human `message` about `asked`: over 2026-07-28 the question goes back with
    /// the call ([`Answer::Ask`]) and the answer comes with the retried call, its
    /// `requestState` checked against what is asked now; over a session, asked at once.
    async fn ask_human(
        &self,
        message: String,
        asked: Asked,
        params: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<Answer, ErrorData> {
        let name = asked.skill.clone();
        let modern = context.protocol_version().is_some_and(|v| !v.has_initialize());
        let (answer, asked) = if modern {
            // 2026-07-28: the answer comes back with the retried call, along with the
            // token of what was asked. A token that does not check out is refused
            // before the answer is read, and records nothing.
            let redeemed = match params.request_state.as_deref() {
                Some(token) => {
                    let redeemed = self
                        .shared
                        .approvals
                        .redeem(token, &asked.session, &name)
                        .map_err(|e| ErrorData::invalid_params(format!("skill `{name}`: {e}"), None))?;
                    if redeemed.call != asked.call {
                        return Err(ErrorData::invalid_params(
                            format!(
                                "skill `{name}`: the answer sent is to another question (another call, or the skill's approval); call again to be asked"
                            ),
                            None,
                        ));
                    }
                    Some(redeemed)
                }
                None => None,
            };
            let response = params.input_responses.as_ref().and_then(|r| r.get(APPROVAL_KEY));
            let (Some(redeemed), Some(response)) = (redeemed, response) else {
                let token = self.shared.approvals.issue(asked).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                let ask = InputRequest::Elicitation(ElicitRequest::new(elicit_params(message)));
                let requests = [(APPROVAL_KEY.to_owned(), ask)].into_iter().collect();
                return Ok(Answer::Ask(InputRequiredResult::new(Some(requests), Some(token))));
            };
            let answer: ElicitResult = serde_json::from_value(response.clone())
                .map_err(|e| ErrorData::invalid_params(format!("bad elicitation response: {e}"), None))?;
            (answer, redeemed)
        } else {
            let answer = context
                .peer
                .create_elicitation(elicit_params(message))
                .await
                .map_err(|e| ErrorData::internal_error(format!("asking the user about `{name}` failed: {e}"), None))?;
            (answer, asked)
        };
        let accepted = answer.action == ElicitationAction::Accept
            && answer.content.as_ref().and_then(|c| c.get("approve")).and_then(Value::as_bool) == Some(true);
        Ok(Answer::Given { accepted, asked })
    }
}

/// Bytes of a call's arguments a one-call approval question shows.
const ARGUMENTS_SHOWN: usize = 1024;

/// What asking a human came to.
enum Answer {
    /// The question, sent back with the call (2026-07-28).
    Ask(InputRequiredResult),
    /// The human's answer to `asked`.
    Given { accepted: bool, asked: Asked },
}
