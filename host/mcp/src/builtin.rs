//! The tools skillhost itself offers on MCP, always listed: `tool_search` (find and
//! activate deferred tools), and the skill knowledge tools `skill_list`, `skill_search`,
//! `skill_get` and `read_skill_resource`, and `skill_run` (`run.rs`), which runs what a
//! human approved. None of them changes what a skill may do.

use std::sync::Arc;

use rmcp::handler::server::common::schema_for_type;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use skillhost_access::Action;
use skillhost_index::{Query as IndexQuery, Ranker, SearchIndex, Target};
use skillhost_registry::{Registry, TrustState};

use crate::access::{Refused, Scope};
use crate::knowledge::{self, KnowledgeError};
use crate::search::{Document, Match, SearchError, SearchType, matching};
use crate::tools::ToolEntry;

/// Most results one search returns.
const MAX_LIMIT: usize = 20;

/// A built-in tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// Find tools by what they do; activates them for the session.
    ToolSearch,
    /// Every skill with its state.
    SkillList,
    /// Find skills by what they are for.
    SkillSearch,
    /// A skill's instructions within a token budget.
    SkillGet,
    /// One file of a skill's folder.
    ReadSkillResource,
    /// A command of an approved skill's scripts, in the jail.
    SkillRun,
}

const ALL: [Builtin; 6] =
    [Builtin::ToolSearch, Builtin::SkillList, Builtin::SkillSearch, Builtin::SkillGet, Builtin::ReadSkillResource, Builtin::SkillRun];

/// Every built-in tool.
pub fn all() -> &'static [Builtin] {
    &ALL
}

impl Builtin {
    /// The built-in called `name`, if any.
    pub fn named(name: &str) -> Option<Self> {
        ALL.into_iter().find(|b| b.name() == name)
    }

    /// Its MCP name.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::ToolSearch => "tool_search",
            Builtin::SkillList => "skill_list",
            Builtin::SkillSearch => "skill_search",
            Builtin::SkillGet => "skill_get",
            Builtin::ReadSkillResource => "read_skill_resource",
            Builtin::SkillRun => "skill_run",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Builtin::ToolSearch => {
                "Find skill tools by what they do. Returns tool names, descriptions and scores in [0, 1], best first, and \
                 makes the tools found callable in this session. A score depends only on the query and the tool (not on \
                 limit or the other results); under 0.45 the tool is not a good match, and no_good_match says none was. \
                 search_type: fts (words, default), regex (case-insensitive), exact (a tool name)."
            }
            Builtin::SkillList => {
                "List every skill: name, description, trust state, runtime, number of tools, whether it has instructions."
            }
            Builtin::SkillSearch => {
                "Find skills by what they are for (description, keywords, instructions). Returns names, descriptions and scores in [0, 1] that depend only on the query and the skill; under 0.45 is not a good match."
            }
            Builtin::SkillGet => {
                "Read skills' SKILL.md instructions, cut to max_tokens in all, with what each requires: its tools, its \
                 approval state, the capabilities it holds, and the files read_skill_resource can open; plus its \
                 frontmatter's license, compatibility, metadata and allowed-tools, or the skill pack it comes from."
            }
            Builtin::ReadSkillResource => "Read one file of a skill's folder (e.g. references/api.md) by its path relative to the folder.",
            Builtin::SkillRun => {
                "Run a command of a skill's scripts (runtime `scripts` in skill_list) the way its SKILL.md says, e.g. \
                 [\"python\", \"scripts/fill.py\", \"in.pdf\", \"out.pdf\"], in a sandbox instead of your own shell. The command must \
                 start one of the skill's scripts (`python scripts/x.py`, `python -m scripts.x`, `./scripts/x.sh`, `bash \
                 scripts/x.sh`, `node scripts/x.js`): inline code (`-c`, `-e`) and other programs are refused unless the user \
                 allowed any command for the skill. It gets the \
                 skill's files read-only (their paths work as written), a fresh workspace as the working directory holding \
                 `inputs`, no network, secrets or host files beyond what the user granted the skill. Returns the exit code, \
                 stdout, stderr and the files the run wrote (text inline, images as image content). The skill must be approved."
            }
        }
    }

    /// Its input schema, derived from the arguments it parses (so the two cannot differ).
    fn input_schema(self) -> Arc<JsonObject> {
        match self {
            Builtin::ToolSearch | Builtin::SkillSearch => schema_for_type::<SearchArgs>(),
            Builtin::SkillList => schema_for_type::<NoArgs>(),
            Builtin::SkillGet => schema_for_type::<GetArgs>(),
            Builtin::ReadSkillResource => schema_for_type::<ResourceArgs>(),
            Builtin::SkillRun => crate::run::input_schema(),
        }
    }

    /// The MCP tool definition, with the output schema of the answers typed here.
    pub fn to_mcp(self) -> Tool {
        let annotations = match self {
            // It runs code, whose effects its policy bounds.
            Builtin::SkillRun => ToolAnnotations::new().read_only(false).destructive(false).idempotent(false).open_world(true),
            _ => ToolAnnotations::new().read_only(true).idempotent(true).open_world(false),
        };
        let tool = Tool::new(self.name(), self.description(), self.input_schema()).with_annotations(annotations);
        standard_formats(match self {
            Builtin::ToolSearch => tool.with_output_schema::<ToolSearchOutput>(),
            Builtin::SkillList => tool.with_output_schema::<SkillListOutput>(),
            Builtin::SkillGet => tool.with_output_schema::<SkillGetOutput>(),
            Builtin::SkillSearch => tool.with_output_schema::<SkillSearchOutput>(),
            Builtin::ReadSkillResource => tool.with_output_schema::<ResourceOutput>(),
            Builtin::SkillRun => tool.with_output_schema::<crate::run::RunAnswer>(),
        })
    }
}

