//! The human-only trust operations of [`Registry`]: the approval request a human reads
//! (what the skill asks for, its files, what changed since the last approval), `approve`,
//! `reject`, `disable`, `enable`. See the parent module's warning: never reachable by an
//! agent.

use super::*;
use skillhost_core::SecretCarrier;

/// The capability digest of an instruction-only skill, which asks for nothing.
pub(super) const NO_CAPABILITIES: &str = "none";

/// The first line of the request of a skill whose bytes an agent wrote.
pub(super) const AGENT_WRITTEN: &str = "written by an agent (the forge's skill_create or skill_update): every file of it, instructions included, is text no human has read yet";

pub(super) fn loaded(entry: &Entry) -> Result<&Loaded, RegistryError> {
    entry.loaded.as_ref().ok_or_else(|| RegistryError::NotLoaded {
        name: entry.name.to_string(),
        reason: entry.error.as_ref().map_or_else(|| "it has not loaded".to_owned(), |e| e.to_string()),
    })
}

pub(super) fn observation<'a>(identity: &'a DataKey, loaded: &'a Loaded) -> Observation<'a> {
    Observation {
        name: identity.as_str(),
        content_hash: &loaded.content_hash,
        capability_digest: &loaded.capability_digest,
        tier: loaded.tier,
    }
}

/// What a skill asks for, one line per request, as a human reviews it: files with modes,
/// network rules, secrets with where they go, effective limits, destructive tools.
/// What a human approving `manifest`'s code should know of its data dir now: the data dir
/// outlives the code, so what an earlier version (or a removed skill of this name and
/// layer) stored is what this code would be handed. Read when the request is shown, not
/// at load, and never recorded with the approval (it changes as the skill writes).
pub(super) fn data_held(manifest: &skillhost_core::SkillManifest, data_dir: &std::path::Path) -> Option<String> {
    if manifest.files.is_empty() {
        return None;
    }
    let held = std::fs::read_dir(data_dir).ok()?.count();
    (held > 0).then(|| {
        format!(
            "its data dir already holds {held} entr{} written by an earlier version or an earlier skill of this name",
            if held == 1 { "y" } else { "ies" }
        )
    })
}

/// `files` against `approved` (path → SHA-256): one line per file added, changed or
/// removed, in path order.
pub(super) fn file_diff(approved: &BTreeMap<String, String>, files: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    let now: BTreeMap<&str, String> = files.iter().map(|(p, b)| (p.as_str(), hex::encode(sha2::Sha256::digest(b)))).collect();
    let mut lines = Vec::new();
    let paths: BTreeSet<&str> = now.keys().copied().chain(approved.keys().map(String::as_str)).collect();
    for path in paths {
        let shown = text::quote(path, 120);
        match (approved.get(path), now.get(path)) {
            (None, Some(hash)) => lines.push(format!("+ {shown} (sha256 {hash})")),
            (Some(old), None) => lines.push(format!("- {shown} (was sha256 {old})")),
            (Some(old), Some(new)) if old != new => lines.push(format!("~ {shown} (sha256 {old} → {new})")),
            _ => {}
        }
    }
    lines
}

pub(super) fn requests(
    manifest: &skillhost_core::SkillManifest,
    grant: &Grant,
    tools: &[skillhost_core::ToolSpec],
    data_dir: &std::path::Path,
) -> Vec<String> {
    let mut lines = Vec::new();
    for file in &manifest.files {
        let mode = match file.mode {
            FileMode::ReadOnly => "read-only",
            FileMode::ReadWrite => "read-write",
        };
        lines.push(format!("files `{}` in its data dir ({}): {mode}", file.path, data_dir.display()));
    }
    let network = &manifest.network;
    for (kind, rules) in [("allow", &network.allow), ("deny", &network.deny), ("private address allowed", &network.private)] {
        for rule in rules {
            lines.push(format!("network {kind}: {}", rule.text));
        }
    }
    if let Some(server) = &manifest.server {
        lines.push(format!(
            "runs `{}` in a bubblewrap sandbox",
            std::iter::once(&server.command).chain(&server.args).cloned().collect::<Vec<_>>().join(" ")
        ));
        for secret in &server.secrets {
            // A secret the proxy adds (`[[secrets]]`) is a placeholder in the variable.
            if manifest.secrets.iter().any(|bound| bound.name == secret.name) {
                lines.push(format!(
                    "environment variable `{}` holds a placeholder for secret `{}`, never its value (the proxy adds the value, below)",
                    secret.env, secret.name
                ));
            } else {
                lines.push(format!(
                    "secret `{}` given to the server as environment variable `{}` (it can send it to any allowed host)",
                    secret.name, secret.env
                ));
            }
        }
    }
    let carrier = if manifest.server.is_some() { SecretCarrier::Proxy } else { SecretCarrier::Host };
    lines.extend(manifest.secrets.iter().map(|secret| secret.approval_line(carrier)));
    let limits = &grant.limits;
    lines.push(format!("limit timeout: {:?}", limits.timeout));
    lines.push(format!("limit memory: {}", ByteSize(limits.memory)));
    lines.push(format!("limit output: {}", ByteSize(limits.output)));
    lines.push(format!("limit concurrency: {}", limits.concurrency));
    for tool in tools.iter().filter(|t| t.annotations.destructive) {
        lines.push(format!("tool `{}` is destructive", tool.name));
    }
    lines
}

