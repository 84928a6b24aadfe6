//! What a component offers, read from its WIT with `wit-parser` (no compilation, so
//! `inspect`, the registry and the runtime all use it): whether it exports our world
//! (`skillhost:skill/guest`), and for a generic component (one that does not) the tools
//! its exported functions become.
//!
//! Every exported function becomes a tool: its parameters become one JSON object
//! ([`params_schema`](crate::params_schema)). A function whose types have no JSON form
//! (resources, handles, futures, streams, maps…) is left out with the reason, never the
//! whole component unless nothing is left.
//!
//! **Tool names.** A top-level function keeps its name (`add`); a function of an exported
//! interface is `INTERFACE-FUNCTION`, the interface's own name without package or version
//! (`math` + `add-pairs` → `math-add-pairs`; `test:calc/shapes@0.1.0` + `area` →
//! `shapes-area`), lowercased. Two functions that map to one name are a collision: the
//! first (in export order) keeps it and the next is refused, naming both. Exported
//! `wasi:` interfaces (`wasi:cli/run`, `wasi:http/incoming-handler`) are entry points for
//! other hosts, not tools.
//!
//! **Docs.** A tool's description is its function's WIT doc comment when the component
//! carries a `package-docs` custom section (WIT doc comments as `wit-component` writes
//! them for a package); otherwise the function's signature.
//!
//! **Results.** A function returning `result<T, E>` answers with `T` on `ok` and is a tool
//! error carrying `E` on `err`; any other return type is the answer as is; no return
//! value answers `null`. The tool's output schema is that of the answer (`T` for a
//! `result`).

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;
use skillhost_core::{Annotations, ToolSpec};
use wit_parser::{FunctionKind, Handle, Resolve, Type, TypeDefKind, WorldItem, WorldKey};

use crate::sections::{DOCS_SECTION, FormatError, read_section, strip_section};
use crate::types::{WitType, params_schema, schema};

/// The export that makes a component one of our own skills.
pub const SKILL_EXPORT: &str = "skillhost:skill/guest";

/// What a component offers, read from its WIT.
#[derive(Clone, Debug)]
pub struct Reflection {
    /// The component's world as WIT text (with the non-WASI packages it exports from).
    pub wit: String,
    /// Whether it exports our world (`skillhost:skill/guest`): then its tools come from
    /// the guest's `tools()`, and `tools` below is empty.
    pub is_skill: bool,
    /// The tools its exported functions become.
    pub tools: Vec<ToolSpec>,
    /// Exported functions that are not tools, and why.
    pub refused: Vec<RefusedFunction>,
    /// Imports skillhost does not provide (anything but WASI 0.2 and our own host
    /// interface), by name. A component with any cannot load.
    pub missing_imports: Vec<String>,
    /// Exports in WIT order, for a generated description.
    pub exports: Vec<String>,
    /// How to call each tool, in the order of `tools`.
    pub calls: Vec<ExportedFunction>,
}

/// An exported function that is not offered as a tool.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RefusedFunction {
    /// `interface.function` or `function`, as exported.
    pub function: String,
    /// Why it is not a tool.
    pub reason: String,
}

/// Where a tool's function is and what it takes.
#[derive(Clone, Debug)]
pub struct ExportedFunction {
    /// The exported instance holding it (`math`, `test:calc/shapes@0.1.0`), or `None`
    /// for a top-level function.
    pub instance: Option<String>,
    /// The function's name in its instance (or at the top level).
    pub function: String,
    /// Its parameters, by name.
    pub params: Vec<(String, WitType)>,
    /// Its result type, if it returns one.
    pub result: Option<WitType>,
}

impl Reflection {
    /// The import refusal, if any, as one sentence.
    pub fn import_error(&self) -> Option<String> {
        let first = self.missing_imports.first()?;
        Some(format!(
            "component imports `{first}`, which skillhost does not provide (it provides WASI 0.2 and `skillhost:skill/host`){}",
            if self.missing_imports.len() > 1 { format!("; also {}", self.missing_imports[1..].join(", ")) } else { String::new() }
        ))
    }

