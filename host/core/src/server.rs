//! `[server]`: a skill that is a stdio MCP server (a FastMCP `server.py`, or any command
//! speaking MCP on stdin/stdout), run by the sandbox runtime in bubblewrap instead of
//! as a WebAssembly component.
//!
//! ```toml
//! [server]
//! command = "python"              # the host's managed Python (its venv); or a program
//! args = ["server.py"]            # relative to the skill folder, which is the working dir
//! start = "lazy"                  # "lazy" (default): on the first call; "eager": the same today
//! idle_timeout = "5m"             # stop the server after this long without calls
//!
//! [[server.secrets]]              # a secret the server receives as an environment variable
//! name = "weather"                # set with `skillhost secret set weather`
//! env = "WEATHER_API_KEY"
//! ```
//!
//! `command` is `python` (the managed venv's interpreter), a name found in the venv's
//! `bin/` or `/usr/bin` (`mcp-server-time`), an absolute path visible in the sandbox, or a
//! path relative to the skill folder (`./server`). No shell is involved.
//!
//! **Secrets differ from the WebAssembly gate.** A wasm skill never holds a secret: the
//! host adds it as a header to requests to the hosts it is bound to. A sandboxed server
//! talks TLS through the host's proxy with `CONNECT`, so the host cannot add headers;
//! it gets the secret's value in the environment variable it declared, and could send it
//! to any host its `[network]` rules allow. Declaring one makes the skill need explicit
//! approval, and the value is only given to a server started for a call (never to the
//! run that lists its tools when the skill is loaded, before any approval).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::egress::valid_secret_name;
use crate::limits::parse_duration;

/// When a server skill's process starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StartMode {
    /// On the first call (the process that listed the tools at load is stopped).
    #[default]
    Lazy,
    /// Accepted, and today the same as `Lazy`: the process that lists the tools at load
    /// runs under a probe grant (the skill may not be approved), so it is never kept to
    /// serve calls, and nothing starts with the real grant before a call checked approval.
    Eager,
}

/// A secret passed to a sandboxed server as an environment variable.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EnvSecret {
    /// The secret's name in the host's secret store.
    pub name: String,
    /// The environment variable the server reads it from.
    pub env: String,
}

/// The validated `[server]` section.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ServerConfig {
    /// The program: `python`, a name, an absolute path or `./relative`.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// When the process starts.
    pub start: StartMode,
    /// Stop the process after this long without calls; `None`: the runtime's default.
    #[serde(skip)]
    pub idle_timeout: Option<Duration>,
    /// Secrets it receives as environment variables.
    pub secrets: Vec<EnvSecret>,
}

/// `[server]` as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServerSection {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    start: StartMode,
    #[serde(default)]
    idle_timeout: Option<String>,
    #[serde(default)]
    secrets: Vec<EnvSecret>,
}

/// Environment variables the sandbox sets itself; a secret may not replace them.
const RESERVED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "TZ",
    "PYTHONHOME",
    "PYTHONPATH",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONUNBUFFERED",
    "VIRTUAL_ENV",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "NO_PROXY",
    "no_proxy",
    "ALL_PROXY",
    "all_proxy",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "SKILLHOST_DATA",
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "CURL_CA_BUNDLE",
    "PIP_CERT",
];

