//! [`OrgPolicy`]: what each caller may do, in Cedar.
//!
//! The org policy is a directory of `*.cedar` files, reviewed like code. Each policy
//! names its principal (`Caller::"NAME"`, or `principal in Group::"NAME"`), its action and
//! its resource (`Skill::"NAME"`, or `Tool::"SKILL__TOOL"`, a tool being in its skill) in
//! the schema [`SCHEMA`]. Nothing is allowed unless a `permit` allows it, and a `forbid`
//! that applies beats every `permit`. Each policy is known by its `@id("…")` annotation,
//! else by `FILE:N` (its file's name and place in it), and that id is what a refusal and
//! the audit name. A permit annotated `@require_approval` allows only once a human said
//! yes to that call.
//!
//! A set is [`load`](OrgPolicy::load)ed whole: every file parsed and the whole set
//! validated against the schema (an unknown entity type, action or attribute, a
//! comparison of the wrong types), or refused with what is wrong where; [`Policies`]
//! swaps a new set in only once it loaded, so a bad edit leaves the set in force serving.
//!
//! A decision is made against the caller's slice of the set: the policies whose principal
//! and action scopes can hold for that caller and action (a policy naming another caller,
//! a group the caller is not in, or another action never applies, so leaving it out
//! changes no decision). Each [`OrgPolicy`] keeps the slices it made, with the caller's
//! entities built once, in a cache of at most [`MAX_SLICES`] slices and
//! [`MAX_SLICE_BYTES`], emptied when full; a reload is a new [`OrgPolicy`], so it starts
//! with an empty cache.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use cedar_policy::{
    ActionConstraint, Authorizer, Context, Entities, Entity, EntityId, EntityTypeName, EntityUid, Policy, PolicyId, PolicySet,
    PrincipalConstraint, Request, RestrictedExpression, Schema, ValidationMode, Validator,
};
use parking_lot::{Mutex, RwLock};

use crate::caller::Caller;

/// The schema every policy is validated against.
pub const SCHEMA: &str = r#"// Someone reaching the host: a `skillhost caller add` token's caller, an OAuth
// access token's subject, or `operator` (the token `serve --http` was given).
entity Group;
entity Caller in [Group] {
  // "operator", "token" or "oauth".
  via: String,
  // The scopes of its OAuth access token (empty for a token).
  scopes: Set<String>,
};
entity Skill {
  // "wasm", "bwrap" (a sandboxed server), "scripts" or "instructions".
  runtime: String,
};
// A tool, named SKILL__TOOL as agents see it, in its skill.
entity Tool in [Skill] {
  skill: String,
  name: String,
};
// See a skill in skills/list and the instructions; read its files (skill_get,
// resources); run its scripts (skill_run); write it through the forge (skill_create,
// skill_update); answer the question whether a human approves it.
action list, read, run, create, update, approve appliesTo { principal: Caller, resource: Skill };
// Call a tool (and see it in tools/list and tool_search).
action call appliesTo { principal: Caller, resource: Tool };
"#;

/// Files of a policy directory read, at most.
pub const MAX_FILES: usize = 256;
/// Bytes of one policy file read, at most.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// Slices (one a caller and action) an [`OrgPolicy`] keeps, at most; a full cache is
/// emptied (simple, and it fills again from the callers actually calling).
pub const MAX_SLICES: usize = 4096;
/// Bytes of policy text (each slice holds its policies' own copy) and of callers' names,
/// groups and scopes the slices of an [`OrgPolicy`] hold, at most, beyond the last slice
/// made; past it the cache is emptied too.
pub const MAX_SLICE_BYTES: usize = 64 << 20;

/// What a caller asks to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// See a skill in listings.
    List,
    /// Read a skill's files.
    Read,
    /// Call a tool.
    Call,
    /// Run a skill's scripts.
    Run,
    /// Create a skill through the forge.
    Create,
    /// Update a skill through the forge.
    Update,
    /// Answer an approval question about a skill.
    Approve,
}

impl Action {
    /// Its name in the schema.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::List => "list",
            Action::Read => "read",
            Action::Call => "call",
            Action::Run => "run",
            Action::Create => "create",
            Action::Update => "update",
            Action::Approve => "approve",
        }
    }
}

/// What an action is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target<'a> {
    /// A skill, and the runtime that runs it.
    Skill {
        /// Its name.
        name: &'a str,
        /// `wasm`, `bwrap`, `scripts`, `instructions` (empty when not known yet: a skill
        /// the forge is asked to create).
        runtime: &'a str,
    },
    /// A tool.
    Tool {
        /// Its skill.
        skill: &'a str,
        /// Its name in its skill.
        tool: &'a str,
        /// Its name as agents see it (`SKILL__TOOL`), the entity's id.
        public: &'a str,
    },
}

impl Target<'_> {
    /// How the audit names it: `Skill::"notes"`, `Tool::"notes__read"`.
    pub fn shown(&self) -> String {
        match self {
            Target::Skill { name, .. } => format!("Skill::{name:?}"),
            Target::Tool { public, .. } => format!("Tool::{public:?}"),
        }
    }
}

