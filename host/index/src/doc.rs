//! What the index holds about a skill and its tools, independent of where it came from.
//!
//! A skill that is not approved is indexed by its name and its tools' names only, with
//! host text for descriptions: nothing it wrote is indexed, embedded or returned in a
//! hit (not even to a human's `skillhost search --include-unapproved`) before a human
//! approved that version. Approving it changes its fingerprint, so it is indexed again
//! in full.

use skillhost_core::Annotations;
use skillhost_registry::{Entry, TrustState, withheld_description, withheld_tool_description};

/// Longest SKILL.md body indexed: beyond it, instructions add noise, not recall.
const MAX_BODY: usize = 8 * 1024;

/// How much a tool may touch, least first: the tie-break order of the search contract (ARCHITECTURE.md)
/// (`pure < read < write < external < stateful`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SideEffects {
    /// Reads nothing outside its input.
    #[default]
    Pure,
    /// Reads from outside (network) without changing anything.
    Read,
    /// May delete or overwrite.
    Write,
    /// Acts on the outside world.
    External,
    /// Changes state we know nothing more about.
    Stateful,
}

impl SideEffects {
    /// Its place in the order, as stored in the index.
    pub(crate) fn rank(self) -> u64 {
        self as u64
    }

    /// Back from [`SideEffects::rank`]; an unknown number is the most cautious class.
    pub(crate) fn from_rank(rank: u64) -> Self {
        [SideEffects::Pure, SideEffects::Read, SideEffects::Write, SideEffects::External]
            .get(rank as usize)
            .copied()
            .unwrap_or(SideEffects::Stateful)
    }

    /// Classify from a tool's hints.
    pub fn of(hints: &Annotations) -> Self {
        match (hints.read_only, hints.open_world, hints.destructive) {
            (true, false, _) => SideEffects::Pure,
            (true, true, _) => SideEffects::Read,
            (false, _, true) => SideEffects::Write,
            (false, true, false) => SideEffects::External,
            (false, false, false) => SideEffects::Stateful,
        }
    }
}

/// One tool as indexed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolDoc {
    /// Its name within the skill.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Ordering tie-break.
    pub side_effects: SideEffects,
}

/// One skill as indexed: everything search matches on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillDoc {
    /// The skill's name.
    pub name: String,
    /// Its description (manifest or SKILL.md frontmatter).
    pub description: String,
    /// `[search] keywords` of its manifest.
    pub keywords: Vec<String>,
    /// `[search] example_queries` of its manifest.
    pub example_queries: Vec<String>,
    /// Its SKILL.md (frontmatter included or not; it is stripped).
    pub instructions: Option<String>,
    /// Its tools.
    pub tools: Vec<ToolDoc>,
    /// Whether it is approved: searches with `approved_only` see only approved skills.
    pub approved: bool,
}

impl SkillDoc {
    /// A skill with a description and nothing else yet.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            keywords: Vec::new(),
            example_queries: Vec::new(),
            instructions: None,
            tools: Vec::new(),
            approved: true,
        }
    }

    /// What the index holds for a registry entry: `None` when it has not loaded or is
    /// disabled (neither is searchable); names and host text only when it is not approved.
    pub fn from_entry(entry: &Entry) -> Option<Self> {
        let loaded = entry.loaded.as_ref()?;
        if entry.state == TrustState::Disabled {
            return None;
        }
        if entry.state != TrustState::Approved {
            let mut doc = Self::new(entry.name.as_str(), withheld_description(entry.name.as_str(), entry.state));
            doc.tools = loaded
                .tools
                .iter()
                .map(|t| ToolDoc {
                    name: t.name.clone(),
                    description: withheld_tool_description(entry.name.as_str(), &t.name, entry.state),
                    side_effects: SideEffects::of(&t.annotations),
                })
                .collect();
            doc.approved = false;
            return Some(doc);
        }
        let (keywords, example_queries) =
            loaded.manifest.as_ref().map(|m| (m.search.keywords.clone(), m.search.example_queries.clone())).unwrap_or_default();
        Some(Self {
            name: entry.name.to_string(),
            description: loaded.description.clone(),
            keywords,
            example_queries,
            instructions: loaded.instructions.clone(),
            tools: loaded
                .tools
                .iter()
                .map(|t| ToolDoc {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    side_effects: SideEffects::of(&t.annotations),
                })
                .collect(),
            approved: entry.state == TrustState::Approved,
        })
    }

    /// A hash of everything indexed about the skill: a skill given again unchanged is
    /// not indexed (nor embedded) again.
    pub(crate) fn content_hash(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        let mut field = |text: &str| {
            hash.update((text.len() as u64).to_le_bytes());
            hash.update(text.as_bytes());
        };
        field(&self.name);
        field(&self.description);
        self.keywords.iter().for_each(|k| field(k));
        field("\u{1}");
        self.example_queries.iter().for_each(|q| field(q));
        field("\u{1}");
        field(self.instructions.as_deref().unwrap_or("\u{0}"));
        for tool in &self.tools {
            field(&tool.name);
            field(&tool.description);
            field(&tool.side_effects.rank().to_string());
        }
        field(if self.approved { "approved" } else { "unapproved" });
        hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The SKILL.md body without its frontmatter, cut to a bounded size.
    pub(crate) fn body(&self) -> &str {
        let Some(md) = self.instructions.as_deref() else { return "" };
        let body = md.strip_prefix("---").and_then(|rest| rest.split_once("\n---").map(|(_, body)| body)).unwrap_or(md);
        if body.len() <= MAX_BODY {
            return body;
        }
        let mut end = MAX_BODY;
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        &body[..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_drops_frontmatter_and_is_bounded() {
        let mut doc = SkillDoc::new("a", "b");
        doc.instructions = Some("---\nname: a\n---\n# Use\nrun it".into());
        assert_eq!(doc.body().trim(), "# Use\nrun it");
        doc.instructions = Some("é".repeat(MAX_BODY));
        assert!(doc.body().len() <= MAX_BODY);
        assert_eq!(SkillDoc::new("a", "b").body(), "");
    }

    #[test]
    fn side_effects_follow_the_contract_order() {
        let of =
            |read_only, open_world, destructive| SideEffects::of(&Annotations { read_only, open_world, destructive, idempotent: false });
        assert!(of(true, false, false) < of(true, true, false));
        assert!(of(true, true, false) < of(false, false, true));
        assert!(of(false, false, true) < of(false, true, false));
        assert!(of(false, true, false) < of(false, false, false));
        for effects in [SideEffects::Pure, SideEffects::Read, SideEffects::Write, SideEffects::External, SideEffects::Stateful] {
            assert_eq!(SideEffects::from_rank(effects.rank()), effects);
        }
    }

    #[test]
    fn content_hash_follows_every_indexed_field() {
        let base = SkillDoc::new("a", "b");
        let mut other = base.clone();
        assert_eq!(base.content_hash(), other.content_hash());
        other.keywords = vec!["x".into()];
        assert_ne!(base.content_hash(), other.content_hash());
        let mut moved = base.clone();
        moved.example_queries = vec!["x".into()];
        assert_ne!(other.content_hash(), moved.content_hash(), "a keyword is not an example");
        let mut unapproved = base.clone();
        unapproved.approved = false;
        assert_ne!(base.content_hash(), unapproved.content_hash());
    }
}