impl ServerSection {
    /// Validate; the error is `what; fix` for the manifest's message.
    pub(crate) fn validate(self) -> Result<ServerConfig, (String, String)> {
        let command = self.command.trim().to_owned();
        if command.is_empty() || command.contains('\0') {
            return Err(("`[server] command` is empty".into(), "write the program to run, e.g. `command = \"python\"`".into()));
        }
        if self.args.iter().any(|a| a.contains('\0')) {
            return Err(("`[server] args` contains a NUL byte".into(), "remove it".into()));
        }
        let idle_timeout = self
            .idle_timeout
            .as_deref()
            .map(parse_duration)
            .transpose()
            .map_err(|e| (format!("`[server] idle_timeout`: {e}"), "write e.g. `idle_timeout = \"5m\"`".into()))?;
        if idle_timeout.is_some_and(|d| d.is_zero()) {
            return Err(("`[server] idle_timeout` is 0".into(), "remove the line or give a positive duration".into()));
        }
        let mut seen = Vec::new();
        for secret in &self.secrets {
            if !valid_secret_name(&secret.name) {
                return Err((
                    format!("server secret name `{}` must be lowercase letters, digits, `_` or `-`", secret.name),
                    "use the name given to `skillhost secret set`".into(),
                ));
            }
            let env_ok = secret.env.bytes().next().is_some_and(|b| b.is_ascii_uppercase() || b == b'_')
                && secret.env.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
            if !env_ok {
                return Err((
                    format!("server secret `{}`: `{}` is not a valid environment variable name", secret.name, secret.env),
                    "use uppercase letters, digits and `_`, e.g. `env = \"API_KEY\"`".into(),
                ));
            }
            if RESERVED_ENV.contains(&secret.env.as_str()) || secret.env.starts_with("SKILLHOST_") {
                return Err((
                    format!("server secret `{}`: `{}` is set by the sandbox", secret.name, secret.env),
                    "choose another variable name".into(),
                ));
            }
            if seen.contains(&&secret.env) || seen.contains(&&secret.name) {
                return Err((format!("server secret `{}` is listed twice", secret.name), "list each secret and variable once".into()));
            }
            seen.push(&secret.env);
            seen.push(&secret.name);
        }
        Ok(ServerConfig { command, args: self.args, start: self.start, idle_timeout, secrets: self.secrets })
    }
}

#[cfg(test)]
mod tests {
    use crate::SkillManifest;
    use crate::manifest::test_manifest;
    use std::path::Path;

    fn parse(extra: &str) -> Result<SkillManifest, String> {
        SkillManifest::parse(&format!("name = \"demo\"\nversion = \"1\"\ndescription = \"d\"\n{extra}"), Path::new("skill.toml"))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn server_section() {
        let m = test_manifest(
            "[server]\ncommand = \"python\"\nargs = [\"server.py\"]\nstart = \"eager\"\nidle_timeout = \"2m\"\n[[server.secrets]]\nname = \"k\"\nenv = \"API_KEY\"\n",
        );
        let server = m.server.unwrap();
        assert_eq!((server.command.as_str(), server.args.as_slice()), ("python", &["server.py".to_owned()][..]));
        assert_eq!(server.idle_timeout, Some(std::time::Duration::from_secs(120)));
        for (extra, expected) in [
            ("[server]\ncommand = \"\"\n", "`[server] command` is empty"),
            ("[server]\ncommand = \"x\"\nshell = true\n", "unknown field `shell`"),
            ("[server]\ncommand = \"x\"\nidle_timeout = \"0s\"\n", "idle_timeout` is 0"),
            ("[server]\ncommand = \"x\"\n[[server.secrets]]\nname = \"k\"\nenv = \"PATH\"\n", "`PATH` is set by the sandbox"),
            ("[server]\ncommand = \"x\"\n[[server.secrets]]\nname = \"k\"\nenv = \"lower\"\n", "not a valid environment variable name"),
            (
                "[server]\ncommand = \"x\"\n[[server.secrets]]\nname = \"k\"\nenv = \"SSL_CERT_FILE\"\n",
                "`SSL_CERT_FILE` is set by the sandbox",
            ),
        ] {
            let err = parse(extra).unwrap_err();
            assert!(err.contains(expected), "{err:?} should contain {expected:?}");
        }
        // A server's `[[secrets]]` is added by the proxy, which terminates TLS for its hosts.
        let m = test_manifest(
            "[server]\ncommand = \"x\"\n[network]\nallow = [\"https://a.org\"]\n[[secrets]]\nname = \"k\"\nheader = \"X-Key\"\nhosts = [\"https://a.org\"]\n",
        );
        assert_eq!(m.secrets[0].name, "k");
    }
}