/// `tool` with only standard `format`s in its schemas: schemars writes `uint`, `uint32`
/// and the like for Rust's integer types (with `minimum` where it means a range), which
/// clients' validators warn about. The same rule as skills' schemas
/// ([`skillhost_core::standard_formats`]).
pub(crate) fn standard_formats(mut tool: Tool) -> Tool {
    fn standard(schema: &Arc<JsonObject>) -> Arc<JsonObject> {
        let mut value = Value::Object((**schema).clone());
        skillhost_core::standard_formats(&mut value);
        match value {
            Value::Object(object) => Arc::new(object),
            _ => schema.clone(),
        }
    }
    tool.input_schema = standard(&tool.input_schema);
    tool.output_schema = tool.output_schema.as_ref().map(standard);
    tool
}

/// The arguments of `tool_search` and `skill_search`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// What the tool or skill should do, in words (or a pattern or name, by search_type).
    query: String,
    /// How the query is matched.
    #[serde(default)]
    search_type: SearchType,
    /// Most results to return.
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 20))]
    limit: usize,
}

/// `skill_list` takes no arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

fn default_limit() -> usize {
    8
}

/// The arguments of `skill_get`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GetArgs {
    /// The skills to read, by name.
    #[schemars(length(min = 1, max = 10))]
    names: Vec<String>,
    /// Most tokens of instructions returned, for all the skills together.
    #[serde(default = "default_tokens")]
    #[schemars(range(min = 200, max = 6000))]
    max_tokens: usize,
}

fn default_tokens() -> usize {
    1500
}

/// The arguments of `read_skill_resource`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ResourceArgs {
    /// The skill.
    skill: String,
    /// Relative to the skill folder, e.g. SKILL.md or references/api.md.
    path: String,
}

