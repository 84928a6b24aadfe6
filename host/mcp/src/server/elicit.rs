//! A human's approval asked over MCP elicitation: the question (built by the registry,
//! never from a skill's words first), bound to the session, content hash and capability
//! digest shown, and what the answer does.

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

    /// Decide whether an unapproved skill may run now, asking the human if we can.
    pub(super) async fn approval(
        &self,
        tool: &ToolEntry,
        params: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<Approval, ErrorData> {
        let registry = &self.shared.registry;
        let name = tool.skill.as_str();
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
        let message = match request.dialog_question() {
            Ok(message) => message,
            Err(too_long) => return Ok(Approval::Refused(too_long.to_string())),
        };
        let session = self.session_key(context);
        let asked = Asked {
            session: session.clone(),
            skill: name.to_owned(),
            content_hash: request.content_hash.clone(),
            capability_digest: request.capability_digest.clone(),
        };
        let modern = context.protocol_version().is_some_and(|v| !v.has_initialize());
        let (answer, asked) = if modern {
            // 2026-07-28: the answer comes back with the retried call, along with the
            // token of what was asked. A token that does not check out is refused
            // before the answer is read, and records nothing.
            let redeemed = match params.request_state.as_deref() {
                Some(token) => Some(
                    self.shared
                        .approvals
                        .redeem(token, &session, name)
                        .map_err(|e| ErrorData::invalid_params(format!("skill `{name}`: {e}"), None))?,
                ),
                None => None,
            };
            let response = params.input_responses.as_ref().and_then(|r| r.get(APPROVAL_KEY));
            let (Some(redeemed), Some(response)) = (redeemed, response) else {
                let token = self.shared.approvals.issue(asked).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                let ask = InputRequest::Elicitation(ElicitRequest::new(elicit_params(message)));
                let requests = [(APPROVAL_KEY.to_owned(), ask)].into_iter().collect();
                return Ok(Approval::Ask(InputRequiredResult::new(Some(requests), Some(token))));
            };
            let answer: ElicitResult = serde_json::from_value(response.clone())
                .map_err(|e| ErrorData::invalid_params(format!("bad elicitation response: {e}"), None))?;
            (answer, redeemed)
        } else {
            let answer = context
                .peer
                .create_elicitation(elicit_params(message))
                .await
                .map_err(|e| ErrorData::internal_error(format!("asking the user to approve `{name}` failed: {e}"), None))?;
            (answer, asked)
        };
        let accepted = answer.action == ElicitationAction::Accept
            && answer.content.as_ref().and_then(|c| c.get("approve")).and_then(Value::as_bool) == Some(true);
        if !accepted {
            return Ok(Approval::Refused(format!("the user did not approve skill `{name}`; nothing ran. To approve it later, {command}")));
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
        tracing::info!(skill = name, session = %session, "approved by the user through MCP elicitation");
        Ok(Approval::Granted)
    }
}