/// What the policy decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Whether it is allowed.
    pub allowed: bool,
    /// The policies that decided it: the permits that allowed it, or the forbids that
    /// refused it (none: no permit applied, the default deny).
    pub policies: Vec<String>,
    /// A permit that allowed it asks for a human's approval of the call first.
    pub require_approval: bool,
}

impl Decision {
    /// Why, in words: `permitted by readers-read`, `forbidden by no-writes`, `no policy
    /// permits it`.
    pub fn reason(&self) -> String {
        match (self.allowed, self.policies.as_slice()) {
            (false, []) => "no policy permits it (the org policy denies what it does not permit)".to_owned(),
            (allowed, ids) => {
                let ids: Vec<String> = ids.iter().map(|id| format!("`{id}`")).collect();
                format!("{} by {}", if allowed { "permitted" } else { "forbidden" }, ids.join(", "))
            }
        }
    }
}

/// Why an org policy cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A file or the directory could not be read.
    #[error("org policy {}: {message}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// A file does not parse.
    #[error("org policy {}: {message}; see docs/org-policy.md for the syntax", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// The set does not validate against the schema.
    #[error("org policy {}: {}; the schema is in docs/org-policy.md (`skillhost policy schema` prints it)", dir.display(), problems.join("; "))]
    Invalid {
        /// The directory.
        dir: PathBuf,
        /// What is wrong, each naming its policy.
        problems: Vec<String>,
    },
}

/// A loaded, validated org policy.
pub struct OrgPolicy {
    schema: Schema,
    policies: PolicySet,
    authorizer: Authorizer,
    /// The ids of the permits annotated `@require_approval`.
    approval: HashSet<PolicyId>,
    count: usize,
    types: Types,
    /// Each policy's weight in the slice cache: the length of its text.
    weights: HashMap<PolicyId, usize>,
    slices: Mutex<Slices>,
}

impl std::fmt::Debug for OrgPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrgPolicy").field("policies", &self.count).finish_non_exhaustive()
    }
}

/// The schema's entity types, parsed once (parsing one is a good part of a request's
/// cost).
struct Types {
    caller: EntityTypeName,
    group: EntityTypeName,
    skill: EntityTypeName,
    tool: EntityTypeName,
    action: EntityTypeName,
}

impl Types {
    fn new() -> Self {
        // These are this crate's own names: a test decides with each.
        let parse = |name: &str| EntityTypeName::from_str(name).unwrap_or_else(|e| unreachable!("`{name}` is a type name: {e}"));
        Self { caller: parse("Caller"), group: parse("Group"), skill: parse("Skill"), tool: parse("Tool"), action: parse("Action") }
    }

    fn uid(kind: &EntityTypeName, id: &str) -> EntityUid {
        EntityUid::from_type_name_and_id(kind.clone(), EntityId::new(id))
    }
}

/// The policies that can apply to one caller doing one action, and the caller's entities.
struct Slice {
    caller: Caller,
    action: Action,
    policies: PolicySet,
    principal: EntityUid,
    action_uid: EntityUid,
    /// The caller's entity and its groups', their hierarchy closed once (`None`: they
    /// could not be made, and every request is refused).
    entities: Option<Entities>,
    /// What it counts for against [`MAX_SLICE_BYTES`].
    bytes: usize,
}

/// The slices made, by a hash of their caller and action (compared whole on a lookup, so
/// that a lookup builds no key).
#[derive(Default)]
struct Slices {
    hasher: RandomState,
    by_hash: HashMap<u64, Vec<Arc<Slice>>>,
    len: usize,
    bytes: usize,
}

impl Slices {
    fn hash(&self, caller: &Caller, action: Action) -> u64 {
        self.hasher.hash_one((&caller.name, &caller.groups, caller.via.as_str(), &caller.scopes, action))
    }

    fn get(&self, hash: u64, caller: &Caller, action: Action) -> Option<Arc<Slice>> {
        self.by_hash.get(&hash)?.iter().find(|s| s.action == action && s.caller == *caller).cloned()
    }

    fn insert(&mut self, hash: u64, slice: Arc<Slice>) {
        if self.get(hash, &slice.caller, slice.action).is_some() {
            return; // another thread made it meanwhile
        }
        if self.len >= MAX_SLICES || self.bytes > MAX_SLICE_BYTES {
            self.by_hash.clear();
            (self.len, self.bytes) = (0, 0);
        }
        self.bytes += slice.bytes;
        self.by_hash.entry(hash).or_default().push(slice);
        self.len += 1;
    }
}

fn schema() -> Schema {
    // The schema is this crate's own text: a test parses it.
    Schema::from_cedarschema_str(SCHEMA).map(|(schema, _)| schema).unwrap_or_else(|e| unreachable!("the built-in schema parses: {e}"))
}

