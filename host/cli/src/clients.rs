//! `skillhost mcp-config CLIENT`: the MCP server entry that starts `skillhost serve` for
//! Claude Code, Cursor, VS Code or Zed, in the shape of that client's config file and
//! with absolute paths (this binary, the skills and data dirs), so that it works
//! whatever directory the client starts it in. With `--write` the entry is merged into
//! the client's config file: every other key kept in its order, the file created when
//! missing and replaced atomically (a temporary file renamed over it), a file that is not
//! plain JSON (broken, or with the comments some clients allow) never touched.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::app::App;
use skillhost::config::Agent;

/// The `--help` text after the options.
pub const HELP: &str = "The entry runs this binary (its absolute path) with absolute --skills (when there is a
skills directory) and --data-dir, --skills-from when given, and in env the SKILLHOST_CONFIG,
SKILLHOST_MODEL_DIR and SKILLHOST_VENV this shell sets. The JSON goes to stdout.

--write merges it into the client's config file as `skillhost` (other keys and their
order kept; the file created if missing, replaced atomically; unchanged when it already
holds this entry). A file that is not valid JSON is never touched (exit 4); one with
comments or trailing commas, as Zed and VS Code allow, neither: paste the entry shown.
  claude   ./.mcp.json            {\"mcpServers\": {\"skillhost\": {command, args, env}}}
  cursor   ~/.cursor/mcp.json     {\"mcpServers\": {\"skillhost\": {command, args, env}}}
  vscode   ./.vscode/mcp.json     {\"servers\": {\"skillhost\": {\"type\": \"stdio\", command, args, env}}}
  zed      ~/.config/zed/settings.json   {\"context_servers\": {\"skillhost\": {command, args, env}}}

Examples:
  skillhost mcp-config claude                    the entry, and the `claude mcp add` line
  skillhost --skills ~/skills mcp-config cursor --write
  skillhost mcp-config vscode --write            .vscode/mcp.json of this directory
  skillhost --skills-from claude mcp-config zed --write
  skillhost mcp-config zed --json | jq .config";

/// The server's name in every client's config.
const NAME: &str = "skillhost";

/// The environment variables of this shell that change what `serve` does, copied into
/// the entry so that the client's server runs on the same host setup.
const PASSED_ENV: [&str; 3] = ["SKILLHOST_CONFIG", "SKILLHOST_MODEL_DIR", "SKILLHOST_VENV"];

/// The options of `mcp-config`.
#[derive(clap::Args)]
pub struct McpConfigArgs {
    /// The MCP client to configure.
    #[arg(value_enum)]
    client: Client,
    /// Merge the entry into the client's config file instead of only printing it.
    #[arg(long)]
    write: bool,
    /// The config file --write edits [default: per client, see below].
    #[arg(long, value_name = "FILE", requires = "write")]
    config: Option<PathBuf>,
    /// Print JSON for scripts: the client, its config file, the config, and for Claude
    /// Code the `claude mcp add` command.
    #[arg(long)]
    json: bool,
}

/// An MCP client whose config file skillhost knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Client {
    /// Claude Code: `.mcp.json` (project) or `~/.claude.json`, `mcpServers`.
    Claude,
    /// Cursor: `~/.cursor/mcp.json`, `mcpServers`.
    Cursor,
    /// VS Code: `.vscode/mcp.json`, `servers`.
    Vscode,
    /// Zed: `~/.config/zed/settings.json`, `context_servers`.
    Zed,
}

impl Client {
    fn as_str(self) -> &'static str {
        match self {
            Client::Claude => "claude",
            Client::Cursor => "cursor",
            Client::Vscode => "vscode",
            Client::Zed => "zed",
        }
    }

    /// The top-level key of the config file that holds the servers.
    fn key(self) -> &'static str {
        match self {
            Client::Claude | Client::Cursor => "mcpServers",
            Client::Vscode => "servers",
            Client::Zed => "context_servers",
        }
    }

    /// The config file `--write` edits by default: for Claude Code the project's
    /// `.mcp.json` (its user config, `~/.claude.json`, holds much else and is safer left
    /// to `claude mcp add`), for VS Code the workspace's `.vscode/mcp.json`, for Cursor and
    /// Zed their user config.
    fn default_file(self) -> Result<PathBuf> {
        let cwd = std::env::current_dir().context("cannot read the current directory")?;
        let home = || -> Result<PathBuf> {
            Ok(directories::BaseDirs::new().context("cannot find the home directory; pass --config FILE")?.home_dir().to_owned())
        };
        Ok(match self {
            Client::Claude => cwd.join(".mcp.json"),
            Client::Vscode => cwd.join(".vscode/mcp.json"),
            Client::Cursor => home()?.join(".cursor/mcp.json"),
            Client::Zed => {
                let config = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from).filter(|dir| dir.is_absolute());
                config.map_or_else(|| home().map(|h| h.join(".config")), Ok)?.join("zed/settings.json")
            }
        })
    }

    /// The entry of `server` in this client's shape, its keys in the order people write
    /// them (Zed: the custom-server shape of zed.dev/docs/ai/mcp, `command`, `args` and
    /// `env` side by side).
    fn entry(self, server: &Server) -> Json {
        let string = |s: &str| Json::String(s.to_owned());
        let mut members = Vec::new();
        if self == Client::Vscode {
            members.push(("type".to_owned(), string("stdio")));
        }
        members.push(("command".to_owned(), string(&server.command)));
        members.push(("args".to_owned(), Json::Array(server.args.iter().map(|a| string(a)).collect())));
        members.push(("env".to_owned(), Json::Object(server.env.iter().map(|(k, v)| (k.clone(), string(v))).collect())));
        Json::Object(members)
    }

    /// The whole config file holding `entry` alone.
    fn document(self, entry: Json) -> Json {
        Json::Object(vec![(self.key().to_owned(), Json::Object(vec![(NAME.to_owned(), entry)]))])
    }
}

