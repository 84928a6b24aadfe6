//! A component's top-level sections, read with `wasmparser` and written with
//! `wasm-encoder`: the custom sections a skill package carries (its `skill.toml`, its
//! SKILL.md, WIT doc comments), and the imports and exports that decide how it links.
//!
//! Custom sections are ignored by every runtime, so an embedded skill still runs anywhere
//! a component runs. Nested modules and components are skipped whole: only the
//! component's own sections count.

use std::ops::Range;

use wasm_encoder::{CustomSection, RawSection};
use wasmparser::{Chunk, Parser, Payload};

/// Custom section holding the skill's `skill.toml`.
pub const MANIFEST_SECTION: &str = "skillhost:manifest";
/// Custom section holding the skill's `SKILL.md`.
pub const INSTRUCTIONS_SECTION: &str = "skillhost:instructions";
/// Custom section holding WIT doc comments, as `wit-component` writes them for a package.
pub const DOCS_SECTION: &str = "package-docs";

const WASM_MAGIC: [u8; 4] = *b"\0asm";
/// Version and layer fields of a component (layer 1); core modules have layer 0.
const COMPONENT_VERSION: [u8; 4] = [0x0d, 0x00, 0x01, 0x00];

/// Why a binary could not be read as a component.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FormatError(pub(crate) String);

/// What kind of WebAssembly binary `bytes` is: a component, or an error saying what it
/// is instead.
pub fn check_component(bytes: &[u8]) -> Result<(), FormatError> {
    if bytes.len() < 8 || bytes[..4] != WASM_MAGIC {
        return Err(FormatError("the file does not start with the WebAssembly magic number".into()));
    }
    if bytes[4..8] == COMPONENT_VERSION {
        Ok(())
    } else if bytes[4..8] == [1, 0, 0, 0] {
        Err(FormatError("it is a core module, not a component; build for wasm32-wasip2 or wrap it with `wasm-tools component new`".into()))
    } else {
        Err(FormatError(format!("unknown WebAssembly version {:02x?}", &bytes[4..8])))
    }
}

/// One top-level section: its id, the byte range of its contents, and for a custom
/// section its name and data.
struct Section<'a> {
    id: u8,
    content: Range<usize>,
    custom: Option<(&'a str, &'a [u8])>,
}

/// The component's own (top-level) payloads, in order, each with its section. A nested
/// module or component is stepped over by its size, never parsed: a walk costs one step
/// per top-level section however large the code inside.
fn top_level(bytes: &[u8]) -> Result<Vec<(Payload<'_>, Option<Section<'_>>)>, FormatError> {
    check_component(bytes)?;
    let truncated = |e: wasmparser::BinaryReaderError| FormatError(format!("cannot read its sections (truncated?): {e}"));
    let mut out = Vec::new();
    let mut parser = Parser::new(0);
    let mut rest = bytes;
    loop {
        let (payload, consumed) = match parser.parse(rest, true).map_err(truncated)? {
            Chunk::Parsed { payload, consumed } => (payload, consumed),
            // Not with `eof = true`: a short file is an error above.
            Chunk::NeedMoreData(_) => return Err(FormatError("cannot read its sections (truncated?)".into())),
        };
        rest = &rest[consumed..];
        let nested = match &payload {
            Payload::ModuleSection { unchecked_range, .. } | Payload::ComponentSection { unchecked_range, .. } => unchecked_range.len(),
            _ => 0,
        };
        rest = rest
            .get(nested..)
            .ok_or_else(|| FormatError("cannot read its sections (truncated?): a nested module runs past the end".into()))?;
        if let Payload::End(_) = payload {
            return Ok(out);
        }
        let section = payload.as_section().map(|(id, content)| Section {
            id,
            content,
            custom: match &payload {
                Payload::CustomSection(reader) => Some((reader.name(), reader.data())),
                _ => None,
            },
        });
        out.push((payload, section));
    }
}

/// Read the custom section `name` of a component, if present.
pub fn read_section<'a>(bytes: &'a [u8], name: &str) -> Result<Option<&'a [u8]>, FormatError> {
    Ok(top_level(bytes)?.into_iter().find_map(|(_, section)| section?.custom.filter(|(n, _)| *n == name).map(|(_, data)| data)))
}

/// Return `component` with the given custom sections set (replacing earlier ones of the
/// same names, so embedding twice is idempotent).
pub fn embed(component: &[u8], entries: &[(&str, &[u8])]) -> Result<Vec<u8>, FormatError> {
    let mut out = rewrite(component, |name| entries.iter().any(|(n, _)| *n == name))?;
    for (name, data) in entries {
        out.section(&CustomSection { name: (*name).into(), data: (*data).into() });
    }
    Ok(out.finish())
}