impl OrgPolicy {
    /// Load the `*.cedar` files of `dir` (in name order) as one set, validated.
    pub fn load(dir: &Path) -> Result<Self, PolicyError> {
        let read_error = |path: &Path, e: &dyn std::fmt::Display| PolicyError::Read { path: path.to_owned(), message: e.to_string() };
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| read_error(dir, &e))? {
            let path = entry.map_err(|e| read_error(dir, &e))?.path();
            if path.extension().is_some_and(|e| e == "cedar") {
                paths.push(path);
            }
        }
        if paths.len() > MAX_FILES {
            return Err(read_error(dir, &format!("more than {MAX_FILES} .cedar files; merge some")));
        }
        paths.sort();
        let mut files = Vec::with_capacity(paths.len());
        for path in paths {
            let meta = std::fs::metadata(&path).map_err(|e| read_error(&path, &e))?;
            if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
                return Err(read_error(&path, &format!("not a regular file of at most {} KiB", MAX_FILE_BYTES >> 10)));
            }
            let text = std::fs::read_to_string(&path).map_err(|e| read_error(&path, &e))?;
            files.push((path, text));
        }
        Self::from_files(dir, &files)
    }

    /// The set of `files` (path, text), validated; `dir` names it in errors.
    pub fn from_files(dir: &Path, files: &[(PathBuf, String)]) -> Result<Self, PolicyError> {
        let mut policies = PolicySet::new();
        let mut approval = HashSet::new();
        let mut problems = Vec::new();
        for (path, text) in files {
            let parsed = PolicySet::from_str(text).map_err(|e| PolicyError::Parse { path: path.clone(), message: parse_message(&e) })?;
            if parsed.templates().next().is_some() {
                return Err(PolicyError::Parse {
                    path: path.clone(),
                    message: "templates are not supported; write each policy out".into(),
                });
            }
            let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            // Cedar numbers a file's policies policy0, policy1, ... in their order.
            let mut own: Vec<_> = parsed.policies().collect();
            own.sort_by_key(|p| p.id().to_string().trim_start_matches("policy").parse::<usize>().unwrap_or(usize::MAX));
            for (n, policy) in own.into_iter().enumerate() {
                let id = PolicyId::new(policy.annotation("id").map_or_else(|| format!("{stem}:{}", n + 1), str::to_owned));
                if policy.annotation("require_approval").is_some() {
                    if policy.effect() == cedar_policy::Effect::Forbid {
                        problems.push(format!("policy `{id}`: @require_approval is for a permit, not a forbid"));
                    }
                    approval.insert(id.clone());
                }
                if let Err(e) = policies.add(policy.new_id(id.clone())) {
                    problems.push(format!("policy `{id}` in {}: {e} (give each policy its own @id)", path.display()));
                }
            }
        }
        let schema = schema();
        let validated = Validator::new(schema.clone()).validate(&policies, ValidationMode::Strict);
        problems.extend(validated.validation_errors().map(|e| e.to_string()));
        if !problems.is_empty() {
            return Err(PolicyError::Invalid { dir: dir.to_owned(), problems });
        }
        let count = policies.policies().count();
        let weights = policies.policies().map(|p| (p.id().clone(), p.to_string().len())).collect();
        let slices = Mutex::new(Slices::default());
        Ok(Self { schema, policies, authorizer: Authorizer::new(), approval, count, types: Types::new(), weights, slices })
    }

    /// How many policies it holds.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether it holds none (then everything is denied).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Whether `caller` may do `action` on `target`.
    pub fn decide(&self, caller: &Caller, action: Action, target: &Target<'_>) -> Decision {
        let slice = self.slice(caller, action);
        match self.request(&slice, target) {
            Some((request, entities)) => self.decision(&slice.policies, &request, &entities),
            None => Decision { allowed: false, policies: Vec::new(), require_approval: false },
        }
    }

    fn decision(&self, policies: &PolicySet, request: &Request, entities: &Entities) -> Decision {
        let response = self.authorizer.is_authorized(request, policies, entities);
        let reasons: Vec<&PolicyId> = response.diagnostics().reason().collect();
        let allowed = response.decision() == cedar_policy::Decision::Allow;
        let require_approval = allowed && reasons.iter().all(|id| self.approval.contains(*id));
        let mut policies: Vec<String> = reasons.iter().map(ToString::to_string).collect();
        policies.sort();
        Decision { allowed, policies, require_approval }
    }

    /// The slice of `caller` doing `action`, from the cache or made (outside the lock).
    fn slice(&self, caller: &Caller, action: Action) -> Arc<Slice> {
        let hash = {
            let slices = self.slices.lock();
            let hash = slices.hash(caller, action);
            if let Some(slice) = slices.get(hash, caller, action) {
                return slice;
            }
            hash
        };
        let slice = Arc::new(self.make_slice(caller, action));
        self.slices.lock().insert(hash, Arc::clone(&slice));
        slice
    }

    fn make_slice(&self, caller: &Caller, action: Action) -> Slice {
        let types = &self.types;
        let principal = Types::uid(&types.caller, &caller.name);
        let groups: HashSet<EntityUid> = caller.groups.iter().map(|g| Types::uid(&types.group, g)).collect();
        let action_uid = Types::uid(&types.action, action.as_str());
        let mut policies = PolicySet::new();
        let mut bytes = caller.name.len() + caller.groups.iter().chain(&caller.scopes).map(String::len).sum::<usize>();
        let added = self.policies.policies().filter(|p| can_apply(p, &principal, &groups, &action_uid)).try_for_each(|policy| {
            bytes += self.weights.get(policy.id()).copied().unwrap_or_default();
            policies.add(policy.clone()).map_err(drop)
        });
        if added.is_err() {
            // Never (each id is unique in the set, so in a slice); the whole set decides
            // the same as a slice would.
            policies = self.policies.clone();
        }
        let string = |s: &str| RestrictedExpression::new_string(s.to_owned());
        let scopes = RestrictedExpression::new_set(caller.scopes.iter().map(|s| string(s)));
        let attrs = HashMap::from([("via".to_owned(), string(caller.via.as_str())), ("scopes".to_owned(), scopes)]);
        // Strings and sets of strings always make an entity, and a caller's groups have no
        // parents (no cycle); should either fail, the caller's requests are refused.
        let entities = Entity::new(principal.clone(), attrs, groups.clone()).ok().and_then(|caller| {
            let groups = groups.into_iter().map(|g| Entity::new_no_attrs(g, HashSet::new()));
            Entities::from_entities(std::iter::once(caller).chain(groups), None).ok()
        });
        Slice { caller: caller.clone(), action, policies, principal, action_uid, entities, bytes }
    }

    /// The request, checked by the schema, and the entities it is evaluated against (the
    /// slice's and the target's); `None` when the action is not about that kind of target
    /// or the caller's entities could not be made.
    fn request(&self, slice: &Slice, target: &Target<'_>) -> Option<(Request, Entities)> {
        let caller_entities = slice.entities.clone()?;
        let types = &self.types;
        let string = |s: &str| RestrictedExpression::new_string(s.to_owned());
        let skill_entity = |name: &str, runtime: &str| {
            let attrs = HashMap::from([("runtime".to_owned(), string(runtime))]);
            Entity::new(Types::uid(&types.skill, name), attrs, HashSet::new()).ok()
        };
        let (resource, target_entities) = match *target {
            Target::Skill { name, runtime } => {
                let skill = skill_entity(name, runtime)?;
                (skill.uid(), vec![skill])
            }
            Target::Tool { skill, tool, public } => {
                let parent = skill_entity(skill, "")?;
                let id = Types::uid(&types.tool, public);
                let attrs = HashMap::from([("skill".to_owned(), string(skill)), ("name".to_owned(), string(tool))]);
                let tool = Entity::new(id.clone(), attrs, HashSet::from([parent.uid()])).ok()?;
                (id, vec![parent, tool])
            }
        };
        let request =
            Request::new(slice.principal.clone(), slice.action_uid.clone(), resource, Context::empty(), Some(&self.schema)).ok()?;
        Some((request, caller_entities.add_entities(target_entities, None).ok()?))
    }

    /// What the whole set decides, the request checked by the schema: what a slice must
    /// decide the same as.
    #[cfg(test)]
    fn decide_whole(&self, caller: &Caller, action: Action, target: &Target<'_>) -> Decision {
        let deny = Decision { allowed: false, policies: Vec::new(), require_approval: false };
        let Some((request, entities)) = self.request_whole(caller, action, target) else { return deny };
        self.decision(&self.policies, &request, &entities)
    }

    /// The request as it was built before slicing, checked by the schema.
    #[cfg(test)]
    fn request_whole(&self, caller: &Caller, action: Action, target: &Target<'_>) -> Option<(Request, Entities)> {
        let uid = |kind: &str, id: &str| Some(EntityUid::from_type_name_and_id(EntityTypeName::from_str(kind).ok()?, EntityId::new(id)));
        let string = |s: &str| RestrictedExpression::new_string(s.to_owned());
        let groups: Vec<EntityUid> = caller.groups.iter().map(|g| uid("Group", g)).collect::<Option<_>>()?;
        let principal = uid("Caller", &caller.name)?;
        let scopes = RestrictedExpression::new_set(caller.scopes.iter().map(|s| string(s)));
        let attrs = HashMap::from([("via".to_owned(), string(caller.via.as_str())), ("scopes".to_owned(), scopes)]);
        let mut entities = vec![Entity::new(principal.clone(), attrs, groups.iter().cloned().collect()).ok()?];
        entities.extend(groups.into_iter().map(|g| Entity::new_no_attrs(g, HashSet::new())));
        let skill_entity = |name: &str, runtime: &str| {
            let attrs = HashMap::from([("runtime".to_owned(), string(runtime))]);
            Some((uid("Skill", name)?, attrs))
        };
        let resource = match *target {
            Target::Skill { name, runtime } => {
                let (skill, attrs) = skill_entity(name, runtime)?;
                entities.push(Entity::new(skill.clone(), attrs, HashSet::new()).ok()?);
                skill
            }
            Target::Tool { skill, tool, public } => {
                let (parent, attrs) = skill_entity(skill, "")?;
                entities.push(Entity::new(parent.clone(), attrs, HashSet::new()).ok()?);
                let id = uid("Tool", public)?;
                let attrs = HashMap::from([("skill".to_owned(), string(skill)), ("name".to_owned(), string(tool))]);
                entities.push(Entity::new(id.clone(), attrs, HashSet::from([parent])).ok()?);
                id
            }
        };
        let request = Request::new(principal, uid("Action", action.as_str())?, resource, Context::empty(), Some(&self.schema)).ok()?;
        Some((request, Entities::from_entities(entities, None).ok()?))
    }
}