/// What starts `skillhost serve`: absolute paths throughout.
#[derive(Debug)]
pub struct Server {
    /// Whether `--skills` is among the arguments.
    workspace: bool,
    command: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

impl Server {
    /// This binary serving `skills` (the workspace layer, if any) with `data_dir`, and the
    /// agents' folders given on the command line.
    pub fn new(skills: Option<&Path>, data_dir: &Path, skills_from: &[Agent]) -> Result<Self> {
        let exe = std::env::current_exe().context("cannot tell where this skillhost binary is")?;
        let mut args = Vec::new();
        if let Some(dir) = skills {
            args.extend(["--skills".to_owned(), text(&absolute(dir)?)?]);
        }
        args.extend(["--data-dir".to_owned(), text(&absolute(data_dir)?)?]);
        for agent in skills_from {
            args.extend(["--skills-from".to_owned(), agent.as_str().to_owned()]);
        }
        args.push("serve".to_owned());
        let mut env = Vec::new();
        for name in PASSED_ENV {
            if let Some(value) = std::env::var_os(name).filter(|v| !v.is_empty()) {
                env.push((name.to_owned(), text(&absolute(Path::new(&value))?)?));
            }
        }
        Ok(Self { workspace: skills.is_some(), command: text(&absolute(&exe)?)?, args, env })
    }

    /// `claude mcp add`, for a shell.
    fn claude_command(&self) -> String {
        let mut words = vec!["claude".to_owned(), "mcp".to_owned(), "add".to_owned(), NAME.to_owned()];
        for (name, value) in &self.env {
            words.extend(["-e".to_owned(), format!("{name}={value}")]);
        }
        words.push("--".to_owned());
        words.push(self.command.clone());
        words.extend(self.args.iter().cloned());
        words.iter().map(|w| shell_quote(w)).collect::<Vec<_>>().join(" ")
    }
}

/// `path` made absolute: canonical when it exists, else against the current directory.
fn absolute(path: &Path) -> Result<PathBuf> {
    match std::fs::canonicalize(path) {
        Ok(path) => Ok(path),
        Err(_) => std::path::absolute(path).with_context(|| format!("cannot make {} absolute", path.display())),
    }
}

fn text(path: &Path) -> Result<String> {
    path.to_str()
        .map(str::to_owned)
        .with_context(|| format!("{} is not valid UTF-8, which a JSON config file cannot hold; use a path that is", path.display()))
}

/// `word` as one shell word.
fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
    if plain { word.to_owned() } else { format!("'{}'", word.replace('\'', r"'\''")) }
}

/// `skillhost mcp-config`: the entry for the skills and data dirs of the global options.
pub fn run(app: &App, args: &McpConfigArgs) -> Result<ExitCode> {
    print_or_write(args, &Server::new(app.workspace()?, &app.data_dir, &app.skills_from)?)?;
    Ok(ExitCode::SUCCESS)
}