/// Why a built-in tool gave no answer: the agent reads it as the tool's error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuiltinError {
    /// The arguments do not match the tool's input schema.
    #[error("{tool}: invalid input: {source}; see the tool's input schema")]
    Input {
        /// The tool.
        tool: &'static str,
        /// What did not parse.
        source: serde_json::Error,
    },
    /// `skill_get` was given no names, or more than it reads at once.
    #[error("skill_get: give 1 to 10 names")]
    Names,
    /// The query cannot run (a regex that does not compile).
    #[error("{tool}: {source}")]
    Query {
        /// The tool.
        tool: &'static str,
        /// Why.
        source: SearchError,
    },
    /// The search index could not follow the registry or answer.
    #[error("{tool}: the search index failed: {source}; search with search_type \"regex\" meanwhile")]
    Index {
        /// The tool.
        tool: &'static str,
        /// The index's error.
        source: skillhost_index::IndexError,
    },
    /// A skill or one of its resources could not be read.
    #[error(transparent)]
    Knowledge(#[from] KnowledgeError),
    /// None of the skills asked for could be read: why, for each.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    NoneRead(Vec<Unread>),
    /// The org policy refused the caller.
    #[error(transparent)]
    Refused(#[from] Refused),
}

/// Why a skill asked for was not read.
#[derive(Debug, thiserror::Error)]
pub enum Unread {
    /// It could not be.
    #[error(transparent)]
    Knowledge(#[from] KnowledgeError),
    /// The org policy does not let the caller read it.
    #[error(transparent)]
    Refused(#[from] Refused),
}

impl Unread {
    fn kind(&self) -> &'static str {
        match self {
            Unread::Knowledge(e) => e.kind(),
            Unread::Refused(_) => "refused",
        }
    }

    fn fix(&self) -> Option<String> {
        match self {
            Unread::Knowledge(e) => e.fix(),
            Unread::Refused(_) => None,
        }
    }
}

impl crate::failure::AgentFailure for BuiltinError {
    fn kind(&self) -> &'static str {
        match self {
            BuiltinError::Input { .. } | BuiltinError::Names => "invalid_arguments",
            BuiltinError::Query { .. } => "invalid_query",
            BuiltinError::Index { .. } => "index_failed",
            BuiltinError::Knowledge(e) => e.kind(),
            BuiltinError::NoneRead(all) => all.first().map_or("unknown_skill", Unread::kind),
            BuiltinError::Refused(_) => "refused",
        }
    }

    fn fix(&self) -> Option<String> {
        match self {
            BuiltinError::Input { .. } | BuiltinError::Names => Some(crate::failure::FIX_ARGUMENTS.into()),
            BuiltinError::Query { .. } => Some("fix the pattern, or search plain words with search_type \"fts\"".into()),
            BuiltinError::Index { .. } => Some("search with search_type \"regex\" meanwhile".into()),
            BuiltinError::Knowledge(e) => e.fix(),
            BuiltinError::NoneRead(all) => all.first().and_then(Unread::fix),
            BuiltinError::Refused(_) => None,
        }
    }
}

fn parse<T: DeserializeOwned>(tool: &'static str, args: &JsonObject) -> Result<T, BuiltinError> {
    serde_json::from_value(Value::Object(args.clone())).map_err(|source| BuiltinError::Input { tool, source })
}

/// Told to the agent when no result matched its request well: it can ask for a skill.
const NO_MATCH_HINT: &str = "No tool matched this request well. If none of these does what you need, a new skill \
                             can be created for it: ask the user (skillhost new NAME builds one; a human approves it before it runs).";

/// Which ranker answered a search and, for full-text search, why it is that one and
/// whether anything matched well (with, when nothing did, the hint that a skill can be
/// created).
#[derive(Serialize, JsonSchema)]
struct Ranking {
    /// `bm25` or `hybrid` (the search index), `regex` or `exact`.
    ranker: String,
    /// Full-text search only: why this ranker answered. A session keeps the ranker of
    /// its first full-text search, so the same query keeps its order within a session.
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<String>,
    /// Full-text search only: whether no result matched well.
    #[serde(skip_serializing_if = "Option::is_none")]
    no_good_match: Option<bool>,
    /// When nothing matched well: what the agent can do instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
}

impl Ranking {
    fn new(ranker: String, why: Option<String>, weak: Option<bool>) -> Self {
        Self { ranker, why, no_good_match: weak, hint: (weak == Some(true)).then(|| NO_MATCH_HINT.to_owned()) }
    }
}

/// The search index a session's full-text searches rank with, fixed at its first one,
/// and why it is that one.
#[derive(Clone)]
pub struct SessionIndex {
    index: Arc<SearchIndex>,
    why: String,
}

impl SessionIndex {
    /// Fix `index` for a session. `still_loading`: a better index was still opening after
    /// waiting that long; `failed`: why one that was opening did not come.
    pub fn pin(index: Arc<SearchIndex>, still_loading: Option<std::time::Duration>, failed: Option<String>) -> Self {
        let why = match (index.ranker(), still_loading, failed) {
            (Ranker::Hybrid, ..) => {
                "the embedding model is loaded: words matched blended with its similarity, for the rest of this session".to_owned()
            }
            (Ranker::Bm25, Some(waited), _) => format!(
                "the embedding model was still loading {} s after this session's first search; the session keeps BM25 so that a query keeps its order (a new session gets the model)",
                waited.as_secs()
            ),
            (Ranker::Bm25, None, Some(failed)) => {
                format!("the search index with the embedding model did not open ({failed}); BM25 for this session")
            }
            (Ranker::Bm25, None, None) => {
                "no embedding model is installed (`skillhost setup model` installs it); BM25 for this session".to_owned()
            }
        };
        Self { index, why }
    }
}

/// Whether `args` ask `tool_search` or `skill_search` for a full-text search (the
/// default), the one that ranks with the search index.
pub fn is_full_text(args: &JsonObject) -> bool {
    args.get("search_type").and_then(Value::as_str).is_none_or(|t| t == "fts")
}

/// How a tool `tool_search` found is offered to the session.
#[derive(Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum LoadingMode {
    /// Listed once a search found it (the session's tool list is deferred).
    Deferred,
    /// Always listed.
    Always,
}