/// Return `component` without its top-level custom sections called `name`.
pub fn strip_section(component: &[u8], name: &str) -> Result<Vec<u8>, FormatError> {
    Ok(rewrite(component, |n| n == name)?.finish())
}

/// `component`'s sections, in order, without the custom sections `drop` names.
fn rewrite(component: &[u8], drop: impl Fn(&str) -> bool) -> Result<wasm_encoder::Component, FormatError> {
    let mut out = wasm_encoder::Component::new();
    for (_, section) in top_level(component)? {
        let Some(section) = section else { continue };
        if section.custom.is_some_and(|(name, _)| drop(name)) {
            continue;
        }
        out.section(&RawSection { id: section.id, data: &component[section.content] });
    }
    Ok(out)
}

/// The names a component imports and exports at its top level
/// (`wasi:http/outgoing-handler@0.2.0`, `skillhost:skill/guest@0.1.0`), read from its
/// import and export sections alone: milliseconds, where compiling takes seconds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Interface {
    /// Top-level imports, in order.
    pub imports: Vec<String>,
    /// Top-level exports, in order.
    pub exports: Vec<String>,
}

impl Interface {
    /// Read the top-level imports and exports of the component `bytes`.
    pub fn read(bytes: &[u8]) -> Result<Self, FormatError> {
        let bad = |e: wasmparser::BinaryReaderError| FormatError(format!("cannot read its imports and exports: {e}"));
        let mut interface = Self::default();
        for (payload, _) in top_level(bytes)? {
            match payload {
                Payload::ComponentImportSection(reader) => {
                    for import in reader {
                        interface.imports.push(import.map_err(bad)?.name.name.to_owned());
                    }
                }
                Payload::ComponentExportSection(reader) => {
                    for export in reader {
                        interface.exports.push(export.map_err(bad)?.name.name.to_owned());
                    }
                }
                _ => {}
            }
        }
        Ok(interface)
    }

    /// Whether it imports `wasi:http` (it needs `[network]` to link).
    pub fn imports_http(&self) -> bool {
        self.imports.iter().any(|name| name.starts_with("wasi:http/"))
    }

    /// Whether it exports `name`.
    pub fn exports(&self, name: &str) -> bool {
        self.exports.iter().any(|export| export == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component: its header only.
    fn tiny() -> Vec<u8> {
        wasm_encoder::Component::new().finish()
    }

    #[test]
    fn embed_then_read_is_idempotent() {
        let once = embed(&tiny(), &[(MANIFEST_SECTION, b"name = 1"), ("other", b"x")]).unwrap();
        assert_eq!(read_section(&once, MANIFEST_SECTION).unwrap(), Some(&b"name = 1"[..]));
        let twice = embed(&once, &[(MANIFEST_SECTION, b"name = 2")]).unwrap();
        assert_eq!(read_section(&twice, MANIFEST_SECTION).unwrap(), Some(&b"name = 2"[..]));
        assert_eq!(read_section(&twice, "other").unwrap(), Some(&b"x"[..]));
        assert_eq!(twice.len(), once.len(), "the old section was replaced, not duplicated");
        assert_eq!(strip_section(&twice, MANIFEST_SECTION).unwrap(), embed(&tiny(), &[("other", b"x")]).unwrap());
    }

    #[test]
    fn a_nested_components_sections_are_not_the_components_own() {
        let inner = embed(&tiny(), &[(MANIFEST_SECTION, b"inner")]).unwrap();
        let mut outer = wasm_encoder::Component::new();
        outer.section(&RawSection { id: wasm_encoder::ComponentSectionId::Component as u8, data: &inner });
        let outer = outer.finish();
        assert_eq!(read_section(&outer, MANIFEST_SECTION).unwrap(), None);
        let embedded = embed(&outer, &[(MANIFEST_SECTION, b"outer")]).unwrap();
        assert_eq!(read_section(&embedded, MANIFEST_SECTION).unwrap(), Some(&b"outer"[..]));
        assert!(embedded.windows(5).any(|w| w == b"inner"), "the nested component is kept whole");
    }

    #[test]
    fn refuses_truncated_and_core_modules() {
        let full = embed(&tiny(), &[(MANIFEST_SECTION, &[b'a'; 300])]).unwrap();
        let err = read_section(&full[..full.len() - 10], MANIFEST_SECTION).unwrap_err();
        assert!(err.0.contains("truncated"), "{err}");
        assert!(check_component(b"\0asm\x01\0\0\0").unwrap_err().0.contains("core module"));
        assert!(check_component(b"MZ").unwrap_err().0.contains("magic"));
    }
}