/// Print the entry for `server`, or merge it into the client's config file.
fn print_or_write(args: &McpConfigArgs, server: &Server) -> Result<()> {
    let client = args.client;
    let entry = client.entry(server);
    let config = client.document(entry.clone());
    if !server.workspace {
        errln!("# no skills directory (--skills, or ./skills here): the entry serves the user layer, DATA_DIR/user-skills");
    }
    let file = match &args.config {
        Some(file) => std::path::absolute(file).with_context(|| format!("cannot make {} absolute", file.display()))?,
        None => client.default_file()?,
    };
    let command = (client == Client::Claude).then(|| server.claude_command());
    let outcome = if args.write { Some(write(client, &file, &entry)?) } else { None };
    if args.json {
        let report = json!({
            "client": client.as_str(),
            "file": file,
            "config": config.to_value(),
            "command": command,
            "written": outcome.map(Outcome::as_str),
        });
        outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    match outcome {
        Some(outcome) => errln!("{}", outcome.describe(client, &file)),
        None => {
            outln!("{}", serde_json::to_string_pretty(&config)?);
            errln!(
                "# {}: merge this into {} (under `{}`), or let `skillhost mcp-config {} --write` do it",
                client_name(client),
                file.display(),
                client.key(),
                client.as_str()
            );
            if let Some(command) = &command {
                errln!("# or run: {command}");
            }
        }
    }
    Ok(())
}

fn client_name(client: Client) -> &'static str {
    match client {
        Client::Claude => "Claude Code",
        Client::Cursor => "Cursor",
        Client::Vscode => "VS Code",
        Client::Zed => "Zed",
    }
}

/// What `--write` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// The file did not exist and was created.
    Created,
    /// The entry was added to an existing file.
    Added,
    /// A different `skillhost` entry was replaced.
    Updated,
    /// The file already held this entry; it was not written.
    Unchanged,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Created => "created",
            Outcome::Added => "added",
            Outcome::Updated => "updated",
            Outcome::Unchanged => "unchanged",
        }
    }

    fn describe(self, client: Client, file: &Path) -> String {
        let (file, key) = (file.display(), client.key());
        match self {
            Outcome::Created => format!("created {file} with `{key}.{NAME}`; restart {} to use it", client_name(client)),
            Outcome::Added => format!("added `{key}.{NAME}` to {file}, keeping everything else; restart {} to use it", client_name(client)),
            Outcome::Updated => format!(
                "replaced `{key}.{NAME}` in {file} (the old entry differed), keeping everything else; restart {} to use it",
                client_name(client)
            ),
            Outcome::Unchanged => format!("{file} already has this `{key}.{NAME}`; nothing changed"),
        }
    }
}

/// Merge `entry` into `file` as `KEY.skillhost`, atomically.
fn write(client: Client, file: &Path, entry: &Json) -> Result<Outcome> {
    let key = client.key();
    // Write through a symlink (a dotfiles checkout), not over it.
    let file = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_owned());
    let (mut document, existed) = match std::fs::read_to_string(&file) {
        Ok(text) if text.trim().is_empty() => (Json::Object(Vec::new()), true),
        Ok(text) => (parse(client, &file, &text, entry)?, true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Json::Object(Vec::new()), false),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
    };
    let Json::Object(members) = &mut document else {
        bail!("{} holds a JSON {}, not an object; nothing was written: fix it, or pass --config FILE", file.display(), document.kind());
    };
    let servers = match members.iter().position(|(k, _)| k.as_str() == key) {
        Some(i) => &mut members[i].1,
        None => {
            members.push((key.to_owned(), Json::Object(Vec::new())));
            &mut members.last_mut().expect("just pushed").1
        }
    };
    let Json::Object(servers) = servers else {
        bail!(
            "`{key}` in {} is a JSON {}, not an object; nothing was written: fix it, or pass --config FILE",
            file.display(),
            servers.kind()
        );
    };
    let new = entry.clone();
    let outcome = match servers.iter_mut().find(|(k, _)| k.as_str() == NAME) {
        Some((_, old)) if old.to_value() == entry.to_value() => return Ok(Outcome::Unchanged),
        Some((_, old)) => {
            *old = new;
            Outcome::Updated
        }
        None => {
            servers.push((NAME.to_owned(), new));
            if existed { Outcome::Added } else { Outcome::Created }
        }
    };
    let text = serde_json::to_string_pretty(&document)? + "\n";
    replace(&file, text.as_bytes())?;
    Ok(outcome)
}

