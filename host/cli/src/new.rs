//! `skillhost new`: write a skill with one example tool that builds out of the box, in
//! Rust (a crate on the skillhost-sdk), Python (componentize-py) or JavaScript
//! (componentize-js), or a server skill (`python-server`: a FastMCP `server.py` with its
//! test, run in the sandbox). The SKILL.md is the same in every language, and so is the
//! skill.toml of a component.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use skillhost::skill::SkillName;

/// Files every new skill gets, whatever its language.
const COMMON: [(&str, &str); 2] =
    [("skill.toml", include_str!("../templates/common/skill.toml")), ("SKILL.md", include_str!("../templates/common/SKILL.md"))];
const PYTHON: [(&str, &str); 3] = [
    ("app.py", include_str!("../templates/python/app.py")),
    ("README.md", include_str!("../templates/python/README.md")),
    (".gitignore", include_str!("../templates/python/gitignore")),
];
/// A server skill: an MCP server in Python (FastMCP), run in the sandbox; its own
/// skill.toml (with `[server]`) in place of the common one.
const PYTHON_SERVER: [(&str, &str); 5] = [
    ("server.py", include_str!("../templates/python-server/server.py")),
    ("test_server.py", include_str!("../templates/python-server/test_server.py")),
    ("skill.toml", include_str!("../templates/python-server/skill.toml")),
    ("README.md", include_str!("../templates/python-server/README.md")),
    (".gitignore", include_str!("../templates/python-server/gitignore")),
];
const JS: [(&str, &str); 3] = [
    ("skill.js", include_str!("../templates/js/skill.js")),
    ("README.md", include_str!("../templates/js/README.md")),
    (".gitignore", include_str!("../templates/js/gitignore")),
];

/// The options of `new`.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  skillhost new weather                creates ./weather, a Rust crate with one example tool
  skillhost new weather-py --lang python   app.py with a Guest class (componentize-py)
  skillhost new weather-js --lang js   skill.js exporting guest (componentize-js)
  skillhost new weather-2 --dir skills/weather-2
  skillhost build weather && skillhost call ./weather hello --input '{\"name\": \"Ada\"}'
  skillhost new hello-server --lang python-server && skillhost test ./hello-server")]
pub struct NewArgs {
    /// Skill name: lowercase letters, digits and inner hyphens.
    name: String,
    /// The language to write it in.
    #[arg(long, value_enum, default_value = "rust")]
    lang: Template,
    /// Directory to create [default: ./NAME].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Depend on the skillhost-sdk crate at this path (a checkout of your own) [default: by version, `skillhost-sdk = "MAJOR.MINOR"`, which `skillhost build` satisfies with the SDK embedded in this binary, wherever the skill is built].
    #[arg(long, env = "SKILLHOST_SDK", value_name = "DIR")]
    sdk: Option<PathBuf>,
}

/// What `new` writes: a component in one of the build languages, or a server skill.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Template {
    /// A Rust crate on the skillhost-sdk (`Cargo.toml`).
    Rust,
    /// A Python module `app.py` (componentize-py).
    Python,
    /// A JavaScript module `skill.js` (componentize-js).
    Js,
    /// An MCP server in Python (FastMCP `server.py`), run in the sandbox; nothing to build.
    PythonServer,
}

/// Create the skill.
pub fn run(args: NewArgs) -> Result<ExitCode> {
    create(&args.name, args.lang, args.dir, args.sdk)?;
    Ok(ExitCode::SUCCESS)
}

/// Write skill `name` in `lang` into `dir` (default `./NAME`); a Rust skill depends on the
/// SDK at `sdk`, or else on the SDK by version (see [`rust_files`]).
/// A bad name, a folder in the way or a wrong --sdk is a usage error (exit 2).
fn create(name: &str, lang: Template, dir: Option<PathBuf>, sdk: Option<PathBuf>) -> Result<()> {
    let name = SkillName::new(name).map_err(|e| crate::exit::usage(e.to_string()))?;
    let dir = dir.unwrap_or_else(|| PathBuf::from(name.as_str()));
    if dir.exists() && !dir.is_dir() {
        return Err(crate::exit::usage(format!("{} already exists and is not a folder; choose another name or --dir", dir.display())));
    }
    if dir.exists() && std::fs::read_dir(&dir)?.next().is_some() {
        return Err(crate::exit::usage(format!("{} already exists and is not empty; choose another name or --dir", dir.display())));
    }
    let mut files: Vec<(&str, String)> = COMMON.iter().map(|(path, text)| (*path, text.replace("{{name}}", name.as_str()))).collect();
    let filled = |templates: &[(&'static str, &str)]| -> Vec<(&'static str, String)> {
        templates.iter().map(|(path, text)| (*path, text.replace("{{name}}", name.as_str()))).collect()
    };
    match lang {
        Template::Rust => files.extend(rust_files(&name, &dir, sdk)?),
        Template::Python => files.extend(filled(&PYTHON)),
        Template::Js => files.extend(filled(&JS)),
        Template::PythonServer => {
            files.retain(|(path, _)| *path != "skill.toml");
            files.extend(filled(&PYTHON_SERVER));
        }
    }
    for (path, content) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, content).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let next = match lang {
        // A folder named without a `/` would be read as a skill's name.
        Template::PythonServer => {
            let path = if dir.is_relative() { Path::new(".").join(&dir) } else { dir.clone() };
            format!("skillhost test {0} && skillhost call {0} hello --input '{{\"name\": \"Ada\"}}'", path.display())
        }
        _ => format!("skillhost build {0} && skillhost call {0}/skill.wasm hello --input '{{\"name\": \"Ada\"}}'", dir.display()),
    };
    errln!("created skill `{name}` in {}\nnext: {next}", dir.display());
    Ok(())
}