/// What `tool_search` answers.
#[derive(Serialize, JsonSchema)]
struct ToolSearchOutput {
    /// The query, as given.
    query: String,
    /// How it was matched.
    search_type: SearchType,
    /// The tools found, best first.
    tools: Vec<FoundTool>,
    #[serde(flatten)]
    ranking: Ranking,
}

/// One tool `tool_search` found.
#[derive(Serialize, JsonSchema)]
struct FoundTool {
    /// Its MCP name (`SKILL__TOOL`).
    name: String,
    /// What it does.
    description: String,
    /// In `[0, 1]`, a function of the query and the tool alone.
    score: f64,
    /// How the query matched.
    match_type: SearchType,
    /// How it is offered to the session.
    loading_mode: LoadingMode,
}

/// What `skill_search` answers.
#[derive(Serialize, JsonSchema)]
struct SkillSearchOutput {
    /// The query, as given.
    query: String,
    /// How it was matched.
    search_type: SearchType,
    /// The skills found, best first.
    skills: Vec<FoundSkill>,
    #[serde(flatten)]
    ranking: Ranking,
}

/// One skill `skill_search` found.
#[derive(Serialize, JsonSchema)]
struct FoundSkill {
    /// Its name.
    name: String,
    /// What it is for.
    description: String,
    /// In `[0, 1]`, a function of the query and the skill alone.
    score: f64,
}

/// What `read_skill_resource` answers.
#[derive(Serialize, JsonSchema)]
struct ResourceOutput {
    /// The skill.
    skill: String,
    /// The file, relative to the skill's folder.
    path: String,
    /// Its text.
    text: String,
}

/// A typed answer as the JSON the MCP front sends.
fn to_value(output: impl Serialize) -> Value {
    serde_json::to_value(output).unwrap_or(Value::Null)
}

/// What one search found: the items with their scores, best first; the ranker that
/// answered; and, when the index ranked them, whether nothing matched well.
struct Ranked<'a, T> {
    hits: Vec<(&'a T, f64)>,
    ranker: String,
    why: Option<String>,
    weak: Option<bool>,
}