    /// Why nothing of this component is callable, when nothing is.
    pub fn nothing_callable(&self) -> Option<String> {
        if self.is_skill || !self.tools.is_empty() {
            return None;
        }
        let refused: Vec<String> = self.refused.iter().map(|r| format!("`{}` {}", r.function, r.reason)).collect();
        Some(format!(
            "it exports neither `{SKILL_EXPORT}@0.1.0` nor any function skillhost can call as a tool{}",
            if refused.is_empty() { String::new() } else { format!(" ({})", refused.join("; ")) }
        ))
    }
}

/// Read what the component `bytes` offers from its WIT.
pub fn reflect(bytes: &[u8]) -> Result<Reflection, FormatError> {
    // wit-parser's decoder applies a `package-docs` section itself, and fails unless it
    // describes the decoded world package (`root:component`) exactly; the docs of the
    // package the component was built from (what `docs_section` writes) are read here
    // instead, leniently.
    let section = read_section(bytes, DOCS_SECTION)?;
    let docs = section.map(Docs::parse).unwrap_or_default();
    let stripped;
    let bytes = if section.is_none() {
        bytes
    } else {
        stripped = strip_section(bytes, DOCS_SECTION)?;
        &stripped
    };
    let decoded = wit_parser::decoding::decode(bytes).map_err(|e| FormatError(format!("cannot read its WIT: {e:#}")))?;
    let wit_parser::decoding::DecodedWasm::Component(resolve, world_id) = decoded else {
        return Err(FormatError("it is a WIT package, not a component".into()));
    };
    let world = &resolve.worlds[world_id];

    let mut missing_imports = Vec::new();
    for (key, item) in &world.imports {
        match item {
            WorldItem::Interface { .. } => {
                let name = resolve.name_world_key(key);
                if !(name.starts_with("wasi:") || name.starts_with("skillhost:skill/")) {
                    missing_imports.push(name);
                }
            }
            WorldItem::Function(f) => missing_imports.push(format!("function {}", f.name)),
            WorldItem::Type { .. } => {}
        }
    }

    let mut reflection = Reflection {
        wit: print_wit(&resolve, world_id),
        is_skill: false,
        tools: Vec::new(),
        refused: Vec::new(),
        missing_imports,
        exports: Vec::new(),
        calls: Vec::new(),
    };
    let mut names: HashMap<String, String> = HashMap::new();
    for (key, item) in &world.exports {
        match item {
            WorldItem::Interface { id, .. } => {
                let export = resolve.name_world_key(key);
                if let Some(hook) = toolchain_hook(&resolve, key, *id) {
                    reflection.refused.push(hook);
                    continue;
                }
                reflection.exports.push(export.clone());
                if export.starts_with(&format!("{SKILL_EXPORT}@")) || export == SKILL_EXPORT {
                    reflection.is_skill = true;
                    continue;
                }
                if export.starts_with("wasi:") {
                    reflection.refused.push(RefusedFunction {
                        function: export,
                        reason: "is a WASI entry point for other hosts, not a library function".into(),
                    });
                    continue;
                }
                let interface = &resolve.interfaces[*id];
                let short = match key {
                    WorldKey::Name(name) => name.clone(),
                    WorldKey::Interface(_) => interface.name.clone().unwrap_or_else(|| export.clone()),
                };
                for function in interface.functions.values() {
                    let doc = docs.function(Some(&short), &function.name);
                    reflection.add(&resolve, Some((&export, &short)), function, doc, &mut names);
                }
            }
            WorldItem::Function(function) => {
                reflection.exports.push(function.name.clone());
                let doc = docs.function(None, &function.name);
                reflection.add(&resolve, None, function, doc, &mut names);
            }
            WorldItem::Type { .. } => {}
        }
    }
    Ok(reflection)
}