/// Whether `policy`'s principal and action scopes can hold for `principal` (in `groups`)
/// doing `action`. The request's entities give a caller no ancestors but its groups, and
/// a group and an action none (the schema has no group of groups nor of actions), so
/// `in` holds only of the entity itself or one of the caller's groups. A scope with `is`,
/// and every `when` and `unless`, is left to Cedar: the policy stays.
fn can_apply(policy: &Policy, principal: &EntityUid, groups: &HashSet<EntityUid>, action: &EntityUid) -> bool {
    let principal_ok = match policy.principal_constraint() {
        PrincipalConstraint::Any | PrincipalConstraint::Is(_) | PrincipalConstraint::IsIn(..) => true,
        PrincipalConstraint::Eq(uid) => uid == *principal,
        PrincipalConstraint::In(uid) => uid == *principal || groups.contains(&uid),
    };
    principal_ok
        && match policy.action_constraint() {
            ActionConstraint::Any => true,
            ActionConstraint::Eq(uid) => uid == *action,
            ActionConstraint::In(uids) => uids.contains(action),
        }
}

/// The parser's errors, one line.
fn parse_message(errors: &cedar_policy::ParseErrors) -> String {
    errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; ")
}

/// The org policy in force, replaced only by a set that loads ([`reload`](Self::reload)).
#[derive(Debug)]
pub struct Policies {
    dir: PathBuf,
    current: RwLock<Arc<OrgPolicy>>,
    refused: Mutex<Option<String>>,
}

