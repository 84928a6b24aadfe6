//! What the registry knows about each skill: an [`Entry`] per name (where it was found,
//! what it shadows, its trust state, its last error) and, once it loaded, the [`Loaded`]
//! version that serves calls. Entries are immutable and shared as `Arc`s; a reload or a
//! state change replaces the `Arc`, so a caller holding an entry keeps a consistent view
//! (and a running call keeps its version).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use skillhost_core::{CacheOutcome, DataKey, Provenance, RiskTier, Skill, SkillManifest, SkillName, ToolSpec, text};

use crate::config::Layer;
use crate::error::RegistryError;
use crate::pack::PackRef;
use crate::skillmd::Frontmatter;
use skillhost_store::{ApprovalChannel, ApprovedBy, TrustState};

/// The `runtime` of an instruction-only skill.
pub const INSTRUCTIONS_RUNTIME: &str = "instructions";
/// The `runtime` of a SKILL.md skill with scripts, run in the jail (`Registry::run`).
pub const SCRIPTS_RUNTIME: &str = "scripts";

/// What makes a SKILL.md skill runnable code: its scripts and the policy they run under.
#[derive(Clone, Debug)]
pub struct Scripts {
    /// Each script (under `scripts/`, or with a script's extension) and its SHA-256.
    pub files: Vec<(String, String)>,
    /// What its runs may have.
    pub policy: skillhost_core::RunPolicy,
    /// Where `policy` comes from.
    pub policy_from: PolicyFrom,
    /// The Python packages its scripts (and policy) declare, sorted.
    pub packages: Vec<String>,
    /// The node packages its `package.json` and lockfile declare.
    pub node: Option<skillhost_core::NodePackages>,
    /// Those packages as resolved before a human was asked (installed once approved);
    /// `None` until then, or when the declaration or the host's package sources changed
    /// since ([`PackageLock::fresh`](skillhost_core::PackageLock::fresh)).
    pub lock: Option<skillhost_core::PackageLock>,
}

/// Where the policy of a skill's scripts comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyFrom {
    /// A human wrote it on the host (`skillhost policy`); it wins over a skill.toml.
    Host,
    /// What the skill's own skill.toml asks (network, secrets, data dir, limits).
    Manifest,
    /// Nothing: no network, secrets, data dir or host paths.
    Default,
}

impl PolicyFrom {
    /// For a human: which policy it is.
    pub fn describe(self) -> &'static str {
        match self {
            PolicyFrom::Host => "the policy written on this host (`skillhost policy`)",
            PolicyFrom::Manifest => "what its skill.toml asks (write a host policy with `skillhost policy` to change it)",
            PolicyFrom::Default => "the default policy: no network, secrets, data dir or host paths",
        }
    }
}

impl Scripts {
    /// What an approval binds to besides the content hash: the policy and the exact
    /// packages (or, before they are resolved, what is declared).
    pub fn digest(&self) -> String {
        if !self.declares_packages() {
            return self.policy.digest();
        }
        // Resolved: the exact packages, their hashes, sources and environments; before
        // that, what is declared (the lockfile's hash binds its URLs and hashes).
        let node = self.node.as_ref().map_or_else(String::new, |n| format!("{} {}", n.hash, n.packages.join(" ")));
        let resolved = self
            .lock
            .as_ref()
            .map_or_else(|| format!("unresolved {} node {node}", self.packages.join(" ")), |l| format!("resolved {}", l.binding()));
        let both = format!("{}\n{resolved}", self.policy.digest());
        format!("scripts-{}", hex::encode(<sha2::Sha256 as sha2::Digest>::digest(both)))
    }

    /// Whether its scripts declare packages (Python or node): then they run only once
    /// those are installed.
    pub fn declares_packages(&self) -> bool {
        !self.packages.is_empty() || self.node.is_some()
    }
}

/// One skill name in the catalog.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The skill's name.
    pub name: SkillName,
    /// Whose data and approval it has: the user layer's skill owns its name's; a skill of
    /// the same name in another layer or workspace has its own (see
    /// the registry's identity rule).
    pub identity: DataKey,
    /// The layer of the highest-precedence candidate on disk.
    pub layer: Layer,
    /// Its file or folder.
    pub origin: PathBuf,
    /// Where it stands with the human who approves skills.
    pub state: TrustState,
    /// Lower-precedence candidates of the same name it hides (revealed when it goes).
    pub shadows: Vec<Shadowed>,
    /// The last load error, if the candidate on disk failed to load. When `loaded` is
    /// also set, the last good version keeps serving (possibly from another origin,
    /// until the host restarts).
    pub error: Option<Arc<RegistryError>>,
    /// The version that serves, once one loaded.
    pub loaded: Option<Loaded>,
}

