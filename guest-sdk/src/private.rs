//! Plumbing for the `#[tool]` and `skill!` expansions.
//!
//! Not part of the API: names and signatures here change whenever the macros
//! need them to. Authors never name these items.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::__bindings::exports::skillhost::skill::guest;
use crate::__bindings::skillhost::skill::types;
use crate::ToolError;

pub use crate::__bindings::__export_skill as export;
pub use guest::Guest;
pub use {schemars, serde, wit_bindgen};

/// The traits behind the prelude's derives (the derives themselves come
/// from `skillhost-sdk-macros`, which shadow these by name).
pub mod traits {
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
}

/// The WIT `tool` record.
pub type WitTool = types::Tool;
/// The WIT `call-error` variant.
pub type WitCallError = types::CallError;

/// A tool's description as `#[tool]` generates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSpec {
    /// Tool name, checked by `#[tool]` against `^[a-z][a-z0-9_-]*$`.
    pub name: &'static str,
    /// The function's doc comment.
    pub description: &'static str,
    /// JSON Schema of the input object, as JSON text.
    pub input_schema: String,
    /// JSON Schema of the output, when the output is a JSON object.
    pub output_schema: Option<String>,
    /// Behaviour hints.
    pub annotations: Annotations,
    /// Example inputs, JSON texts checked by `#[tool]` to be objects.
    pub examples: &'static [&'static str],
}

/// Behaviour hints, mirrored to MCP tool annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Annotations {
    /// The tool does not change anything outside its own call.
    pub read_only: bool,
    /// The tool may delete or overwrite data.
    pub destructive: bool,
    /// Calling the tool twice with the same input has no additional effect.
    pub idempotent: bool,
    /// The tool talks to things outside the host.
    pub open_world: bool,
}

/// Why a call did not produce an output (the WIT `call-error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The input was not valid for the tool.
    InvalidInput(String),
    /// The tool ran and failed.
    Failed(String),
    /// The tool was refused something it needs.
    Denied(String),
    /// No tool of that name exists in this skill.
    UnknownTool(String),
}

impl From<ToolError> for CallError {
    fn from(error: ToolError) -> Self {
        match error {
            ToolError::InvalidInput(m) => Self::InvalidInput(m),
            ToolError::Failed(m) => Self::Failed(m),
            ToolError::Denied(m) => Self::Denied(m),
        }
    }
}

impl From<CallError> for WitCallError {
    fn from(error: CallError) -> Self {
        match error {
            CallError::InvalidInput(m) => Self::InvalidInput(m),
            CallError::Failed(m) => Self::Failed(m),
            CallError::Denied(m) => Self::Denied(m),
            CallError::UnknownTool(m) => Self::UnknownTool(m),
        }
    }
}

impl From<ToolSpec> for WitTool {
    fn from(spec: ToolSpec) -> Self {
        Self {
            name: spec.name.to_owned(),
            description: spec.description.to_owned(),
            input_schema: spec.input_schema,
            output_schema: spec.output_schema,
            annotations: types::Annotations {
                read_only: spec.annotations.read_only,
                destructive: spec.annotations.destructive,
                idempotent: spec.annotations.idempotent,
                open_world: spec.annotations.open_world,
            },
            examples: spec.examples.iter().map(|e| (*e).to_owned()).collect(),
        }
    }
}

/// A tool's entry point in `skill!`'s dispatch table.
pub type CallFn = fn(&str) -> Result<String, CallError>;

/// Implemented by `skill!` for the marker of every tool it lists. `#[tool]`
/// requires it of its own marker, so a tool left out of `skill!` is a compile
/// error at the function rather than a tool that silently never exists.
#[diagnostic::on_unimplemented(
    message = "this `#[tool]` is not listed in `skill!(...)`, so the skill would not have it",
    label = "not listed in the crate's `skillhost_sdk::skill!(...)`",
    note = "add the function to `skillhost_sdk::skill!(...)` (one call per skill, listing every tool), or remove `#[tool]`"
)]
pub trait Listed {}

/// Compiles only for the marker of a tool that `skill!` lists.
pub const fn assert_listed<T: Listed>() {}

/// Compile-time check (via a fn pointer) that `I` can be a tool's input.
pub fn assert_input<I: DeserializeOwned + JsonSchema>() {}

