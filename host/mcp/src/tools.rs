//! The tool table MCP clients see: every tool of every loaded, not disabled skill under
//! a collision-free public name `SKILL__TOOL`, converted to an MCP [`Tool`] with its
//! schemas and annotations.
//!
//! Skill names never contain `_` and tool names never start with one, so the first `__`
//! in a public name always separates skill from tool. MCP limits names to 128 bytes of
//! `[A-Za-z0-9_.-]`; ours are at most 64 + 2 + 64, and the rare pair over 128 is left
//! out with a warning rather than renamed behind the user's back.
//!
//! A tool of a skill that is not approved is listed with host text only: its public
//! name, a description saying how the skill gets approved, and an empty object schema;
//! nothing the skill wrote (description, title, annotations, schemas) reaches the agent
//! before a human approved that version.
//!
//! MCP requires `structuredContent` to be a JSON object. A tool whose output schema is
//! an object is passed through; any other output (a number, a string, an array) is
//! wrapped as `{"result": ...}`, and its advertised output schema is wrapped the same
//! way so clients that validate structured output accept it.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};
use skillhost_core::{Annotations, SkillName, ToolSpec};
use skillhost_registry::{Registry, TrustState, withheld_tool_description};

/// Separates skill and tool in a public tool name.
pub const SEPARATOR: &str = "__";
/// Longest tool name MCP allows.
const MAX_MCP_NAME: usize = 128;

/// One callable (or approvable) tool, as the MCP front lists it.
#[derive(Clone, Debug)]
pub struct ToolEntry {
    /// `SKILL__TOOL`.
    pub name: String,
    /// The skill.
    pub skill: SkillName,
    /// The tool as the skill reported it.
    pub spec: ToolSpec,
    /// The skill's trust state: only approved tools are searchable.
    pub state: TrustState,
}

impl ToolEntry {
    /// Whether a call may run now (as opposed to asking a human first).
    pub fn approved(&self) -> bool {
        self.state == TrustState::Approved
    }

    /// The tool's side-effect class, for ordering search results.
    pub fn side_effects(&self) -> SideEffects {
        SideEffects::of(&self.spec.annotations)
    }

    /// The MCP description: the tool's once its skill is approved; before, host text
    /// saying how it gets approved (nothing the skill wrote).
    pub fn description(&self) -> String {
        if self.approved() {
            self.spec.description.clone()
        } else {
            withheld_tool_description(self.skill.as_str(), &self.spec.name, self.state)
        }
    }

    /// The MCP tool definition: everything the skill declared once it is approved; before,
    /// the name, host text and an empty object schema.
    pub fn to_mcp(&self) -> Tool {
        if !self.approved() {
            let input = JsonObject::from_iter([("type".to_owned(), json!("object"))]);
            return Tool::new(self.name.clone(), self.description(), Arc::new(input));
        }
        let input = match &self.spec.input_schema {
            Value::Object(map) => map.clone(),
            // `true` (anything) as an object schema with no constraints.
            _ => JsonObject::from_iter([("type".to_owned(), json!("object"))]),
        };
        let mut tool = Tool::new(self.name.clone(), self.description(), Arc::new(input))
            .with_title(format!("{}: {}", self.skill, self.spec.name))
            .with_annotations(annotations(&self.spec.annotations));
        if let Some(schema) = &self.spec.output_schema {
            tool = tool.with_raw_output_schema(Arc::new(output_schema(schema)));
        }
        tool
    }

    /// The MCP `structuredContent` for an output of this tool, if it has an output
    /// schema.
    pub fn structured(&self, value: Value) -> Option<Value> {
        let schema = self.spec.output_schema.as_ref()?;
        Some(if is_object_schema(schema) { value } else { json!({ "result": value }) })
    }
}

/// How much a tool may touch, least first: the tie-break order of the search contract (ARCHITECTURE.md) (one
/// definition, shared with the search index).
pub use skillhost_index::SideEffects;

/// `SKILL__TOOL`, or `None` when it would break MCP's length rule.
pub fn public_name(skill: &SkillName, tool: &str) -> Option<String> {
    let name = format!("{skill}{SEPARATOR}{tool}");
    (name.len() <= MAX_MCP_NAME).then_some(name)
}