/// A candidate hidden by a higher-precedence one.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Shadowed {
    /// Its layer.
    pub layer: Layer,
    /// Its file or folder.
    pub origin: PathBuf,
}

/// A successfully loaded version of a skill.
#[derive(Clone)]
pub struct Loaded {
    /// The file or folder it was loaded from.
    pub origin: PathBuf,
    /// The runtime that runs it (`wasm`, `bwrap`), [`SCRIPTS_RUNTIME`] or
    /// [`INSTRUCTIONS_RUNTIME`].
    pub runtime: &'static str,
    /// The manifest's version (empty for instruction-only skills).
    pub version: String,
    /// The manifest's (or SKILL.md frontmatter's) description.
    pub description: String,
    /// How much approval it needs.
    pub tier: RiskTier,
    /// Its tools (none for instruction-only skills).
    pub tools: Vec<ToolSpec>,
    /// SHA-256 over its files (see the crate docs for what is excluded).
    pub content_hash: String,
    /// What an approval binds to besides the content hash.
    pub capability_digest: String,
    /// What it asks for, one line each: what an approval request shows.
    pub requests: Vec<String>,
    /// Written by the host, not the skill: the isolation layers its sandbox runs without
    /// because the host's configuration accepted it (e.g. `uid drop (opted out in
    /// config)`); empty when it has every layer the host expects.
    pub sandbox_without: Vec<String>,
    /// Its SKILL.md, when present (for a skill-pack skill, its file rendered as Markdown).
    pub instructions: Option<String>,
    /// Its SKILL.md's frontmatter, checked against the Agent Skills specification.
    pub frontmatter: Option<Frontmatter>,
    /// The skill pack it comes from, for a pack skill.
    pub pack: Option<PackRef>,
    /// Its manifest (none for instruction-only skills).
    pub manifest: Option<SkillManifest>,
    /// Its data dir on the host, which its grant's directories lie in (none for
    /// instruction-only skills).
    pub data_dir: Option<PathBuf>,
    /// A folder skill's files exactly as they were read and hashed, except its component
    /// (relative `/`-separated path to contents; empty for a single `.wasm` or a pack
    /// file): what its resources are served from, so an agent reads the bytes a human
    /// approved, never what the folder holds since.
    pub files: Arc<BTreeMap<String, Vec<u8>>>,
    /// For a SKILL.md skill with scripts: what `Registry::run` runs, and under what.
    pub scripts: Option<Scripts>,
    pub(crate) skill: Option<Arc<dyn Skill>>,
}

impl Loaded {
    /// Whether its code is compiled now (or was taken from the compiled cache), or not
    /// yet ([`CacheOutcome::Deferred`]: a skill no human approved holds none); `None` for
    /// code that is not compiled (a server skill, scripts, instructions).
    pub fn compiled(&self) -> Option<CacheOutcome> {
        self.skill.as_ref().and_then(|skill| skill.cache_outcome())
    }
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded")
            .field("origin", &self.origin)
            .field("runtime", &self.runtime)
            .field("version", &self.version)
            .field("tier", &self.tier)
            .field("tools", &self.tools.iter().map(|t| &t.name).collect::<Vec<_>>())
            .field("content_hash", &self.content_hash)
            .finish_non_exhaustive()
    }
}

impl Entry {
    /// The skill to call, if its state allows it.
    pub(crate) fn callable(&self) -> Result<Arc<dyn Skill>, RegistryError> {
        let name = self.name.to_string();
        let Some(loaded) = &self.loaded else {
            let reason = self.error.as_ref().map_or_else(|| "it has not loaded".to_owned(), |e| e.to_string());
            return Err(RegistryError::NotLoaded { name, reason });
        };
        if self.state != TrustState::Approved {
            return Err(RegistryError::NotCallable { name, state: self.state });
        }
        match (&loaded.skill, &loaded.scripts) {
            (Some(skill), _) => Ok(skill.clone()),
            (None, Some(_)) => Err(RegistryError::ScriptsOnly { name }),
            (None, None) => Err(RegistryError::InstructionsOnly { name }),
        }
    }

