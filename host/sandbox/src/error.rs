//! The errors of starting a sandbox: [`StartError`] (a server's or a run's jail, its
//! process and its MCP handshake) and [`CommandError`] (a `[server] command` that names
//! no program the sandbox can run). Each keeps its typed source; the runtime's load and
//! call errors quote them.

use std::path::PathBuf;

use skillhost_jail::JailError;

/// Why a sandbox did not start: its jail, its private files, its egress proxy, its
/// secrets, its granted directories, its process or its MCP handshake.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The jail could not be made (a program missing, its confinement, its mounts).
    #[error(transparent)]
    Jail(#[from] JailError),
    /// The host failed on the sandbox's private files (its runtime dir, its `/etc`, its
    /// egress socket).
    #[error("{what}: {source}")]
    Io {
        /// What it was doing.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// Its egress proxy could not listen.
    #[error("cannot start its egress proxy: {0}")]
    Proxy(#[source] skillhost_egress::ProxyError),
    /// A secret it is granted is not in the host's store.
    #[error("secret `{0}` is not set; set it with `skillhost secret set {0}`")]
    SecretNotSet(String),
    /// It asks for network and the host has no egress shim.
    #[error(
        "it asks for network but this host has no egress shim configured: call `skillhost::helpers::run_if_helper()` first in the program's `main` (or set BwrapConfig::shim)"
    )]
    NoShim,
    /// A granted directory could not be opened.
    #[error(transparent)]
    Dir(#[from] skillhost_core::DirError),
    /// Its data directory could not be handed to the sandbox's uid.
    #[error("cannot give its data directory {} to the sandbox's uid {uid}: {source}", dir.display())]
    GiveDir {
        /// The directory.
        dir: PathBuf,
        /// The sandbox's uid.
        uid: u32,
        /// The error.
        source: std::io::Error,
    },
    /// Its data directory is out of reach of the sandbox's uid.
    #[error(
        "its data directory {} is out of reach of the sandbox's uid {uid} ({} is not searchable): `chmod o+x {}` or move the data dir",
        dir.display(),
        parent.display(),
        parent.display()
    )]
    Unreachable {
        /// The directory.
        dir: PathBuf,
        /// The sandbox's uid.
        uid: u32,
        /// The first parent it cannot search.
        parent: PathBuf,
    },
    /// The jail's first process did not start.
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The error.
        source: std::io::Error,
    },
    /// A pipe of the process was not there.
    #[error("no {0}")]
    NoPipe(&'static str),
    /// The server's MCP handshake failed.
    #[error("the MCP handshake failed ({source}){status}{}", stderr_note(stderr))]
    Handshake {
        /// rmcp's error (boxed: it is large).
        source: Box<rmcp::service::ClientInitializeError>,
        /// How the process ended (` with status 1`), if it did.
        status: String,
        /// The tail of its stderr.
        stderr: Option<String>,
    },
    /// The server did not answer the handshake in time.
    #[error("no MCP handshake within {timeout:?}{}", stderr_note(stderr))]
    HandshakeTimeout {
        /// The limit.
        timeout: std::time::Duration,
        /// The tail of its stderr.
        stderr: Option<String>,
    },
}

/// ` (stderr: TAIL)`, or nothing.
fn stderr_note(stderr: &Option<String>) -> String {
    stderr.as_ref().map(|tail| format!(" (stderr: {tail})")).unwrap_or_default()
}

/// Why a `[server] command` names no program the sandbox can run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// It needs the managed Python, which this host lacks.
    #[error("`command = \"{command}\"` needs the managed Python: {why}")]
    NoPython {
        /// The command.
        command: String,
        /// Why there is no venv.
        why: String,
    },
    /// An absolute path outside what the sandbox sees.
    #[error("`command = \"{command}\"` is not a program inside the sandbox (only /usr, the venv and the skill folder are)")]
    NotInSandbox {
        /// The command.
        command: String,
    },
    /// A relative path to a file the skill does not have.
    #[error("`command = \"{command}\"`: the skill folder has no `{relative}`")]
    NotInSkill {
        /// The command.
        command: String,
        /// The path it names in the skill folder.
        relative: String,
    },
    /// A bare name found nowhere.
    #[error(
        "`command = \"{command}\"` was found neither in the venv's bin/ nor in /usr/bin; install it (`skillhost setup python --with PACKAGE`) or give its path"
    )]
    NotFound {
        /// The command.
        command: String,
    },
}