/// The one search of `tool_search` and `skill_search` over `items`: `fts` goes to the
/// search index, synced with the registry first (cheap when nothing changed), its hits
/// mapped back to `items` by `is_hit` (the registry has the last word, so a hit that is
/// not among `items` is dropped); `regex` and `exact` use the matcher of `search` over
/// each item's `document`.
fn rank<'a, T>(
    args: &SearchArgs,
    registry: &Registry,
    index: &SessionIndex,
    target: Target,
    items: &'a [T],
    is_hit: impl Fn(&T, &skillhost_index::Hit) -> bool,
    document: impl Fn(&'a T) -> Document<'a>,
) -> Result<Ranked<'a, T>, BuiltinError> {
    let tool = match target {
        Target::Tools => "tool_search",
        Target::Skills => "skill_search",
    };
    let limit = args.limit.clamp(1, MAX_LIMIT);
    let mode = match args.search_type {
        SearchType::Fts => {
            let failed = |source| BuiltinError::Index { tool, source };
            index.index.sync(registry).map_err(failed)?;
            let found = index.index.search(&IndexQuery::new(&args.query, target).limit(limit)).map_err(failed)?;
            let hits = found.hits.iter().filter_map(|h| items.iter().find(|item| is_hit(item, h)).map(|item| (item, h.score))).collect();
            let why = Some(index.why.clone());
            return Ok(Ranked { hits, ranker: found.ranker.as_str().to_owned(), why, weak: Some(found.weak()) });
        }
        SearchType::Regex => Match::Regex,
        SearchType::Exact => Match::Exact,
    };
    let docs: Vec<Document<'a>> = items.iter().map(document).collect();
    let hits = matching(&docs, &args.query, mode, limit).map_err(|source| BuiltinError::Query { tool, source })?;
    let ranker = match mode {
        Match::Regex => "regex",
        Match::Exact => "exact",
    };
    Ok(Ranked { hits: hits.iter().map(|h| (&items[h.index], h.score)).collect(), ranker: ranker.to_owned(), why: None, weak: None })
}

/// `tool_search` over `tools` (the caller's [`table`](crate::tools::table)), approved ones only. Returns the
/// response and the names found (to activate). `deferred` says how the found tools are
/// loaded, for the response.
pub(crate) fn tool_search(
    registry: &Registry,
    index: &SessionIndex,
    args: &JsonObject,
    deferred: bool,
    tools: Vec<ToolEntry>,
) -> Result<(Value, Vec<String>), BuiltinError> {
    let args: SearchArgs = parse("tool_search", args)?;
    let tools: Vec<ToolEntry> = tools.into_iter().filter(ToolEntry::approved).collect();
    let loading_mode = if deferred { LoadingMode::Deferred } else { LoadingMode::Always };
    let Ranked { hits: scored, ranker, why, weak } = rank(
        &args,
        registry,
        index,
        Target::Tools,
        &tools,
        |tool, hit| tool.name == hit.public_name(),
        |tool| Document {
            name: &tool.name,
            alias: Some(&tool.spec.name),
            text: format!("{} {}", tool.skill, tool.spec.description),
            side_effects: tool.side_effects(),
        },
    )?;
    let found: Vec<String> = scored.iter().map(|(t, _)| t.name.clone()).collect();
    let tools = scored
        .iter()
        .map(|(tool, score)| FoundTool {
            name: tool.name.clone(),
            description: tool.description(),
            score: *score,
            match_type: args.search_type,
            loading_mode,
        })
        .collect();
    if weak == Some(true)
        && let Some(stats) = registry.stats()
    {
        stats.record_miss(&args.query);
    }
    let output = ToolSearchOutput { query: args.query, search_type: args.search_type, tools, ranking: Ranking::new(ranker, why, weak) };
    Ok((to_value(output), found))
}

/// `skill_search`: approved skills only.
pub(crate) fn skill_search(registry: &Registry, index: &SessionIndex, args: &JsonObject, scope: &Scope) -> Result<Value, BuiltinError> {
    let args: SearchArgs = parse("skill_search", args)?;
    let skills: Vec<_> = knowledge::skills(registry, scope).into_iter().filter(|e| e.state == TrustState::Approved).collect();
    let Ranked { hits, ranker, why, weak } = rank(
        &args,
        registry,
        index,
        Target::Skills,
        &skills,
        |entry, hit| entry.name.as_str() == hit.skill,
        |entry| Document {
            name: entry.name.as_str(),
            alias: None,
            text: knowledge::search_text(entry),
            side_effects: crate::tools::SideEffects::Pure,
        },
    )?;
    let skills = hits
        .iter()
        .map(|(entry, score)| FoundSkill { name: entry.name.to_string(), description: knowledge::description(entry), score: *score })
        .collect();
    Ok(to_value(SkillSearchOutput { query: args.query, search_type: args.search_type, skills, ranking: Ranking::new(ranker, why, weak) }))
}

/// What `skill_list` answers.
#[derive(Serialize, JsonSchema)]
struct SkillListOutput {
    /// Every skill an agent may learn about, by name.
    skills: Vec<knowledge::SkillSummary>,
    /// Skills found at start that have not loaded yet: they join tools/list (announced
    /// with list_changed) when ready, and a call to one of their tools waits for it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    loading: Vec<String>,
}