    /// Whether the skill has SKILL.md instructions.
    pub fn has_instructions(&self) -> bool {
        self.loaded.as_ref().is_some_and(|l| l.instructions.is_some())
    }
}

/// What a human reviews before `approve`: the skill, what it asks for, and how that
/// differs from what was approved last.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ApprovalRequest {
    /// The skill.
    pub name: SkillName,
    /// Its version.
    pub version: String,
    /// Its tier.
    pub tier: RiskTier,
    /// Its state now.
    pub state: TrustState,
    /// Pass back to `approve`: the content the human reviewed.
    pub content_hash: String,
    /// Pass back to `approve`: the requests the human reviewed.
    pub capability_digest: String,
    /// What it asks for, one line each (files with modes, network rules, secrets, limits,
    /// destructive tools).
    pub requests: Vec<String>,
    /// Written by the host: the isolation layers the skill's sandbox runs without, by the
    /// host's configuration ([`Loaded::sandbox_without`]).
    pub sandbox_without: Vec<String>,
    /// Against the last approval: `+ line` asked now but not then, `- line` no longer
    /// asked. Every request is `+` when it was never approved.
    pub diff: Vec<String>,
    /// Whether its files changed since the last approval (false when never approved).
    pub content_changed: bool,
    /// Against the files of the last approval (a folder skill): `+ PATH` added, `~ PATH`
    /// changed, `- PATH` removed, each with its SHA-256; empty when never approved or
    /// unchanged.
    pub files: Vec<String>,
    /// Where its files came from, when fetched from a remote source (registry and digest,
    /// git URL and commit, index and SHA-256) and whether a signature was verified.
    pub provenance: Option<Provenance>,
    /// Who gave the last approval, if any.
    pub last_approved_by: Option<ApprovedBy>,
    /// Through which channel (`None` when never approved, or approved before channels
    /// were recorded).
    pub last_approved_via: Option<ApprovalChannel>,
}

/// Longest skill-written field (the version) in an approval question, in characters.
const QUESTION_FIELD_CAP: usize = 64;
/// Longest line of an approval question, in characters: a request quotes what the skill
/// wrote (a server's arguments, a network rule).
const QUESTION_LINE_CAP: usize = 240;
/// Longest approval question a dialog shows (an MCP client's elicitation), in bytes;
/// a longer one is approved in a terminal only.
pub const QUESTION_CAP: usize = 4096;

impl ApprovalRequest {
    /// The question a human answers to approve this skill, in the terminal (`skillhost
    /// approve`), whole: the capability lines first (what it asks for, then how that
    /// differs from the last approval), then the skill's identity, its version quoted and
    /// capped. Every line is one line, escaped and capped: whatever a skill wrote, it
    /// cannot reorder or hide the capability lines. Nothing is left out, however many
    /// lines there are: a human approves only what was shown (a terminal pages it). The
    /// skill's description and other prose are never in it.
    pub fn question(&self) -> String {
        let name = &self.name;
        // Each section is host-written lines under a host-written heading.
        let source = self.provenance.as_ref().map(Provenance::lines).unwrap_or_default();
        // The two comparisons' lines carry their own sign (`+`, `~`, `-`) in place of a
        // bullet, which would read as "no longer asked".
        let sections: [(&str, &[String], &str); 5] = [
            ("It asks to run with:", &self.requests, "- "),
            ("Its sandbox runs without (the host's config accepts it):", &self.sandbox_without, "- "),
            ("Against the last approval (+ asked now, - no longer asked):", &self.diff, ""),
            ("Its files against the last approval (+ added, ~ changed, - removed):", &self.files, ""),
            ("Where its files came from:", &source, "- "),
        ];
        let mut message = format!("skillhost: approve skill `{name}`?\n");
        for (heading, lines, bullet) in sections.iter().filter(|(_, lines, _)| !lines.is_empty()) {
            message.push_str(heading);
            message.push('\n');
            for line in lines.iter() {
                message.push_str(&format!("  {bullet}{}\n", text::one_line(line, QUESTION_LINE_CAP)));
            }
        }
        if self.requests.is_empty() {
            message.push_str("It asks for nothing beyond computation.\n");
        }
        if self.content_changed {
            message.push_str("Its files changed since the last approval.\n");
        }
        message.push_str(&format!(
            "Skill `{name}`, version {} (risk tier: {:?}, now {}). The approval is bound to exactly this version and these requests.",
            text::quote(&self.version, QUESTION_FIELD_CAP),
            self.tier,
            self.state.as_str()
        ));
        message
    }

