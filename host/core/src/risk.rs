//! What a skill asks for, reduced to what an approval binds to: the capability digest
//! (any change to the requests changes it) and the risk tier that decides how much a
//! human must confirm before the skill runs.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::grant::FileMode;
use crate::manifest::SkillManifest;
use crate::tool::ToolSpec;

/// How much human attention a skill needs before it may run. Ordered: a higher tier
/// needs everything a lower one does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskTier {
    /// Pure computation, with no data of its own: approved automatically.
    Auto,
    /// Reads files of its data dir, or reaches declared network hosts: a human confirms.
    /// Data a skill stored is never handed to code no human looked at, whether that code
    /// is a new version of the skill (an agent's forge update), a skill of the same name
    /// after the first was removed, or a server whose tools were read at load.
    Confirm,
    /// Uses secrets, writes files or offers destructive tools: a human approves explicitly.
    Explicit,
}

impl RiskTier {
    /// The tier of a manifest's requests.
    pub fn of(manifest: &SkillManifest) -> Self {
        let server_secrets = manifest.server.as_ref().is_some_and(|s| !s.secrets.is_empty());
        if !manifest.secrets.is_empty() || server_secrets || manifest.files.iter().any(|f| f.mode == FileMode::ReadWrite) {
            RiskTier::Explicit
        } else if !manifest.network.is_empty() || !manifest.files.is_empty() {
            RiskTier::Confirm
        } else {
            RiskTier::Auto
        }
    }

    /// Raise the tier for what the tools say of themselves: a destructive tool needs an
    /// explicit approval.
    pub fn with_tools(self, tools: &[ToolSpec]) -> Self {
        if tools.iter().any(|t| t.annotations.destructive) { self.max(RiskTier::Explicit) } else { self }
    }
}

impl SkillManifest {
    /// What this skill asks for that a [probe grant](crate::Grant::probe) withholds and
    /// no scratch dir stands in for, as a human reads it (`network (https://api.example.com)
    /// and secrets (API_KEY)`); `None` when it asks for neither. Such a skill cannot be
    /// tried meaningfully before a human approved it.
    pub fn probe_withholds(&self) -> Option<String> {
        let mut asks = Vec::new();
        let network = &self.network;
        if !network.is_empty() {
            let origins: Vec<&str> = network.allow.iter().chain(&network.private).map(|r| r.text.as_str()).collect();
            asks.push(format!("network ({})", origins.join(", ")));
        }
        let mut secrets: Vec<&str> = self.secrets.iter().map(|s| s.name.as_str()).collect();
        if let Some(server) = &self.server {
            secrets.extend(server.secrets.iter().map(|s| s.name.as_str()));
        }
        if !secrets.is_empty() {
            asks.push(format!("secrets ({})", secrets.join(", ")));
        }
        (!asks.is_empty()).then(|| asks.join(" and "))
    }

    /// A digest of everything the skill asks for. An approval is bound to it: a skill
    /// whose requests change (widened or narrowed) no longer matches its approval.
    pub fn capability_digest(&self) -> String {
        #[derive(Serialize)]
        struct Requests<'a> {
            files: &'a [crate::manifest::FileCapability],
            limits: &'a crate::limits::LimitsRequest,
            network: &'a crate::egress::EgressPolicy,
            secrets: &'a [crate::egress::SecretBinding],
            // Absent (not empty) for skills without any, so their digests are unchanged.
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            server_secrets: &'a [crate::server::EnvSecret],
        }
        let server_secrets = self.server.as_ref().map_or(&[][..], |s| &s.secrets[..]);
        let requests =
            Requests { files: &self.files, limits: &self.limits, network: &self.network, secrets: &self.secrets, server_secrets };
        let canonical = serde_json::to_vec(&requests).expect("requests serialise");
        hex::encode(Sha256::digest(canonical))
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::tool::Annotations;

    use crate::manifest::test_manifest as manifest;

    #[test]
    fn tiers() {
        let ro = "[[capabilities.files]]\npath = \".\"\nmode = \"ro\"\n";
        let rw = "[[capabilities.files]]\npath = \".\"\nmode = \"rw\"\n";
        assert_eq!(RiskTier::of(&manifest("")), RiskTier::Auto);
        assert_eq!(RiskTier::of(&manifest(ro)), RiskTier::Confirm);
        assert_eq!(RiskTier::of(&manifest(rw)), RiskTier::Explicit);
        let net = "[network]\nallow = [\"https://a.org\"]\n";
        assert_eq!(RiskTier::of(&manifest(net)), RiskTier::Confirm);
        let secret = format!("{net}[[secrets]]\nname = \"k\"\nheader = \"X-Key\"\nhosts = [\"https://a.org\"]\n");
        assert_eq!(RiskTier::of(&manifest(&secret)), RiskTier::Explicit);
        let server = "[server]\ncommand = \"python\"\nargs = [\"server.py\"]\n";
        assert_eq!(RiskTier::of(&manifest(server)), RiskTier::Auto);
        assert_eq!(RiskTier::of(&manifest(&format!("{net}{server}"))), RiskTier::Confirm);
        let env = format!("{server}[[server.secrets]]\nname = \"k\"\nenv = \"API_KEY\"\n");
        assert_eq!(RiskTier::of(&manifest(&env)), RiskTier::Explicit);
        let destructive = ToolSpec {
            name: "rm".into(),
            description: "d".into(),
            input_schema: serde_json::json!({}),
            output_schema: None,
            annotations: Annotations { destructive: true, ..Annotations::default() },
            examples: vec![],
        };
        assert_eq!(RiskTier::Auto.with_tools(&[destructive]), RiskTier::Explicit);
    }

    #[test]
    fn digest_follows_requests_only() {
        let base = manifest("");
        assert_eq!(
            base.capability_digest(),
            manifest("[search]\nkeywords = [\"x\"]\n").capability_digest(),
            "search metadata is not a capability"
        );
        assert_ne!(base.capability_digest(), manifest("[[capabilities.files]]\npath = \".\"\nmode = \"ro\"\n").capability_digest());
        assert_ne!(base.capability_digest(), manifest("[limits]\nmemory = \"128MiB\"\n").capability_digest());
        assert_ne!(base.capability_digest(), manifest("[network]\nallow = [\"https://a.org\"]\n").capability_digest());
        let server = "[server]\ncommand = \"python\"\n";
        assert_eq!(base.capability_digest(), manifest(server).capability_digest(), "the command is covered by the content hash");
        let env = format!("{server}[[server.secrets]]\nname = \"k\"\nenv = \"API_KEY\"\n");
        assert_ne!(base.capability_digest(), manifest(&env).capability_digest());
    }
}