impl Policies {
    /// Load `dir`; an error when it does not load (the host does not start on it).
    pub fn open(dir: &Path) -> Result<Self, PolicyError> {
        let policy = OrgPolicy::load(dir)?;
        Ok(Self { dir: dir.to_owned(), current: RwLock::new(Arc::new(policy)), refused: Mutex::new(None) })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The set in force.
    pub fn current(&self) -> Arc<OrgPolicy> {
        self.current.read().clone()
    }

    /// Load the directory again: the new set replaces the one in force when it loads;
    /// otherwise the one in force stays, and the error is kept for [`refused`](Self::refused).
    pub fn reload(&self) -> Result<usize, PolicyError> {
        match OrgPolicy::load(&self.dir) {
            Ok(policy) => {
                let count = policy.len();
                *self.current.write() = Arc::new(policy);
                *self.refused.lock() = None;
                Ok(count)
            }
            Err(e) => {
                *self.refused.lock() = Some(e.to_string());
                Err(e)
            }
        }
    }

    /// Why the last reload was refused, while the set before it serves.
    pub fn refused(&self) -> Option<String> {
        self.refused.lock().clone()
    }
}

/// One policy as `show` prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyLine {
    /// Its id (`@id`, else `FILE:N`).
    pub id: String,
    /// `permit` or `forbid`.
    pub effect: &'static str,
    /// A permit marked `@require_approval`.
    pub require_approval: bool,
    /// Its text, on one line.
    pub text: String,
}

