//! `skillhost new`: write a skill crate with one example tool that builds out of the box.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use skillhost::SkillName;

/// The SDK this binary was built beside, when its sources are still there.
const BUILT_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../guest-sdk");

pub fn create(name: &str, dir: Option<PathBuf>, sdk: Option<PathBuf>) -> Result<()> {
    let name = SkillName::new(name)?;
    let dir = dir.unwrap_or_else(|| PathBuf::from(name.as_str()));
    if dir.exists() && std::fs::read_dir(&dir)?.next().is_some() {
        bail!("{} already exists and is not empty; choose another name or --dir", dir.display());
    }
    let sdk = match sdk {
        Some(sdk) => sdk,
        None if Path::new(BUILT_SDK).join("Cargo.toml").is_file() => PathBuf::from(BUILT_SDK),
        None => bail!("cannot find the skillhost-sdk sources; pass --sdk PATH (or set SKILLHOST_SDK) to a checkout's guest-sdk directory"),
    };
    let sdk = std::fs::canonicalize(&sdk).with_context(|| format!("--sdk {}: no such directory", sdk.display()))?;
    if !sdk.join("Cargo.toml").is_file() {
        bail!("{}: not the skillhost-sdk crate (no Cargo.toml)", sdk.display());
    }
    std::fs::create_dir_all(dir.join("src")).with_context(|| format!("cannot create {}", dir.display()))?;

    // Inside another workspace the crate must not declare its own (cargo refuses two
    // roots); on its own it must, or a parent workspace would claim it.
    let absolute = std::path::absolute(&dir)?;
    let in_workspace = absolute.ancestors().skip(1).any(|a| {
        std::fs::read_to_string(a.join("Cargo.toml")).is_ok_and(|t| t.lines().any(|l| l.trim() == "[workspace]"))
    });
    let standalone = if in_workspace {
        String::new()
    } else {
        "\n# A standalone crate: not part of any parent workspace.\n[workspace]\n\n[profile.release]\nopt-level = \"s\"\nlto = true\nstrip = true\n".to_owned()
    };

    let files = [
        ("Cargo.toml", format!(
            "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n[lib]\ncrate-type = [\"cdylib\"]\n\n[dependencies]\nskillhost-sdk = {{ path = \"{}\" }}\n{standalone}",
            sdk.display()
        )),
        ("skill.toml", format!(
            "name = \"{name}\"\nversion = \"0.1.0\"\ndescription = \"Greets people by name (replace with what {name} does)\"\n\n[search]\nkeywords = [\"greeting\", \"example\"]\nexample_queries = [\"say hello to Ada\"]\n\n# Ask for a directory inside the skill's data dir (seen as /data by the skill):\n# [[capabilities.files]]\n# path = \".\"\n# mode = \"ro\"\n\n# [limits]\n# timeout = \"5s\"\n# memory = \"64MiB\"\n"
        )),
        ("SKILL.md", format!(
            "---\nname: {name}\ndescription: Greets people by name. Use when the user asks to greet someone.\n---\n\n# {name}\n\nCall `hello` with the person's name.\n"
        )),
        ("src/lib.rs", format!(
            "//! {name}: a skillhost skill. Build it with `skillhost build`.\n\nuse skillhost_sdk::prelude::*;\n\n#[derive(Deserialize, JsonSchema)]\nstruct HelloInput {{\n    /// Who to greet.\n    name: String,\n}}\n\n#[derive(Serialize, JsonSchema)]\nstruct HelloOutput {{\n    greeting: String,\n}}\n\n/// Greet someone by name.\n#[tool(read_only, idempotent, example = r#\"{{\"name\": \"Ada\"}}\"#)]\nfn hello(input: HelloInput) -> Result<HelloOutput, ToolError> {{\n    Ok(HelloOutput {{ greeting: format!(\"Hello, {{}}!\", input.name) }})\n}}\n\nskillhost_sdk::skill!(hello);\n"
        )),
        (".gitignore", "/target\n/skill.wasm\n".to_owned()),
    ];
    for (path, content) in files {
        std::fs::write(dir.join(path), content).with_context(|| format!("cannot write {}", dir.join(path).display()))?;
    }
    eprintln!(
        "created skill `{name}` in {}\nnext: skillhost build {} && skillhost call {}/skill.wasm hello --input '{{\"name\": \"Ada\"}}'",
        dir.display(),
        dir.display(),
        dir.display()
    );
    Ok(())
}