/// A crate on the skillhost-sdk. Its dependency names no path of this machine, so a clone
/// builds wherever skillhost is installed: inside a workspace that declares
/// `skillhost-sdk` in `[workspace.dependencies]`, that one (`skillhost-sdk.workspace =
/// true`); otherwise the version of the SDK this binary carries (`skillhost-sdk = "0.1"`),
/// which `skillhost build` and the forge satisfy with that SDK, offline. `--sdk DIR` names a
/// checkout by path instead (the skill then builds only where that path exists).
fn rust_files(name: &SkillName, dir: &Path, sdk: Option<PathBuf>) -> Result<Vec<(&'static str, String)>> {
    // Inside another workspace the crate must not declare its own (cargo refuses two
    // roots); on its own it must, or a parent workspace would claim it.
    let absolute = std::path::absolute(dir)?;
    let workspace = absolute
        .ancestors()
        .skip(1)
        .find_map(|a| std::fs::read_to_string(a.join("Cargo.toml")).ok().filter(|t| t.lines().any(|l| l.trim() == "[workspace]")));
    let inherits = workspace
        .as_deref()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .is_some_and(|t| t.get("workspace").and_then(|w| w.get("dependencies")).and_then(|d| d.get("skillhost-sdk")).is_some());
    let dependency = match sdk {
        Some(sdk) => {
            let sdk = std::fs::canonicalize(&sdk).map_err(|_| crate::exit::usage(format!("--sdk {}: no such directory", sdk.display())))?;
            if !sdk.join("Cargo.toml").is_file() {
                return Err(crate::exit::usage(format!("{}: not the skillhost-sdk crate (no Cargo.toml)", sdk.display())));
            }
            let path = sdk.to_str().with_context(|| format!("--sdk {}: the path is not UTF-8", sdk.display()))?;
            format!("skillhost-sdk = {{ path = {} }}", toml::Value::from(path))
        }
        None if inherits => "skillhost-sdk.workspace = true".to_owned(),
        None => format!("skillhost-sdk = {}", toml::Value::from(crate::sdk::requirement()?)),
    };
    let standalone = if workspace.is_some() {
        String::new()
    } else {
        "\n# A standalone crate: not part of any parent workspace.\n[workspace]\n\n[profile.release]\nopt-level = \"s\"\nlto = true\nstrip = true\n".to_owned()
    };

    Ok(vec![
        (
            "Cargo.toml",
            format!(
                "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n[lib]\ncrate-type = [\"cdylib\"]\n\n[dependencies]\n{dependency}\n{standalone}"
            ),
        ),
        (
            "src/lib.rs",
            format!(
                "//! {name}: a skillhost skill. Build it with `skillhost build`.\n\nuse skillhost_sdk::prelude::*;\n\n#[derive(Deserialize, JsonSchema)]\nstruct HelloInput {{\n    /// Who to greet.\n    name: String,\n}}\n\n#[derive(Serialize, JsonSchema)]\nstruct HelloOutput {{\n    greeting: String,\n}}\n\n/// Greet someone by name.\n#[tool(read_only, idempotent, example = r#\"{{\"name\": \"Ada\"}}\"#)]\nfn hello(input: HelloInput) -> Result<HelloOutput, ToolError> {{\n    Ok(HelloOutput {{ greeting: format!(\"Hello, {{}}!\", input.name) }})\n}}\n\nskillhost_sdk::skill!(hello);\n"
            ),
        ),
        (".gitignore", "/target\n/skill.wasm\n".to_owned()),
    ])
}