impl OrgPolicy {
    /// The policies that may decide about skill `name` or its tools: those whose resource
    /// is any, a type, the skill, or one of its tools (`Tool::"NAME__…"`). Whom each
    /// applies to is in its text: the policy cannot be asked "who" without a caller.
    pub fn about_skill(&self, name: &str) -> Vec<PolicyLine> {
        let concerns = |uid: &EntityUid| {
            let id = uid.id().unescaped();
            match uid.type_name().to_string().as_str() {
                "Skill" => id == name,
                "Tool" => id.strip_prefix(name).is_some_and(|rest| rest.starts_with("__")),
                _ => false,
            }
        };
        let mut lines: Vec<PolicyLine> = self
            .policies
            .policies()
            .filter(|policy| match policy.resource_constraint() {
                cedar_policy::ResourceConstraint::Any | cedar_policy::ResourceConstraint::Is(_) => true,
                cedar_policy::ResourceConstraint::Eq(uid)
                | cedar_policy::ResourceConstraint::In(uid)
                | cedar_policy::ResourceConstraint::IsIn(_, uid) => concerns(&uid),
            })
            .map(|policy| PolicyLine {
                id: policy.id().to_string(),
                effect: if policy.effect() == cedar_policy::Effect::Forbid { "forbid" } else { "permit" },
                require_approval: self.approval.contains(policy.id()),
                text: policy.to_string().split_whitespace().collect::<Vec<_>>().join(" "),
            })
            .collect();
        lines.sort_by(|a, b| a.id.cmp(&b.id));
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caller::Via;

    fn caller(name: &str, groups: &[&str]) -> Caller {
        Caller { name: name.to_owned(), groups: groups.iter().map(|g| (*g).to_owned()).collect(), via: Via::Token, scopes: Vec::new() }
    }

    fn set(files: &[(&str, &str)]) -> Result<OrgPolicy, PolicyError> {
        let files: Vec<(PathBuf, String)> = files.iter().map(|(n, t)| (PathBuf::from(n), (*t).to_owned())).collect();
        OrgPolicy::from_files(Path::new("/etc/skillhost/policy"), &files)
    }

    const READ: Target<'static> = Target::Tool { skill: "notes", tool: "read", public: "notes__read" };
    const WRITE: Target<'static> = Target::Tool { skill: "notes", tool: "write", public: "notes__write" };

    #[test]
    fn the_schema_parses() {
        schema();
    }

    #[test]
    fn default_deny_permits_by_group_and_a_forbid_beats_a_permit() {
        let policy = set(&[
            ("team.cedar", "@id(\"readers-read\")\npermit(principal in Group::\"readers\", action == Action::\"call\", resource == Tool::\"notes__read\");\n\
              permit(principal == Caller::\"ann\", action == Action::\"call\", resource in Skill::\"notes\");"),
            ("guard.cedar", "@id(\"no-writes-for-contractors\")\nforbid(principal in Group::\"contractors\", action, resource == Tool::\"notes__write\");"),
        ])
        .unwrap();
        assert_eq!(policy.len(), 3);
        let bob = caller("bob", &["readers"]);
        let read = policy.decide(&bob, Action::Call, &READ);
        assert_eq!(read, Decision { allowed: true, policies: vec!["readers-read".into()], require_approval: false });
        assert_eq!(read.reason(), "permitted by `readers-read`");
        let write = policy.decide(&bob, Action::Call, &WRITE);
        assert!(!write.allowed && write.policies.is_empty(), "{write:?}");
        assert!(write.reason().starts_with("no policy permits it"));
        let ann = caller("ann", &[]);
        assert!(policy.decide(&ann, Action::Call, &WRITE).allowed, "a tool is in its skill");
        assert_eq!(policy.decide(&ann, Action::Call, &WRITE).policies, ["team:2"], "an unnamed policy is FILE:N");
        let ann_contractor = caller("ann", &["contractors"]);
        let forbidden = policy.decide(&ann_contractor, Action::Call, &WRITE);
        assert_eq!((forbidden.allowed, forbidden.reason()), (false, "forbidden by `no-writes-for-contractors`".to_owned()));
        assert!(!policy.decide(&ann, Action::Run, &Target::Skill { name: "notes", runtime: "scripts" }).allowed, "another action");
    }

    #[test]
    fn require_approval_marks_an_allowed_call() {
        let policy = set(&[(
            "p.cedar",
            "@id(\"ask-first\")\n@require_approval\npermit(principal, action == Action::\"call\", resource in Skill::\"notes\");",
        )])
        .unwrap();
        let decision = policy.decide(&caller("bob", &[]), Action::Call, &WRITE);
        assert!(decision.allowed && decision.require_approval, "{decision:?}");
    }

    #[test]
    fn attributes_are_typed_by_the_schema() {
        let policy = set(&[(
            "p.cedar",
            "permit(principal, action == Action::\"call\", resource) when { resource.name == \"read\" && principal.via == \"token\" };\n\
             permit(principal, action == Action::\"run\", resource) when { resource.runtime == \"scripts\" && principal.scopes.contains(\"run\") };",
        )])
        .unwrap();
        assert!(policy.decide(&caller("x", &[]), Action::Call, &READ).allowed);
        assert!(!policy.decide(&caller("x", &[]), Action::Call, &WRITE).allowed);
        let mut scoped = caller("x", &[]);
        assert!(!policy.decide(&scoped, Action::Run, &Target::Skill { name: "n", runtime: "scripts" }).allowed);
        scoped.scopes.push("run".into());
        assert!(policy.decide(&scoped, Action::Run, &Target::Skill { name: "n", runtime: "scripts" }).allowed);
    }

    #[test]
    fn a_set_that_does_not_parse_or_validate_is_refused_naming_the_problem() {
        let parse = set(&[("bad.cedar", "permit(principal, action, resource")]).unwrap_err().to_string();
        assert!(parse.starts_with("org policy bad.cedar: "), "{parse}");
        let unknown = set(&[("p.cedar", "@id(\"typo\")\npermit(principal == Callr::\"bob\", action, resource);")]).unwrap_err().to_string();
        assert!(unknown.contains("typo") && unknown.contains("Callr"), "{unknown}");
        let action = set(&[("p.cedar", "permit(principal, action == Action::\"delete\", resource);")]).unwrap_err().to_string();
        assert!(action.contains("delete"), "{action}");
        let attribute =
            set(&[("p.cedar", "permit(principal, action, resource) when { principal.team == \"x\" };")]).unwrap_err().to_string();
        assert!(attribute.contains("team"), "{attribute}");
        let duplicate = set(&[
            ("a.cedar", "@id(\"x\")\npermit(principal, action, resource);"),
            ("b.cedar", "@id(\"x\")\nforbid(principal, action, resource);"),
        ])
        .unwrap_err()
        .to_string();
        assert!(duplicate.contains("policy `x`") && duplicate.contains("own @id"), "{duplicate}");
    }

    #[test]
    fn a_reload_that_fails_keeps_the_set_in_force() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.cedar"), "permit(principal, action == Action::\"call\", resource);").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a policy").unwrap();
        let policies = Policies::open(dir.path()).unwrap();
        assert_eq!(policies.current().len(), 1);
        std::fs::write(dir.path().join("b.cedar"), "permit(principal, action == Action::\"fly\", resource);").unwrap();
        let refused = policies.reload().unwrap_err().to_string();
        assert!(refused.contains("fly"), "{refused}");
        assert_eq!(policies.refused().as_deref(), Some(refused.as_str()));
        assert!(policies.current().decide(&caller("x", &[]), Action::Call, &READ).allowed, "the old set serves");
        std::fs::write(dir.path().join("b.cedar"), "forbid(principal, action, resource == Tool::\"notes__read\");").unwrap();
        assert_eq!(policies.reload().unwrap(), 2);
        assert!(policies.refused().is_none());
        assert!(!policies.current().decide(&caller("x", &[]), Action::Call, &READ).allowed, "the new set serves");
    }