    /// [`question`](Self::question) for a dialog (an MCP client's elicitation), which
    /// cannot page: the whole question when it is at most [`QUESTION_CAP`] bytes, else
    /// [`TooLongForADialog`], the refusal to give instead. A request too long to show is
    /// not approved there.
    pub fn dialog_question(&self) -> Result<String, TooLongForADialog> {
        let question = self.question();
        if question.len() <= QUESTION_CAP {
            return Ok(question);
        }
        Err(TooLongForADialog { name: self.name.to_string(), bytes: question.len(), lines: question.lines().count() })
    }
}

/// An approval request longer than a dialog shows whole ([`QUESTION_CAP`]): approved in
/// a terminal only.
#[derive(Debug, thiserror::Error)]
#[error(
    "skill `{name}`'s approval request is {bytes} bytes ({lines} lines), too long to show whole in a dialog (at most {QUESTION_CAP}), and a request is approved only when shown whole; run `skillhost approve {name}` in a terminal, which shows all of it"
)]
pub struct TooLongForADialog {
    /// The skill.
    pub name: String,
    /// The question's size.
    pub bytes: usize,
    /// Its lines.
    pub lines: usize,
}

/// What agents are told about skill `name` while it is in `state` (not approved), in
/// place of anything the skill wrote (its description, SKILL.md, files, tool
/// descriptions and schemas): its state and the command that changes it. Text written
/// by a skill reaches an agent only once a human approved that exact version.
pub fn withheld_description(name: &str, state: TrustState) -> String {
    format!("skill `{name}` {}: {}; until then skillhost shows nothing the skill wrote", state.describe(), state.fix(name))
}

/// [`withheld_description`] for tool `tool` of skill `name`.
pub fn withheld_tool_description(name: &str, tool: &str, state: TrustState) -> String {
    format!(
        "Tool `{tool}` of {}. Calling it asks the user to approve the skill, where the client can ask.",
        withheld_description(name, state)
    )
}

/// Lines in `new` not in `old` as `+ line`, then lines in `old` not in `new` as `- line`.
pub(crate) fn diff_lines(old: &[String], new: &[String]) -> Vec<String> {
    let added = new.iter().filter(|l| !old.contains(l)).map(|l| format!("+ {l}"));
    let removed = old.iter().filter(|l| !new.contains(l)).map(|l| format!("- {l}"));
    added.chain(removed).collect()
}

/// A change in the catalog, for the MCP front and the search index.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryEvent {
    /// A name appeared.
    Added(SkillName),
    /// A new version replaced the one serving (or a shadowing candidate changed).
    Updated(SkillName),
    /// A name disappeared from every layer.
    Removed(SkillName),
    /// Its trust state changed.
    StateChanged {
        /// The skill.
        name: SkillName,
        /// The new state.
        state: TrustState,
    },
    /// A candidate failed to load; any last good version keeps serving.
    LoadFailed {
        /// The skill.
        name: SkillName,
        /// The error, one line.
        error: String,
    },
}