/// A guest toolchain's own export, which is not the author's and not a tool: the
/// `exports` interface componentize-py adds to every component it builds, whose one
/// function, `init(app-name, symbols, stub-wasi)`, it calls while building (called
/// later, it traps). componentize-js adds no export of its own; a WASI entry point either
/// toolchain exports (`wasi:cli/run`, `wasi:http/incoming-handler`) is refused as WASI.
fn toolchain_hook(resolve: &Resolve, key: &WorldKey, id: wit_parser::InterfaceId) -> Option<RefusedFunction> {
    let WorldKey::Name(name) = key else { return None };
    let interface = &resolve.interfaces[id];
    let mut functions = interface.functions.values();
    let (Some(init), None) = (functions.next(), functions.next()) else { return None };
    let params: Vec<&str> = init.params.iter().map(|p| p.name.as_str()).collect();
    (name == "exports" && init.name == "init" && params == ["app-name", "symbols", "stub-wasi"]).then(|| RefusedFunction {
        function: format!("{name}.{}", init.name),
        reason: "is componentize-py's own initialisation hook, which it calls while building the component; it is not a tool".into(),
    })
}

impl Reflection {
    /// Add `function` (exported from `instance`: its export name and short name) as a tool,
    /// or record why it is not one.
    fn add(
        &mut self,
        resolve: &Resolve,
        instance: Option<(&String, &String)>,
        function: &wit_parser::Function,
        doc: Option<String>,
        names: &mut HashMap<String, String>,
    ) {
        let shown = match instance {
            Some((_, short)) => format!("{short}.{}", function.name),
            None => function.name.clone(),
        };
        let refuse = |this: &mut Self, reason: String| this.refused.push(RefusedFunction { function: shown.clone(), reason });
        match function.kind {
            FunctionKind::Freestanding => {}
            FunctionKind::AsyncFreestanding => return refuse(self, "is an async function, which skillhost does not call yet".into()),
            FunctionKind::Method(r)
            | FunctionKind::AsyncMethod(r)
            | FunctionKind::Static(r)
            | FunctionKind::AsyncStatic(r)
            | FunctionKind::Constructor(r) => {
                return refuse(self, format!("belongs to resource `{}`; resources have no JSON form", type_name(resolve, r)));
            }
        }
        let mut params = Vec::with_capacity(function.params.len());
        for param in &function.params {
            match wit_type(resolve, &param.ty) {
                Ok(ty) => params.push((param.name.clone(), ty)),
                Err(why) => return refuse(self, format!("parameter `{}` uses {why}, which has no JSON form", param.name)),
            }
        }
        let result = match function.result.as_ref().map(|t| wit_type(resolve, t)).transpose() {
            Ok(result) => result,
            Err(why) => return refuse(self, format!("its result uses {why}, which has no JSON form")),
        };
        let name = match instance {
            Some((_, short)) => format!("{short}-{}", function.name),
            None => function.name.clone(),
        }
        .to_ascii_lowercase();
        if let Some(taken) = names.get(&name) {
            return refuse(self, format!("its tool name `{name}` is already taken by {taken}; rename one of them in the WIT"));
        }
        let signature = format!(
            "func({}){}",
            params.iter().map(|(n, t)| format!("{n}: {t}")).collect::<Vec<_>>().join(", "),
            result.as_ref().map(|t| format!(" -> {t}")).unwrap_or_default()
        );
        let description = doc.unwrap_or_else(|| format!("`{shown}: {signature}`, exported by the component"));
        let input_schema = params_schema(&params).to_string();
        // The answer: `ok`'s value for a `result`, `null` for none (no schema then).
        let output = match &result {
            Some(WitType::Result { ok, .. }) => ok.as_deref(),
            other => other.as_ref(),
        };
        let output_schema = output.map(|t| schema(t).to_string());
        match ToolSpec::from_parts(name.clone(), description, &input_schema, output_schema.as_deref(), Annotations::default(), &[]) {
            Ok(spec) => {
                names.insert(name, if instance.is_some() { format!("`{shown}`") } else { format!("the top-level function `{shown}`") });
                self.tools.push(spec);
                self.calls.push(ExportedFunction {
                    instance: instance.map(|(export, _)| export.clone()),
                    function: function.name.clone(),
                    params,
                    result,
                });
            }
            Err(e) => refuse(self, format!("cannot be a tool: {}", e.reason)),
        }
    }
}