/// What `skill_get` answers.
#[derive(Serialize, JsonSchema)]
struct SkillGetOutput {
    /// The skills read, in the order asked.
    skills: Vec<knowledge::SkillKnowledge>,
    /// Why each skill that was not read was not, one line each.
    errors: Vec<String>,
}

/// `skill_list`.
pub(crate) fn skill_list(registry: &Registry, scope: &Scope) -> Value {
    // Say which skills fail often, so the agent can fix them.
    let failing = registry.stats().map(|s| s.failing_map()).unwrap_or_default();
    let skills = knowledge::skills(registry, scope)
        .iter()
        .filter_map(|e| knowledge::summary(e))
        .map(|mut summary| {
            summary.failing = failing
                .get(&summary.name)
                .map(|f| format!("failed {} of its last {} calls; fix it with skill_update if it is yours", f.failures, f.calls));
            summary
        })
        .collect();
    let loading = if scope.restricted() { Vec::new() } else { registry.loading().iter().map(ToString::to_string).collect() };
    to_value(SkillListOutput { skills, loading })
}

/// `skill_get`: the budget is shared evenly between the skills asked for.
pub(crate) fn skill_get(registry: &Registry, args: &JsonObject, scope: &Scope) -> Result<Value, BuiltinError> {
    let args: GetArgs = parse("skill_get", args)?;
    if args.names.is_empty() || args.names.len() > 10 {
        return Err(BuiltinError::Names);
    }
    let budget = args.max_tokens.clamp(200, 6000) / args.names.len();
    let mut skills = Vec::new();
    let mut errors = Vec::new();
    for name in &args.names {
        if let Err(refused) = scope.check_skill(Action::Read, name, registry.entry(name).ok().as_deref()) {
            errors.push(Unread::Refused(refused));
            continue;
        }
        match knowledge::get(registry, name, budget) {
            Ok(skill) => skills.push(skill),
            Err(e) => errors.push(Unread::Knowledge(e)),
        }
    }
    if skills.is_empty() {
        return Err(BuiltinError::NoneRead(errors));
    }
    let errors = errors.iter().map(ToString::to_string).collect();
    Ok(to_value(SkillGetOutput { skills, errors }))
}