    /// Every caller, action and target of a set with each kind of scope decides the same
    /// in its slice as in the whole set, the request checked by the schema: allowed, the
    /// ids that decided, and whether it asks for approval.
    #[test]
    fn a_slice_decides_as_the_whole_set() {
        let policy = set(&[
            (
                "team.cedar",
                "@id(\"ann-notes\")\npermit(principal == Caller::\"ann\", action == Action::\"call\", resource in Skill::\"notes\");\n\
                 @id(\"readers-look\")\npermit(principal in Group::\"readers\", action in [Action::\"list\", Action::\"read\"], resource);\n\
                 @id(\"readers-read\")\npermit(principal in Group::\"readers\", action == Action::\"call\", resource == Tool::\"notes__read\");\n\
                 @id(\"bob-notes\")\npermit(principal in Caller::\"bob\", action, resource == Skill::\"notes\");\n\
                 @id(\"scripts\")\npermit(principal is Caller, action == Action::\"run\", resource) when { resource.runtime == \"scripts\" };\n\
                 @id(\"ops\")\npermit(principal is Caller in Group::\"ops\", action == Action::\"call\", resource);\n\
                 @id(\"list-unsandboxed\")\npermit(principal, action == Action::\"list\", resource) unless { resource.runtime == \"bwrap\" };\n\
                 @id(\"ann-forge\")\npermit(principal == Caller::\"ann\", action in [Action::\"create\", Action::\"update\"], resource) when { principal.via == \"token\" };\n\
                 @id(\"admins\")\npermit(principal in Group::\"admins\", action, resource);",
            ),
            (
                "ask.cedar",
                "@id(\"agents-ask\")\n@require_approval\npermit(principal in Group::\"agents\", action == Action::\"call\", resource in Skill::\"notes\");\n\
                 @id(\"cat-approves\")\n@require_approval\npermit(principal == Caller::\"cat\", action in [Action::\"approve\", Action::\"run\"], resource);\n\
                 @require_approval\npermit(principal, action == Action::\"read\", resource) when { principal.scopes.contains(\"read\") };",
            ),
            (
                "guard.cedar",
                "@id(\"no-writes-for-contractors\")\nforbid(principal in Group::\"contractors\", action, resource == Tool::\"notes__write\");\n\
                 @id(\"no-eve\")\nforbid(principal == Caller::\"eve\", action, resource);\n\
                 @id(\"oauth-needs-tools\")\nforbid(principal, action == Action::\"call\", resource) when { principal.via == \"oauth\" && !principal.scopes.contains(\"tools\") };\n\
                 forbid(principal is Caller, action in [Action::\"create\", Action::\"update\"], resource) when { resource.runtime == \"wasm\" };\n\
                 forbid(principal in Group::\"contractors\", action == Action::\"approve\", resource);",
            ),
        ])
        .unwrap();
        let names = ["ann", "bob", "cat", "eve", "readers", "x"];
        let groups: &[&[&str]] = &[
            &[],
            &["readers"],
            &["contractors"],
            &["ops"],
            &["agents"],
            &["admins"],
            &["readers", "contractors"],
            &["agents", "readers", "ops"],
            &["ann"],
        ];
        let ways: &[(Via, &[&str])] = &[(Via::Token, &[]), (Via::OAuth, &[]), (Via::OAuth, &["tools", "read"]), (Via::Operator, &[])];
        let actions = [Action::List, Action::Read, Action::Call, Action::Run, Action::Create, Action::Update, Action::Approve];
        let mut targets: Vec<Target<'_>> =
            ["scripts", "wasm", "bwrap", ""].iter().map(|runtime| Target::Skill { name: "notes", runtime }).collect();
        targets.push(Target::Skill { name: "other", runtime: "wasm" });
        targets.extend([READ, WRITE, Target::Tool { skill: "other", tool: "x", public: "other__x" }]);
        let (mut allowed, mut forbidden, mut approval) = (0, 0, 0);
        for name in names {
            for groups in groups {
                for (via, scopes) in ways {
                    let mut caller = caller(name, groups);
                    (caller.via, caller.scopes) = (*via, scopes.iter().map(|s| (*s).to_owned()).collect());
                    for action in actions {
                        for target in &targets {
                            let whole = policy.decide_whole(&caller, action, target);
                            for _made_then_cached in 0..2 {
                                assert_eq!(policy.decide(&caller, action, target), whole, "{caller:?} {action:?} {target:?}");
                            }
                            allowed += usize::from(whole.allowed);
                            forbidden += usize::from(!whole.allowed && !whole.policies.is_empty());
                            approval += usize::from(whole.require_approval);
                        }
                    }
                }
            }
        }
        assert!(allowed > 1000 && forbidden > 1000 && approval > 100, "{allowed} allowed, {forbidden} forbidden, {approval} approval");
        let ids = |slice: &Slice| -> Vec<String> { slice.policies.policies().map(|p| p.id().to_string()).collect() };
        let mut unconstrained = ids(&policy.slice(&caller("x", &[]), Action::Call));
        unconstrained.sort();
        assert_eq!(unconstrained, ["oauth-needs-tools", "ops"], "a caller in no group calling has only the policies of any caller");
    }