/// The name of a (resource) type, for messages.
fn type_name(resolve: &Resolve, id: wit_parser::TypeId) -> String {
    resolve.types[id].name.clone().unwrap_or_else(|| "<anonymous>".into())
}

/// What a WIT type uses that has no JSON form (quoted in a refusal: "uses {this}, which
/// has no JSON form").
#[derive(Debug, Clone, thiserror::Error)]
enum NoJsonForm {
    #[error("an `error-context`")]
    ErrorContext,
    #[error("resource `{0}`")]
    Resource(String),
    #[error("a `map`")]
    Map,
    #[error("a fixed-length list")]
    FixedLengthList,
    #[error("a `future`")]
    Future,
    #[error("a `stream`")]
    Stream,
    #[error("a type of unknown structure")]
    Unknown,
}

/// The [`WitType`] of a WIT type, or what it uses that has no JSON form.
fn wit_type(resolve: &Resolve, ty: &Type) -> Result<WitType, NoJsonForm> {
    let boxed = |t: &Type| wit_type(resolve, t).map(Box::new);
    Ok(match ty {
        Type::Bool => WitType::Bool,
        Type::U8 => WitType::U8,
        Type::U16 => WitType::U16,
        Type::U32 => WitType::U32,
        Type::U64 => WitType::U64,
        Type::S8 => WitType::S8,
        Type::S16 => WitType::S16,
        Type::S32 => WitType::S32,
        Type::S64 => WitType::S64,
        Type::F32 => WitType::F32,
        Type::F64 => WitType::F64,
        Type::Char => WitType::Char,
        Type::String => WitType::String,
        Type::ErrorContext => return Err(NoJsonForm::ErrorContext),
        Type::Id(id) => match &resolve.types[*id].kind {
            TypeDefKind::Record(r) => WitType::Record(
                r.fields.iter().map(|f| Ok((f.name.clone(), wit_type(resolve, &f.ty)?))).collect::<Result<_, NoJsonForm>>()?,
            ),
            TypeDefKind::Resource => return Err(NoJsonForm::Resource(type_name(resolve, *id))),
            TypeDefKind::Handle(Handle::Own(r) | Handle::Borrow(r)) => return Err(NoJsonForm::Resource(type_name(resolve, *r))),
            TypeDefKind::Flags(f) => WitType::Flags(f.flags.iter().map(|f| f.name.clone()).collect()),
            TypeDefKind::Tuple(t) => WitType::Tuple(t.types.iter().map(|t| wit_type(resolve, t)).collect::<Result<_, _>>()?),
            TypeDefKind::Variant(v) => WitType::Variant(
                v.cases.iter().map(|c| Ok((c.name.clone(), c.ty.as_ref().map(|t| wit_type(resolve, t)).transpose()?))).collect::<Result<
                    _,
                    NoJsonForm,
                >>(
                )?,
            ),
            TypeDefKind::Enum(e) => WitType::Enum(e.cases.iter().map(|c| c.name.clone()).collect()),
            TypeDefKind::Option(t) => WitType::Option(boxed(t)?),
            TypeDefKind::Result(r) => {
                WitType::Result { ok: r.ok.as_ref().map(boxed).transpose()?, err: r.err.as_ref().map(boxed).transpose()? }
            }
            TypeDefKind::List(t) => WitType::List(boxed(t)?),
            TypeDefKind::Type(t) => wit_type(resolve, t)?,
            TypeDefKind::Map(..) => return Err(NoJsonForm::Map),
            TypeDefKind::FixedLengthList(..) => return Err(NoJsonForm::FixedLengthList),
            TypeDefKind::Future(_) => return Err(NoJsonForm::Future),
            TypeDefKind::Stream(_) => return Err(NoJsonForm::Stream),
            TypeDefKind::Unknown => return Err(NoJsonForm::Unknown),
        },
    })
}