/// `read_skill_resource`.
pub(crate) fn read_skill_resource(registry: &Registry, args: &JsonObject, scope: &Scope) -> Result<Value, BuiltinError> {
    let args: ResourceArgs = parse("read_skill_resource", args)?;
    scope.check_skill(Action::Read, &args.skill, registry.entry(&args.skill).ok().as_deref())?;
    let text = knowledge::read_resource(registry, &args.skill, &args.path)?;
    Ok(to_value(ResourceOutput { skill: args.skill, path: args.path, text }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_host_tool_name_is_reserved_for_skills() {
        // Skills cannot load a tool named like one of these (checked in skillhost-core).
        let mut names: Vec<String> = all().iter().map(|b| b.name().to_owned()).collect();
        names.extend(crate::forge::ForgeTool::all().into_iter().map(|t| t.name.to_string()));
        for name in &names {
            assert!(skillhost_core::RESERVED_TOOL_NAMES.contains(&name.as_str()), "`{name}` is not in RESERVED_TOOL_NAMES");
        }
    }

    #[test]
    fn search_descriptions_quote_the_weak_match_threshold() {
        let threshold = format!("under {}", skillhost_index::WEAK_MATCH);
        for builtin in [Builtin::ToolSearch, Builtin::SkillSearch] {
            let text = builtin.description();
            assert!(text.contains(&threshold), "{} must say `{threshold}`: {text}", builtin.name());
            assert!(!text.contains("comparable within"), "{text}");
        }
    }

    #[test]
    fn built_in_schemas_use_only_standard_formats() {
        fn formats(value: &Value, out: &mut Vec<String>) {
            match value {
                Value::Object(map) => map.iter().for_each(|(key, value)| match (key.as_str(), value) {
                    ("format", Value::String(f)) => out.push(f.clone()),
                    _ => formats(value, out),
                }),
                Value::Array(items) => items.iter().for_each(|item| formats(item, out)),
                _ => {}
            }
        }
        let tools: Vec<Tool> = all().iter().map(|b| b.to_mcp()).chain(crate::forge::ForgeTool::all()).collect();
        let mut found = Vec::new();
        for tool in &tools {
            formats(&Value::Object((*tool.input_schema).clone()), &mut found);
            if let Some(schema) = &tool.output_schema {
                formats(&Value::Object((**schema).clone()), &mut found);
            }
        }
        let odd: Vec<&String> = found.iter().filter(|f| !skillhost_core::STANDARD_FORMATS.contains(&f.as_str())).collect();
        assert!(odd.is_empty(), "non-standard formats: {odd:?}");
        // The ranges schemars meant by `uint`/`uint32` stay, as `minimum` and `maximum`.
        let search = Value::Object((*Builtin::ToolSearch.to_mcp().input_schema).clone());
        assert_eq!(
            (&search["properties"]["limit"]["minimum"], &search["properties"]["limit"]["maximum"]),
            (&json!(1), &json!(20)),
            "{search}"
        );
    }

    #[test]
    fn every_built_in_has_an_output_schema() {
        for builtin in all() {
            assert!(builtin.to_mcp().output_schema.is_some(), "{} has no output schema", builtin.name());
        }
    }

    #[test]
    fn typed_answers_carry_their_output_schema() {
        let schema = |b: Builtin| Value::Object((*b.to_mcp().output_schema.expect("an output schema")).clone());
        let search = schema(Builtin::ToolSearch);
        for field in ["query", "search_type", "tools", "ranker"] {
            assert!(search["required"].as_array().unwrap().contains(&json!(field)), "`{field}` not required: {search}");
        }
        assert!(search["properties"]["no_good_match"].is_object() && search["properties"]["hint"].is_object(), "{search}");
        assert!(schema(Builtin::SkillSearch)["properties"]["skills"].is_object());
        assert!(schema(Builtin::ReadSkillResource)["properties"]["text"].is_object());
        // What a weak search answers: the hint only when nothing matched well.
        let weak = to_value(Ranking::new("bm25".into(), None, Some(true)));
        assert_eq!((&weak["no_good_match"], weak["hint"].as_str()), (&json!(true), Some(NO_MATCH_HINT)));
        let regex = to_value(Ranking::new("regex".into(), None, None));
        assert_eq!(regex, json!({"ranker": "regex"}));
    }

    #[test]
    fn each_input_schema_is_the_contract_its_arguments_parse() {
        let schema = |b: Builtin| Value::Object((*b.to_mcp().input_schema).clone());
        let search = schema(Builtin::ToolSearch);
        assert_eq!(search["required"], json!(["query"]), "{search}");
        assert_eq!(search["additionalProperties"], json!(false), "{search}");
        assert_eq!((&search["properties"]["limit"]["minimum"], &search["properties"]["limit"]["maximum"]), (&json!(1), &json!(MAX_LIMIT)));
        assert_eq!(search["properties"]["limit"]["default"], json!(8), "{search}");
        let modes = search.to_string();
        assert!(["fts", "regex", "exact"].iter().all(|m| modes.contains(&format!("\"{m}\""))), "{search}");
        let get = schema(Builtin::SkillGet);
        assert_eq!(get["required"], json!(["names"]), "{get}");
        assert_eq!((&get["properties"]["names"]["minItems"], &get["properties"]["names"]["maxItems"]), (&json!(1), &json!(10)));
        assert_eq!(get["properties"]["max_tokens"]["default"], json!(1500), "{get}");
        let resource = schema(Builtin::ReadSkillResource);
        assert_eq!(resource["required"], json!(["skill", "path"]), "{resource}");
        assert_eq!(schema(Builtin::SkillList)["additionalProperties"], json!(false));
        // What the schema allows, the arguments parse; what it forbids, they refuse.
        let args = |v: Value| v.as_object().unwrap().clone();
        assert!(parse::<SearchArgs>("t", &args(json!({"query": "x", "search_type": "regex", "limit": 3}))).is_ok());
        assert!(parse::<SearchArgs>("t", &args(json!({"query": "x", "other": 1}))).is_err());
    }
}
