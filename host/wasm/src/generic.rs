//! Calling a generic component: a component that does not export our world
//! (`skillhost:skill/guest`) is a skill whose tools are its exported functions, as
//! [`reflect`](skillhost_package::reflect) found them (names, schemas, docs). Values are
//! converted strictly both ways (`value.rs`): a function returning `result<T, E>` answers
//! with `T`'s JSON on `ok` and is a tool error carrying `E`'s JSON on `err`; any other
//! return type is the answer as is; no return value answers `null`.

use serde_json::Value;
use skillhost_package::{ExportedFunction, Reflection, WitType};
use wasmtime::Store;
use wasmtime::component::{ComponentExportIndex, InstancePre, Val};

use crate::bindings::types::CallError as GuestError;
use crate::state::CallState;
use crate::value::{ValueError, object_to_fields, val_to_json};

/// An export the component's reflection named that the compiled component lacks.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MissingExport {
    #[error("export `{0}` not found")]
    Instance(String),
    #[error("exported function `{0}` not found")]
    Function(String),
}

/// The parts of a loaded generic component a call needs.
pub(crate) struct GenericPre {
    pub(crate) pre: InstancePre<CallState>,
    /// One per tool, in the order of the skill's tools.
    pub(crate) calls: Vec<(ExportedFunction, ComponentExportIndex)>,
}

impl GenericPre {
    /// Find each tool's function in `component`.
    pub(crate) fn new(pre: InstancePre<CallState>, reflection: &Reflection) -> Result<Self, MissingExport> {
        let component = pre.component();
        let calls = reflection
            .calls
            .iter()
            .cloned()
            .map(|call| {
                let instance = match &call.instance {
                    Some(name) => Some(component.get_export_index(None, name).ok_or_else(|| MissingExport::Instance(name.clone()))?),
                    None => None,
                };
                let index = component
                    .get_export_index(instance.as_ref(), &call.function)
                    .ok_or_else(|| MissingExport::Function(call.function.clone()))?;
                Ok((call, index))
            })
            .collect::<Result<_, MissingExport>>()?;
        Ok(Self { pre, calls })
    }

    /// The component values of `input` for tool number `tool`.
    pub(crate) fn args(&self, tool: usize, input: &Value) -> Result<Vec<Val>, ValueError> {
        let (call, _) = &self.calls[tool];
        let ty = WitType::Record(call.params.clone());
        Ok(object_to_fields(&call.params, input, "input", &ty)?.into_iter().map(|(_, v)| v).collect())
    }

    /// Instantiate in `store` and call tool number `tool` with `args`: the answer as JSON
    /// text, or the tool's error.
    pub(crate) async fn call(
        &self,
        store: &mut Store<CallState>,
        tool: usize,
        args: Vec<Val>,
    ) -> wasmtime::Result<Result<String, GuestError>> {
        let (call, index) = &self.calls[tool];
        let instance = self.pre.instantiate_async(&mut *store).await?;
        let func = instance
            .get_func(&mut *store, index)
            .ok_or_else(|| wasmtime::Error::msg(format!("exported function `{}` not found", call.function)))?;
        let mut results = vec![Val::Bool(false); usize::from(call.result.is_some())];
        func.call_async(&mut *store, &args, &mut results).await?;
        let Some(ty) = &call.result else { return Ok(Ok("null".into())) };
        let (ty, val) = match (ty, &results[0]) {
            (WitType::Result { ok, err }, Val::Result(result)) => match result {
                Ok(payload) => match (ok, payload) {
                    (Some(t), Some(v)) => (t.as_ref(), v.as_ref()),
                    _ => return Ok(Ok("null".into())),
                },
                Err(payload) => {
                    let message = match (err, payload) {
                        (Some(t), Some(v)) => match val_to_json(t, v, "err") {
                            Ok(Value::String(s)) => s,
                            Ok(other) => other.to_string(),
                            Err(e) => e.to_string(),
                        },
                        _ => "the function returned `err`".into(),
                    };
                    return Ok(Err(GuestError::Failed(message)));
                }
            },
            (ty, val) => (ty, val),
        };
        Ok(match val_to_json(ty, val, "output") {
            Ok(json) => Ok(json.to_string()),
            Err(e) => Err(GuestError::Failed(format!("the component returned a value that does not match its WIT: {e}"))),
        })
    }
}