/// The world's package as WIT text, with the packages of the interfaces it exports
/// (WASI and our own packages left out: they are standard and long).
fn print_wit(resolve: &Resolve, world: wit_parser::WorldId) -> String {
    let main = resolve.worlds[world].package.expect("a decoded world belongs to a package");
    let mut nested = Vec::new();
    for (_, item) in &resolve.worlds[world].exports {
        if let WorldItem::Interface { id, .. } = item
            && let Some(pkg) = resolve.interfaces[*id].package
            && pkg != main
            && !nested.contains(&pkg)
            && !matches!(resolve.packages[pkg].name.namespace.as_str(), "wasi" | "skillhost")
        {
            nested.push(pkg);
        }
    }
    let mut printer = wit_component::WitPrinter::default();
    match printer.print(resolve, main, &nested) {
        Ok(()) => printer.output.to_string(),
        Err(e) => format!("// the WIT could not be printed: {e}"),
    }
}

/// The `package-docs` section for the WIT package in `wit_dir` (a folder of `.wit` files
/// or one file): what a component built from that WIT carries for its tools to be
/// described by their doc comments. Embed it with [`embed`](crate::embed)
/// under [`DOCS_SECTION`].
pub fn docs_section(wit_dir: &Path) -> Result<Vec<u8>, FormatError> {
    let mut resolve = Resolve::default();
    let (package, _) = resolve.push_path(wit_dir).map_err(|e| FormatError(format!("{}: {e:#}", wit_dir.display())))?;
    wit_parser::PackageMetadata::extract(&resolve, package).encode().map_err(|e| FormatError(format!("cannot encode its docs: {e:#}")))
}

/// Doc comments from a `package-docs` section: its JSON (after a version byte) as
/// `wit-parser` writes it. Read leniently: a section in another layout gives no docs.
#[derive(Default)]
struct Docs(Value);

impl Docs {
    fn parse(data: &[u8]) -> Self {
        match data.split_first() {
            Some((0 | 1, json)) => Docs(serde_json::from_slice(json).unwrap_or(Value::Null)),
            _ => Docs::default(),
        }
    }

    /// The doc comment of `function`, in `interface` or at the top of a world.
    fn function(&self, interface: Option<&str>, function: &str) -> Option<String> {
        let text = |v: &Value| match v {
            Value::String(s) => Some(s.clone()),
            Value::Object(o) => o.get("docs").and_then(Value::as_str).map(str::to_owned),
            _ => None,
        };
        let in_interface = |i: &Value| i.get("funcs").and_then(|f| f.get(function)).and_then(text);
        let worlds = self.0.get("worlds").and_then(Value::as_object);
        let found = match interface {
            Some(name) => self.0.get("interfaces").and_then(|i| i.get(name)).and_then(in_interface).or_else(|| {
                worlds?.values().find_map(|w| {
                    ["interfaces", "interface_exports"].iter().find_map(|k| w.get(k).and_then(|i| i.get(name)).and_then(in_interface))
                })
            }),
            None => worlds?
                .values()
                .find_map(|w| ["func_exports", "funcs"].iter().find_map(|k| w.get(k).and_then(|f| f.get(function)).and_then(text))),
        };
        found.map(|d| d.trim().to_owned()).filter(|d| !d.is_empty())
    }
}