impl Registry {
    /// What a human should see before approving `name`. Pass its `content_hash` and
    /// `capability_digest` back to [`approve`](Self::approve).
    pub fn approval_request(&self, name: &str) -> Result<ApprovalRequest, RegistryError> {
        let entry = self.entry(name)?;
        let loaded = loaded(&entry)?;
        let record = self.trust.get(entry.identity.as_str())?;
        let approved: Option<Vec<String>> =
            record.as_ref().and_then(|r| r.approved_requests.as_deref()).and_then(|json| serde_json::from_str(json).ok());
        let mut requests = loaded.requests.clone();
        if let (Some(manifest), Some(data_dir)) = (&loaded.manifest, &loaded.data_dir) {
            requests.extend(data_held(manifest, data_dir));
        }
        Ok(ApprovalRequest {
            name: entry.name.clone(),
            version: loaded.version.clone(),
            tier: loaded.tier,
            state: entry.state,
            content_hash: loaded.content_hash.clone(),
            capability_digest: loaded.capability_digest.clone(),
            requests,
            sandbox_without: loaded.sandbox_without.clone(),
            // Against the last approval only: a first one shows its request once, above.
            diff: approved.as_deref().map(|approved| diff_lines(approved, &loaded.requests)).unwrap_or_default(),
            content_changed: record.as_ref().and_then(|r| r.approved_hash.as_deref()).is_some_and(|hash| hash != loaded.content_hash),
            files: self.approved_files(&entry.identity).map(|approved| file_diff(&approved, &loaded.files)).unwrap_or_default(),
            provenance: self.provenance(&loaded.content_hash),
            last_approved_by: record.as_ref().and_then(|r| r.approved_by),
            last_approved_via: record.and_then(|r| r.approved_via),
        })
    }

    /// **Human only** (see the module docs). Approve `name` as reviewed: `content_hash`
    /// and `capability_digest` are those of the [`ApprovalRequest`] the human saw; if the
    /// skill changed since, nothing is approved. `channel` is how the human's answer came
    /// (a terminal, or an MCP client's elicitation), recorded with the approval so that it
    /// can be told apart, and revoked, later.
    pub async fn approve(
        &self,
        name: &str,
        content_hash: &str,
        capability_digest: &str,
        channel: ApprovalChannel,
    ) -> Result<(), RegistryError> {
        let _guard = self.trust_ops.lock();
        let entry = self.entry(name)?;
        let loaded = loaded(&entry)?;
        if entry.state == TrustState::Disabled {
            return Err(RegistryError::NotCallable { name: name.to_owned(), state: TrustState::Disabled });
        }
        for (what, reviewed, current) in
            [("content hash", content_hash, &loaded.content_hash), ("capability digest", capability_digest, &loaded.capability_digest)]
        {
            if reviewed != current {
                return Err(RegistryError::ChangedSinceReview {
                    name: name.to_owned(),
                    what,
                    reviewed: reviewed.to_owned(),
                    current: current.clone(),
                });
            }
        }
        // A human's rejection stands until a human at a terminal says otherwise: an answer
        // an MCP client relays (which the agent behind it may have written) never lifts it.
        if channel == ApprovalChannel::McpElicitation && self.trust.get(entry.identity.as_str())?.is_some_and(|r| r.rejected) {
            return Err(RegistryError::RejectedByHuman { name: name.to_owned() });
        }
        self.trust.write_approval(&observation(&entry.identity, loaded), &loaded.requests, channel)?;
        self.record_approved_files(&entry.identity, loaded);
        self.set_state(&entry, TrustState::Approved);
        Ok(())
    }

