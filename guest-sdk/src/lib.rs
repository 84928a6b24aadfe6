//! Write [skillhost](https://github.com/skillhost/skillhost) skills in Rust.
//!
//! A complete skill with one tool:
//!
//! ```no_run
//! use skillhost_sdk::prelude::*;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct CountInput {
//!     /// The text to count words in.
//!     text: String,
//! }
//!
//! #[derive(Serialize, JsonSchema)]
//! struct CountOutput {
//!     /// Number of whitespace-separated words.
//!     words: usize,
//! }
//!
//! /// Count the words in a text.
//! #[tool(read_only, idempotent, example = r#"{"text": "hello world"}"#)]
//! fn word_count(input: CountInput) -> Result<CountOutput, ToolError> {
//!     Ok(CountOutput { words: input.text.split_whitespace().count() })
//! }
//!
//! skillhost_sdk::skill!(word_count);
//! # fn main() {}
//! ```
//!
//! Its `Cargo.toml`:
//!
//! ```toml
//! [lib]
//! crate-type = ["cdylib"]
//!
//! [dependencies]
//! skillhost-sdk = "0.1"
//! ```
//!
//! The prelude's `Deserialize`, `Serialize` and `JsonSchema` derives are
//! serde's and schemars' run through the SDK, so no other dependency is
//! needed (generic types need serde and schemars as direct dependencies).
//! Beside it, a `skill.toml` names the skill and what it asks for. `skillhost
//! build` compiles the crate for `wasm32-wasip2` and embeds `skill.toml` (and
//! `SKILL.md`) into the component, so the one `.wasm` it writes is the whole
//! skill; `skillhost new NAME` creates such a crate.
//!
//! # Tools
//!
//! [`#[tool]`](tool) turns a function into a tool:
//!
//! - the doc comment is the description an agent reads to pick the tool
//!   (required);
//! - the argument is the input: a struct deriving `Deserialize` and
//!   `JsonSchema`, whose field doc comments end up in the input schema. A
//!   tool may also take no argument at all;
//! - the result is `Result<Output, ToolError>` with `Output: Serialize +
//!   JsonSchema`; an output that serialises to a JSON object also gets an
//!   output schema;
//! - options: `read_only`, `destructive`, `idempotent`, `open_world`
//!   (behaviour hints for the agent and the human approving the skill),
//!   `name = "..."` (default: the function's name; `^[a-z][a-z0-9_-]*$`, at
//!   most 64 bytes) and any number of `example = "<json object>"`.
//!
//! `#[tool]` keeps the function and adds a hidden module of the same name
//! (which [`skill!`] reads), so a tool function shadows a crate of that name
//! in its module: call the function `base64_codec` and set
//! `name = "base64"` rather than naming it after the `base64` crate.
//!
//! [`skill!`] lists the tools once per skill; a `#[tool]` it leaves out is a
//! compile error ("this `#[tool]` is not listed in `skill!(...)`"). Input that does not fit the
//! input type is rejected as [`ToolError::InvalidInput`] with the field's path
//! before the function runs.
//!
//! # The sandbox
//!
//! Each call runs in a fresh instance: nothing in memory survives from one
//! call to the next. A skill sees only what it was granted: [`files`] covers
//! its data directory, [`http`] the hosts its `[network]` section allows,
//! [`log`] and [`progress`] talk to the host. Standard output and standard
//! error go to the host log, capped.
//!
//! This crate's version is the version of the WIT package it implements
//! (`skillhost:skill@0.1.0`).

extern crate self as skillhost_sdk;

#[doc(hidden)]
#[path = "bindings.rs"]
pub mod __bindings;
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
mod error;
pub mod files;
pub mod http;
pub mod log;

pub use error::ToolError;
pub use serde_json;
/// Turns a function into a tool: see [the crate docs](crate#tools).
pub use skillhost_sdk_macros::tool;

/// Reports progress of the current call: `done` out of `total` units
/// (`None` when the total is unknown), with an optional message.
///
/// The host forwards it to the caller when the caller asked for progress and
/// rate-limits it; calling it never fails, so call it as often as is natural
/// (every few thousand rows, every file). Off wasm it does nothing.
pub fn progress(done: u64, total: Option<u64>, message: Option<&str>) {
    #[cfg(target_arch = "wasm32")]
    __bindings::skillhost::skill::host::progress(done, total, message);
    #[cfg(not(target_arch = "wasm32"))]
    let _ = (done, total, message);
}

/// Everything a skill usually needs: `use skillhost_sdk::prelude::*;`.
///
/// `Deserialize`, `Serialize` and `JsonSchema` are serde's and schemars'
/// traits with derives that work without depending on serde or schemars
/// (a crate that does depend on them can use their derives instead).
pub mod prelude {
    // The glob brings the traits and serde's/schemars' derives; the explicit
    // imports below replace the derives (macro namespace) only.
    pub use crate::__private::traits::*;
    pub use crate::{ToolError, log, progress, skill, tool};
    #[doc(inline)]
    pub use skillhost_sdk_macros::{Deserialize, JsonSchema, Serialize};
}