/// Parse a config file, refusing what is not plain JSON: a file that parses once its
/// comments and trailing commas are dropped (JSONC, as Zed's and VS Code's allow) is
/// refused with the entry to paste, since rewriting it would lose them.
fn parse(client: Client, file: &Path, text: &str, entry: &Json) -> Result<Json> {
    let error = match serde_json::from_str::<Json>(text) {
        Ok(document) => return Ok(document),
        Err(error) => error,
    };
    if serde_json::from_str::<Json>(&strip_jsonc(text)).is_ok() {
        bail!(
            "{} has comments or trailing commas, which rewriting it would lose, so it was not changed; paste this into its `{}` object:\n\"{NAME}\": {}",
            file.display(),
            client.key(),
            serde_json::to_string_pretty(entry)?
        );
    }
    bail!(
        "{} is not valid JSON (line {}, column {}: {error}); nothing was written: fix the file, or pass --config FILE to write another",
        file.display(),
        error.line(),
        error.column()
    )
}

/// `text` without `//` and `/* */` comments and without commas before `}` or `]`,
/// strings left as they are.
fn strip_jsonc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push(c);
                while let Some(c) = chars.next() {
                    out.push(c);
                    match c {
                        '\\' => out.extend(chars.next()),
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push(c);
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
                out.push(' ');
            }
            '}' | ']' => {
                let kept = out.trim_end().len();
                if out[..kept].ends_with(',') {
                    out.truncate(kept - 1);
                }
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Replace `file` with `bytes` atomically: a temporary file beside it (with the old
/// file's permissions, or 0644), synced, renamed over it.
fn replace(file: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mode = std::fs::metadata(file).map_or(0o644, |m| m.permissions().mode() & 0o7777);
    let mut temp = tempfile::Builder::new()
        .prefix(".skillhost-")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    temp.write_all(bytes)?;
    temp.as_file().set_permissions(std::fs::Permissions::from_mode(mode))?;
    temp.as_file().sync_all()?;
    temp.persist(file).with_context(|| format!("cannot replace {}", file.display()))?;
    Ok(())
}

/// A JSON value whose objects keep their members in the file's order (serde_json's own
/// `Value` sorts them), so that a rewritten config file differs only where it must.
#[derive(Clone, Debug)]
enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "boolean",
            Json::Number(_) => "number",
            Json::String(_) => "string",
            Json::Array(_) => "array",
            Json::Object(_) => "object",
        }
    }

    /// As serde_json's `Value`, to compare regardless of order.
    fn to_value(&self) -> Value {
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => Value::Number(n.clone()),
            Json::String(s) => Value::String(s.clone()),
            Json::Array(items) => Value::Array(items.iter().map(Json::to_value).collect()),
            Json::Object(members) => Value::Object(members.iter().map(|(k, v)| (k.clone(), v.to_value())).collect()),
        }
    }
}

impl serde::Serialize for Json {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self {
            Json::Null => serializer.serialize_unit(),
            Json::Bool(b) => serializer.serialize_bool(*b),
            Json::Number(n) => n.serialize(serializer),
            Json::String(s) => serializer.serialize_str(s),
            Json::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Object(members) => {
                let mut map = serializer.serialize_map(Some(members.len()))?;
                for (k, v) in members {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> serde::Deserialize<'de> for Json {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Json;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E>(self) -> Result<Json, E> {
                Ok(Json::Null)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Json, E> {
                Ok(Json::Bool(b))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Json, E> {
                Ok(Json::Number(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Json, E> {
                Ok(Json::Number(n.into()))
            }
            fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Json, E> {
                serde_json::Number::from_f64(n).map(Json::Number).ok_or_else(|| E::custom("a number JSON cannot hold"))
            }
            fn visit_str<E>(self, s: &str) -> Result<Json, E> {
                Ok(Json::String(s.to_owned()))
            }
            fn visit_string<E>(self, s: String) -> Result<Json, E> {
                Ok(Json::String(s))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Json::Array(items))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
                let mut members = Vec::new();
                while let Some((k, v)) = map.next_entry()? {
                    members.push((k, v));
                }
                Ok(Json::Object(members))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonc_loses_comments_and_trailing_commas_but_not_strings() {
        let text = "{\n  // a comment\n  \"a\": \"http://x/*y*/\", /* block */\n  \"b\": [1, 2,],\n}\n";
        let value: Value = serde_json::from_str(&strip_jsonc(text)).unwrap();
        assert_eq!(value, json!({"a": "http://x/*y*/", "b": [1, 2]}));
    }

    #[test]
    fn members_keep_their_order() {
        let text = r#"{"z": 1, "a": {"y": [true, null], "b": 2.5}}"#;
        let json: Json = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&json).unwrap(), text.replace(' ', ""));
    }

    #[test]
    fn shell_words() {
        assert_eq!(shell_quote("/usr/bin/skillhost"), "/usr/bin/skillhost");
        assert_eq!(shell_quote("/my skills/it's"), r"'/my skills/it'\''s'");
    }
}