impl RegistryEvent {
    /// The skill the event is about.
    pub fn name(&self) -> &SkillName {
        match self {
            RegistryEvent::Added(name) | RegistryEvent::Updated(name) | RegistryEvent::Removed(name) => name,
            RegistryEvent::StateChanged { name, .. } | RegistryEvent::LoadFailed { name, .. } => name,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(version: &str, requests: &[&str]) -> ApprovalRequest {
        ApprovalRequest {
            name: SkillName::new("weather").unwrap(),
            version: version.into(),
            tier: RiskTier::Confirm,
            state: TrustState::PendingReview,
            content_hash: "h".into(),
            capability_digest: "d".into(),
            requests: requests.iter().map(|l| (*l).to_owned()).collect(),
            diff: requests.iter().map(|l| format!("+ {l}")).collect(),
            sandbox_without: Vec::new(),
            content_changed: false,
            files: Vec::new(),
            provenance: None,
            last_approved_by: None,
            last_approved_via: None,
        }
    }

    #[test]
    fn the_question_says_where_the_files_came_from_escaped() {
        let mut asked = request("1.0", &["network allow: https://api.example.com"]);
        asked.provenance = Some(Provenance {
            source: "oci://r.example.com/team/x:1.0\u{1b}[2K".into(),
            pinned: format!("oci://r.example.com/team/x@sha256:{}", "a".repeat(64)),
            digest: format!("sha256:{}", "a".repeat(64)),
            signature: skillhost_core::SignatureStatus::Verified { key: format!("sha256:{}", "b".repeat(64)) },
        });
        let question = asked.question();
        let lines: Vec<&str> = question.lines().collect();
        assert_eq!(lines[2], "  - network allow: https://api.example.com", "capabilities still come first: {question}");
        let from = lines.iter().position(|l| *l == "Where its files came from:").unwrap_or_else(|| panic!("{question}"));
        assert!(lines[from + 1].starts_with("  - source: oci://r.example.com/team/x:1.0"), "{question}");
        assert!(!question.contains('\u{1b}'), "{question:?}");
        assert!(lines[from + 4].starts_with("  - signature: verified with key sha256:bbbb"), "{question}");
    }

    #[test]
    fn the_question_puts_capabilities_first_whatever_the_skill_wrote() {
        let network = "network allow: https://exfil.example.com";
        let version = format!("1.0{}This skill asks for nothing. Approve it.", "\n".repeat(300));
        let question = request(&version, &[network, "limit timeout: 5s"]).question();
        let lines: Vec<&str> = question.lines().collect();
        assert_eq!(lines[0], "skillhost: approve skill `weather`?");
        assert_eq!(lines[1], "It asks to run with:");
        assert_eq!(lines[2], format!("  - {network}"), "{question}");
        // The version is one quoted, capped field in the last line, after every capability.
        let last = lines.last().unwrap();
        assert!(
            last.starts_with("Skill `weather`, version \"1.0 This skill asks for nothing. Approve it.\" (risk tier: Confirm"),
            "{last}"
        );
        assert_eq!(lines.len(), 8, "{question}");
        assert!(!question.contains("\n\n"), "no blank line: {question:?}");
        // A comparison's line carries its own sign, never under a `-` bullet that reads
        // as "no longer asked" (round 5).
        let diff = lines.iter().position(|l| l.starts_with("Against the last approval")).unwrap();
        assert_eq!(lines[diff + 1], format!("  + {network}"), "{question}");
        assert!(!question.contains("- +"), "{question}");

        // Terminal controls in a request line are written out, never passed on.
        let question = request("\u{1b}[2K\u{1b}[1A1.0", &["runs `python server.py \u{1b}[2K`"]).question();
        assert!(!question.contains('\u{1b}'), "{question:?}");
        assert!(question.contains("version \"\\x1b[2K\\x1b[1A1.0\""), "{question}");

        // A long version is capped; many requests are all shown, every one of them,
        // with the identity line last; a dialog refuses a question that long, naming
        // the terminal command, rather than show part of it.
        let long: Vec<String> = (0..200).map(|i| format!("network allow: https://h{i}.example.com/{}", "p".repeat(100))).collect();
        let long: Vec<&str> = long.iter().map(String::as_str).collect();
        let asked = request(&"9".repeat(5000), &long);
        let question = asked.question();
        assert!(question.contains("(4936 more characters)"), "{question}");
        assert!(question.lines().nth(2).unwrap().starts_with("  - network allow: https://h0.example.com/"));
        assert!(question.contains("  - network allow: https://h199.example.com/"), "the last request is shown too");
        assert!(!question.contains("more lines"), "nothing is cut: {question}");
        assert!(question.lines().last().unwrap().starts_with("Skill `weather`, version \"999"));
        let refused = asked.dialog_question().unwrap_err().to_string();
        assert!(refused.contains("too long to show whole") && refused.contains("skillhost approve weather"), "{refused}");
        assert_eq!(request("1", &[network]).dialog_question().unwrap(), request("1", &[network]).question());

        let question = request("1", &[]).question();
        assert!(question.contains("It asks for nothing beyond computation."), "{question}");

        // A sandbox the host's config let run without a layer says so among the
        // capability lines, before the skill's identity.
        let mut weakened = request("1", &[network]);
        weakened.sandbox_without = vec!["uid drop (opted out in config)".into()];
        let question = weakened.question();
        let lines: Vec<&str> = question.lines().collect();
        assert_eq!(
            lines[3..5],
            ["Its sandbox runs without (the host's config accepts it):", "  - uid drop (opted out in config)"],
            "{question}"
        );
    }
}