    /// Keep what a folder skill's approval covered, file by file, so that the request for
    /// a later version can say which files changed. Best effort: the approval itself is
    /// in the trust store.
    pub(super) fn record_approved_files(&self, identity: &DataKey, loaded: &Loaded) {
        if loaded.files.is_empty() {
            return;
        }
        let hashes: BTreeMap<&str, String> =
            loaded.files.iter().map(|(path, bytes)| (path.as_str(), hex::encode(sha2::Sha256::digest(bytes)))).collect();
        let text = serde_json::to_string(&hashes).unwrap_or_default();
        if let Err(error) = self.policies.write(identity.as_str(), Kept::ApprovedFiles, &text) {
            tracing::warn!(%error, "cannot record the approved files");
        }
    }

    /// The files of `identity`'s last approval, when recorded.
    pub(super) fn approved_files(&self, identity: &DataKey) -> Option<BTreeMap<String, String>> {
        let text = self.policies.read(identity.as_str(), Kept::ApprovedFiles).ok()??;
        serde_json::from_str(&text).ok()
    }

    /// **Human only** (see the module docs). Decline `name`: its approval is dropped, it
    /// is `pending_review` and not auto-approved again until approved. A disabled skill
    /// stays disabled.
    pub async fn reject(&self, name: &str) -> Result<(), RegistryError> {
        let _guard = self.trust_ops.lock();
        let (entry, identity) = self.identity_of(name)?;
        self.trust.reject(identity.as_str())?;
        if let Some(entry) = entry.filter(|e| e.state != TrustState::Disabled) {
            self.set_state(&entry, TrustState::PendingReview);
        }
        Ok(())
    }

    /// **Human only** (see the module docs). Turn `name` off: not callable, whatever
    /// changes, until [`enable`](Self::enable)d. Its approval is kept.
    pub async fn disable(&self, name: &str) -> Result<(), RegistryError> {
        let _guard = self.trust_ops.lock();
        let (entry, identity) = self.identity_of(name)?;
        self.trust.disable(identity.as_str())?;
        if let Some(entry) = entry {
            self.set_state(&entry, TrustState::Disabled);
        }
        Ok(())
    }

    /// **Human only** (see the module docs). Turn `name` back on: it is `approved` again
    /// if its approval still matches (or its tier is auto), otherwise `needs_reapproval`
    /// or `pending_review`.
    pub async fn enable(&self, name: &str) -> Result<(), RegistryError> {
        let _guard = self.trust_ops.lock();
        let (entry, identity) = self.identity_of(name)?;
        self.trust.enable(identity.as_str())?;
        // A skill still loading takes its state from the store when its load commits.
        let Some(entry) = entry else { return Ok(()) };
        let state = match &entry.loaded {
            Some(loaded) => self.trust.observe(&observation(&entry.identity, loaded), &loaded.requests)?,
            None => self.stored_state(&entry.identity)?,
        };
        self.set_state(&entry, state);
        Ok(())
    }

    /// Read the trust state of the skills whose trust record is `identity` (every skill
    /// for `None`) again from the store, after a human changed it on another host sharing
    /// it ([`TrustStore::changes`]): an approval there makes the skill callable here, a
    /// rejection or a disable stops it, as if made here.
    pub(crate) fn refresh_trust(&self, identity: Option<&str>) -> Result<(), RegistryError> {
        let _guard = self.trust_ops.lock();
        let entries: Vec<Arc<Entry>> =
            self.entries.read().values().filter(|e| identity.is_none_or(|id| e.identity.as_str() == id)).cloned().collect();
        for entry in entries {
            let state = match &entry.loaded {
                Some(loaded) => self.trust.observe(&observation(&entry.identity, loaded), &loaded.requests)?,
                None => self.stored_state(&entry.identity)?,
            };
            if state != entry.state {
                tracing::info!(skill = %entry.name, %state, "trust changed on another host");
                self.set_state(&entry, state);
            }
        }
        Ok(())
    }

    /// The entry of `name` and the identity its trust record has; for a skill found on
    /// disk whose first load has not committed (its code may be running now, to list its
    /// tools), no entry and the identity of the candidate that will load, so that a
    /// human's reject, disable or enable applies at once and its load commits the state.
    pub(super) fn identity_of(&self, name: &str) -> Result<(Option<Arc<Entry>>, DataKey), RegistryError> {
        match self.entry(name) {
            Ok(entry) => {
                let identity = entry.identity.clone();
                Ok((Some(entry), identity))
            }
            Err(unknown) => {
                let key = SkillName::new(name).map_err(|_| RegistryError::UnknownSkill { name: name.to_owned() })?;
                let candidate = snapshot::candidates(&self.layers, &key).into_iter().next().ok_or(unknown)?;
                Ok((None, self.identity(&candidate, &key)))
            }
        }
    }
}