/// Registers the skill's tools: `skill!(tool_a, tool_b)`, once per skill.
///
/// Each argument is a function marked [`#[tool]`](tool) (a path such as
/// `tools::word_count` works too). The macro implements the skill's WIT
/// exports; two tools with the same name fail to compile, and so does a
/// `#[tool]` function it does not list.
#[macro_export]
macro_rules! skill {
    ($($($tool:ident)::+),+ $(,)?) => {
        const _: () = $crate::__private::assert_unique_names(&[$($($tool)::+::NAME),+]);

        $(impl $crate::__private::Listed for $($tool)::+::Tool {})+

        #[doc(hidden)]
        struct __SkillhostSkill;

        impl $crate::__private::Guest for __SkillhostSkill {
            fn tools() -> ::std::vec::Vec<$crate::__private::WitTool> {
                $crate::__private::tools(&[$($($tool)::+::spec),+])
            }

            fn call(
                tool: ::std::string::String,
                input: ::std::string::String,
            ) -> ::core::result::Result<::std::string::String, $crate::__private::WitCallError> {
                $crate::__private::dispatch(
                    &tool,
                    &input,
                    &[$(($($tool)::+::NAME, $($tool)::+::call as $crate::__private::CallFn)),+],
                )
            }
        }

        $crate::__private::export!(__SkillhostSkill with_types_in $crate::__bindings);
    };
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    // What `skill!` would implement: these tools are tested one by one, without a skill.
    impl crate::__private::Listed for word_count::Tool {}
    impl crate::__private::Listed for now::Tool {}
    impl crate::__private::Listed for refuse::Tool {}

    #[derive(Deserialize, JsonSchema)]
    struct CountInput {
        /// The text to count words in.
        text: String,
    }

    #[derive(Serialize, JsonSchema)]
    struct CountOutput {
        words: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    }

    /// Count the words in a text.
    #[tool(read_only, idempotent, example = r#"{"text": "hello world"}"#)]
    fn word_count(input: CountInput) -> Result<CountOutput, ToolError> {
        Ok(CountOutput { words: input.text.split_whitespace().count(), note: None })
    }

    /// The time, always noon.
    #[tool(name = "now-ish")]
    fn now() -> Result<String, ToolError> {
        Ok("12:00".into())
    }

    /// Always refused.
    #[tool(destructive)]
    fn refuse(_input: CountInput) -> Result<CountOutput, ToolError> {
        Err(ToolError::denied("no"))
    }

    #[test]
    fn spec_has_description_schemas_hints_and_examples() {
        let spec = word_count::spec();
        assert_eq!(spec.name, "word_count");
        assert_eq!(spec.description, "Count the words in a text.");
        assert!(spec.annotations.read_only && spec.annotations.idempotent);
        assert!(!spec.annotations.destructive && !spec.annotations.open_world);
        assert_eq!(spec.examples, [r#"{"text": "hello world"}"#]);

        let input: serde_json::Value = serde_json::from_str(&spec.input_schema).unwrap();
        assert_eq!(input["type"], "object");
        assert_eq!(input["title"], "CountInput", "the schema keeps the type's name");
        assert_eq!(input["properties"]["text"]["description"], "The text to count words in.");
        assert_eq!(input["required"], serde_json::json!(["text"]));
        let output: serde_json::Value = serde_json::from_str(spec.output_schema.as_deref().unwrap()).unwrap();
        assert_eq!(output["properties"]["words"]["type"], "integer");
        assert_eq!(output["required"], serde_json::json!(["words"]), "skipped when empty: optional");
    }

    #[test]
    fn tools_without_input_accept_any_object() {
        let spec = now::spec();
        assert_eq!(spec.name, "now-ish");
        assert!(spec.output_schema.is_none(), "a string output has no object schema");
        assert_eq!(now::call("{}").unwrap(), r#""12:00""#);
        assert_eq!(now::call("").unwrap(), r#""12:00""#);
        assert!(matches!(now::call("[1]"), Err(crate::__private::CallError::InvalidInput(_))));
    }

    #[test]
    fn calls_parse_input_and_map_errors() {
        use crate::__private::CallError;
        assert_eq!(word_count::call(r#"{"text": "a b c"}"#).unwrap(), r#"{"words":3}"#);
        let Err(CallError::InvalidInput(message)) = word_count::call(r#"{"text": 3}"#) else {
            panic!("expected invalid input");
        };
        assert!(message.starts_with("text: invalid type"), "{message}");
        assert!(matches!(word_count::call("{}"), Err(CallError::InvalidInput(m)) if m.contains("text")));
        assert!(matches!(word_count::call("{} x"), Err(CallError::InvalidInput(_))));
        assert_eq!(refuse::call(r#"{"text": ""}"#), Err(CallError::Denied("no".into())));
    }

    #[test]
    fn dispatch_lists_the_tools_of_an_unknown_name() {
        use crate::__private::{CallFn, WitCallError, dispatch};
        let table = [(word_count::NAME, word_count::call as CallFn), (now::NAME, now::call as CallFn)];
        assert!(dispatch("now-ish", "{}", &table).is_ok());
        let Err(WitCallError::UnknownTool(message)) = dispatch("nope", "{}", &table) else {
            panic!("expected unknown tool");
        };
        assert!(message.contains("nope") && message.contains("word_count, now-ish"), "{message}");
    }

    #[test]
    fn io_errors_map_to_denied_or_failed() {
        use std::io::{Error, ErrorKind};
        assert!(matches!(ToolError::from(Error::from(ErrorKind::PermissionDenied)), ToolError::Denied(_)));
        assert!(matches!(ToolError::from(Error::from(ErrorKind::NotFound)), ToolError::Failed(_)));
        let outside = Error::other("failed to find a pre-opened file descriptor through which \"/etc\" could be opened");
        assert!(matches!(ToolError::from(outside), ToolError::Denied(_)));
        assert_eq!(ToolError::failed("x").to_string(), "failed: x");
    }
}
