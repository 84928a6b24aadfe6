//! The echo tool as a hyper-mcp plugin: hyper-mcp's v2 plugin interface (`list_tools`,
//! `call_tool`, JSON in and out, the MCP result shapes) on the Extism PDK. It answers
//! `{"text": T}` with one text content `T`, as the skillhost echo skill answers `{"text": T}`.

mod wasip2;

use extism_pdk::*;
use serde_json::{Value, json};

#[plugin_fn]
pub fn list_tools(_input: Json<Value>) -> FnResult<Json<Value>> {
    Ok(Json(json!({"tools": [{
        "name": "echo",
        "description": "Echo the text back.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The text to echo."}},
            "required": ["text"],
        },
        "annotations": {"readOnlyHint": true, "idempotentHint": true},
    }]})))
}

#[plugin_fn]
pub fn call_tool(input: Json<Value>) -> FnResult<Json<Value>> {
    let Some(text) = input.0["request"]["arguments"]["text"].as_str() else {
        return Ok(Json(json!({"isError": true, "content": [{"type": "text", "text": "echo: `text` (a string) is required"}]})));
    };
    Ok(Json(json!({"content": [{"type": "text", "text": text}]})))
}