    #[test]
    fn the_slices_kept_are_bounded() {
        let policy = set(&[("p.cedar", "permit(principal, action == Action::\"call\", resource);")]).unwrap();
        for n in 0..=MAX_SLICES {
            assert!(policy.decide(&caller(&format!("c{n}"), &[]), Action::Call, &READ).allowed);
        }
        let slices = policy.slices.lock();
        assert_eq!((slices.len, slices.by_hash.values().map(Vec::len).sum::<usize>()), (1, 1), "the full cache was emptied");
        drop(slices);
        let big = format!("permit(principal, action, resource) when {{ principal.via != \"{}\" }};", "x".repeat(1 << 20));
        let policy = set(&[("p.cedar", &big)]).unwrap();
        for n in 0..100 {
            assert!(policy.decide(&caller(&format!("c{n}"), &[]), Action::Call, &READ).allowed);
        }
        let slices = policy.slices.lock();
        assert!(slices.len < 70 && slices.bytes <= MAX_SLICE_BYTES + (2 << 20), "{} slices of {} bytes", slices.len, slices.bytes);
    }

    #[test]
    fn the_policies_about_a_skill_are_those_naming_it_its_tools_or_any_resource() {
        let policy = set(&[(
            "a.cedar",
            r#"@id("all") permit(principal, action == Action::"list", resource);
@id("notes") permit(principal in Group::"g", action == Action::"read", resource == Skill::"notes");
@id("tool") @require_approval permit(principal, action == Action::"call", resource == Tool::"notes__read");
@id("in") forbid(principal, action == Action::"call", resource in Skill::"notes");
@id("other") permit(principal, action == Action::"call", resource == Tool::"notesy__read");
@id("tools") permit(principal, action == Action::"call", resource is Tool);"#,
        )])
        .unwrap();
        let about = policy.about_skill("notes");
        let ids: Vec<&str> = about.iter().map(|l| l.id.as_str()).collect();
        assert_eq!(ids, ["all", "in", "notes", "tool", "tools"], "not `other`, another skill's tool");
        let tool = about.iter().find(|l| l.id == "tool").unwrap();
        assert!(tool.require_approval && tool.effect == "permit" && !tool.text.contains('\n'), "{tool:?}");
        assert_eq!(about.iter().find(|l| l.id == "in").unwrap().effect, "forbid");
    }

    #[test]
    fn the_documented_schema_and_examples_are_what_the_host_reads() {
        let doc = include_str!("../../../docs/org-policy.md");
        let blocks: Vec<&str> = doc.split("```cedar\n").skip(1).map(|b| b.split("```").next().unwrap_or_default()).collect();
        assert_eq!(blocks[0].trim(), SCHEMA.trim(), "docs/org-policy.md shows the schema as it is");
        assert!(blocks.len() >= 4, "the schema and three examples at least: {}", blocks.len());
        for example in &blocks[1..] {
            set(&[("example.cedar", example)]).unwrap_or_else(|e| panic!("{e}\n{example}"));
        }
    }
}