/// Compile-time check (via a fn pointer) that `O` can be a tool's output.
pub fn assert_output<O: Serialize + JsonSchema>() {}

/// The schema of a type as deserialised (what a caller may send).
fn schema_text<T: JsonSchema>() -> String {
    let generator = SchemaSettings::draft2020_12().for_deserialize().into_generator();
    generator.into_root_schema_for::<T>().as_value().to_string()
}

/// The input schema of a one-argument tool.
pub fn input_schema<I: DeserializeOwned + JsonSchema, O>(_: fn(I) -> Result<O, ToolError>) -> String {
    schema_text::<I>()
}

/// The input schema of a tool without input: any object.
pub fn no_input_schema() -> String {
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
    })
    .to_string()
}

/// The output schema as serialised (fields skipped when empty are not
/// required), when the output is a JSON object.
fn object_schema<O: JsonSchema>() -> Option<String> {
    let generator = SchemaSettings::draft2020_12().for_serialize().into_generator();
    let schema = generator.into_root_schema_for::<O>();
    let is_object = schema.get("type").and_then(|t| t.as_str()) == Some("object");
    is_object.then(|| schema.as_value().to_string())
}

/// The output schema of a one-argument tool.
pub fn output_schema<I, O: Serialize + JsonSchema>(_: fn(I) -> Result<O, ToolError>) -> Option<String> {
    object_schema::<O>()
}

/// The output schema of a tool without input.
pub fn output_schema_without_input<O: Serialize + JsonSchema>(_: fn() -> Result<O, ToolError>) -> Option<String> {
    object_schema::<O>()
}

/// Parses `input`, runs `tool`, serialises its output.
pub fn call<I: DeserializeOwned, O: Serialize>(tool: fn(I) -> Result<O, ToolError>, input: &str) -> Result<String, CallError> {
    let input = parse_input(input)?;
    finish(tool(input))
}

/// Checks `input` is an object (or empty), runs `tool`, serialises its output.
pub fn call_without_input<O: Serialize>(tool: fn() -> Result<O, ToolError>, input: &str) -> Result<String, CallError> {
    if !input.trim().is_empty() {
        match serde_json::from_str::<serde_json::Value>(input) {
            Ok(serde_json::Value::Object(_) | serde_json::Value::Null) => {}
            Ok(_) => return Err(CallError::InvalidInput("expected a JSON object".into())),
            Err(error) => return Err(CallError::InvalidInput(error.to_string())),
        }
    }
    finish(tool())
}

/// Deserialises a tool input, naming the offending field on failure.
pub fn parse_input<I: DeserializeOwned>(input: &str) -> Result<I, CallError> {
    let mut deserializer = serde_json::Deserializer::from_str(input);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let error = error.into_inner();
        CallError::InvalidInput(if path == "." { error.to_string() } else { format!("{path}: {error}") })
    })?;
    deserializer.end().map_err(|error| CallError::InvalidInput(error.to_string()))?;
    Ok(value)
}

fn finish<O: Serialize>(result: Result<O, ToolError>) -> Result<String, CallError> {
    let output = result?;
    serde_json::to_string(&output).map_err(|e| CallError::Failed(format!("the tool's output could not be serialised: {e}")))
}

/// The WIT `tools` export.
pub fn tools(specs: &[fn() -> ToolSpec]) -> Vec<WitTool> {
    specs.iter().map(|spec| spec().into()).collect()
}

/// The WIT `call` export: finds `tool` in `table` and runs it.
pub fn dispatch(tool: &str, input: &str, table: &[(&str, CallFn)]) -> Result<String, WitCallError> {
    match table.iter().find(|(name, _)| *name == tool) {
        Some((_, call)) => call(input).map_err(Into::into),
        None => {
            let names: Vec<&str> = table.iter().map(|(name, _)| *name).collect();
            Err(WitCallError::UnknownTool(format!("no tool `{tool}` in this skill; its tools are: {}", names.join(", "))))
        }
    }
}

/// Fails compilation (in a `const`) when two tools share a name.
pub const fn assert_unique_names(names: &[&str]) {
    let mut i = 0;
    while i < names.len() {
        let mut j = i + 1;
        while j < names.len() {
            if str_eq(names[i], names[j]) {
                panic!("skill!: two tools have the same name");
            }
            j += 1;
        }
        i += 1;
    }
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