/// Every tool of every loaded skill that is not disabled and `scope`'s caller may call,
/// sorted by public name.
pub(crate) fn table(registry: &Registry, scope: &crate::access::Scope) -> Vec<ToolEntry> {
    let mut tools = Vec::new();
    for entry in registry.catalog() {
        let Some(loaded) = &entry.loaded else { continue };
        if entry.state == TrustState::Disabled {
            continue;
        }
        for spec in &loaded.tools {
            let Some(name) = public_name(&entry.name, &spec.name) else {
                tracing::warn!(skill = %entry.name, tool = %spec.name, "left out of MCP: `skill__tool` is longer than MCP's 128-byte limit; shorten the tool name");
                continue;
            };
            let tool = ToolEntry { name, skill: entry.name.clone(), spec: spec.clone(), state: entry.state };
            if scope.sees_tool(&tool) {
                tools.push(tool);
            }
        }
    }
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools
}

/// How many tools [`table`] would list, without building it (on every call's path).
pub fn tool_count(registry: &Registry) -> usize {
    registry.catalog().iter().filter(|e| e.state != TrustState::Disabled).filter_map(|e| e.loaded.as_ref()).map(|l| l.tools.len()).sum()
}

fn annotations(hints: &Annotations) -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(hints.read_only)
        .destructive(hints.destructive)
        .idempotent(hints.idempotent)
        .open_world(hints.open_world)
}

fn is_object_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

fn output_schema(schema: &Value) -> JsonObject {
    let wrapped = if is_object_schema(schema) {
        schema.clone()
    } else {
        // Keep `$defs`/`definitions` at the root so `$ref`s inside still resolve.
        let mut inner = schema.clone();
        let mut root = json!({ "type": "object", "required": ["result"] });
        for key in ["$defs", "definitions", "$schema"] {
            if let Some(value) = inner.as_object_mut().and_then(|m| m.remove(key)) {
                root[key] = value;
            }
        }
        root["properties"] = json!({ "result": inner });
        root
    };
    match wrapped {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(output_schema: Option<Value>) -> ToolEntry {
        ToolEntry {
            name: "demo__count".into(),
            skill: SkillName::new("demo").unwrap(),
            spec: ToolSpec {
                name: "count".into(),
                description: "Count things.".into(),
                input_schema: json!({"type": "object"}),
                output_schema,
                annotations: Annotations { read_only: true, ..Annotations::default() },
                examples: vec![],
            },
            state: TrustState::Approved,
        }
    }

    #[test]
    fn scalar_outputs_are_wrapped_in_schema_and_value_alike() {
        let tool = entry(Some(json!({"type": "integer", "$defs": {"x": {}}})));
        let mcp = tool.to_mcp();
        let schema = mcp.output_schema.unwrap();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["properties"]["result"], json!({"type": "integer"}));
        assert_eq!(schema["$defs"], json!({"x": {}}));
        assert_eq!(tool.structured(json!(3)), Some(json!({"result": 3})));
    }

    #[test]
    fn object_outputs_pass_through_and_schemaless_tools_have_none() {
        let tool = entry(Some(json!({"type": "object", "properties": {"n": {"type": "integer"}}})));
        assert_eq!(tool.structured(json!({"n": 1})), Some(json!({"n": 1})));
        assert_eq!(entry(None).structured(json!(1)), None);
        assert!(entry(None).to_mcp().output_schema.is_none());
    }

    #[test]
    fn names_split_at_the_first_separator_and_respect_the_limit() {
        let skill = SkillName::new("a-b").unwrap();
        assert_eq!(public_name(&skill, "c__d").as_deref(), Some("a-b__c__d"));
        let long = SkillName::new("s".repeat(64)).unwrap();
        assert!(public_name(&long, &"t".repeat(63)).is_none());
        assert!(public_name(&long, &"t".repeat(62)).is_some());
    }

    #[test]
    fn unapproved_tools_show_host_text_only() {
        let mut tool = entry(Some(json!({"type": "object", "description": "SKILL TEXT"})));
        tool.spec.description = "SKILL TEXT".into();
        tool.spec.input_schema = json!({"type": "object", "properties": {"x": {"description": "SKILL TEXT"}}});
        tool.state = TrustState::PendingReview;
        assert!(tool.description().contains("skillhost approve demo"), "{}", tool.description());
        let shown = serde_json::to_string(&tool.to_mcp()).unwrap();
        assert!(!shown.contains("SKILL TEXT"), "{shown}");
        assert_eq!(tool.to_mcp().input_schema.as_ref(), &JsonObject::from_iter([("type".to_owned(), json!("object"))]));
        tool.state = TrustState::Approved;
        assert!(serde_json::to_string(&tool.to_mcp()).unwrap().contains("SKILL TEXT"), "approved tools are shown in full");
    }
}
