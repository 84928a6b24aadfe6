//! Rust skills: the build toolchain the sandbox sees, the sandboxed `cargo build`, its
//! diagnostics, and packaging the component with its manifest.
//!
//! **The toolchain cache** (`<forge>/toolchain-<sdk hash>/`), made once outside the
//! sandbox, the only step that may touch the network: `sdk/` is a copy of the SDK
//! workspace (its root `Cargo.toml` reduced to the SDK's two crates, `guest-sdk/`,
//! `wit/`), and `vendor/` holds every crate the SDK depends on (`cargo vendor` of a
//! template crate, offline when the local registry cache already has them).
//!
//! **The build** runs in the jail ([`skillhost_jail::Jail`]), the same bubblewrap
//! profile and isolation layers as sandboxed servers: all namespaces unshared (no network), no
//! home, `/usr` and the Rust sysroot read-only, the SDK at `/sdk` and the vendored
//! crates at `/vendor` read-only, and two writable directories: the attempt's source
//! copy at `/build/src` (a fresh `<forge>/builds/NAME-XXXX/src` per attempt, removed after
//! it) and the skill's own target dir at `/build/target` (`<forge>/targets/NAME/target`:
//! never shared between skills, so a build script cannot poison another skill's artifacts;
//! removed when a new skill of that name is created, reused by its retries and updates),
//! `CARGO_HOME` on the sandbox's tmpfs, `--offline` with crates-io replaced by `/vendor`,
//! `prlimit` limits, a wall-clock limit (5 min by default) and output capped.
//!
//! **The host never writes where a build could write.** The sandbox's `/etc` files are
//! written per attempt into a fresh host-private dir (`<forge>/private/NAME-XXXX/`) and
//! bound read-only; the source is written into a fresh dir before the build runs; the
//! target dir's parent is the host's and never mounted, so a build cannot replace `target`
//! itself with a link, and the host reads only the built component out of it, walking down
//! without following links. A link a build script plants anywhere it can write is never
//! followed by the host.
//!
//! A skill's crate depends on the SDK by path: `skillhost-sdk = { path = "/sdk/guest-sdk" }`.
//! Without a `Cargo.toml` the forge writes that one; a submitted one names the SDK however it
//! likes (by version, as `skillhost new` writes, or by a path that does not exist in the
//! sandbox) and the build's copy of it is pointed at `/sdk` (`with_sandbox_sdk`): the
//! skill's own files are never changed, and nothing is fetched.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};
use skillhost_core::FileMode;
use skillhost_jail::isolation::{CgroupLimits, DEFAULT_SANDBOX_ID};
use skillhost_jail::{Bind, Jail, JailError, Jailed, Profile, Programs, ResourceLimits};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use crate::error::ForgeError;

/// The target skills are built for.
pub const TARGET: &str = "wasm32-wasip2";
/// Where the SDK workspace is inside the build sandbox.
pub const SDK_MOUNT: &str = "/sdk";
const VENDOR_MOUNT: &str = "/vendor";
const BUILD_MOUNT: &str = "/build";
/// The size of the empty tmpfs a build runs in (its working directory, see [`build`]).
const BUILD_CWD_BYTES: u64 = 64 << 10;
/// Largest build output kept (the tail), bytes.
const MAX_OUTPUT: usize = 16 << 10;
/// Most diagnostics returned.
const MAX_DIAGNOSTICS: usize = 50;

/// One compiler message, with its place relative to the submission.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// The file, relative to the submission (`src/lib.rs`), or as cargo named it when
    /// it is not one of the submission's files.
    pub file: Option<String>,
    /// 1-based line.
    pub line: Option<u64>,
    /// 1-based column.
    pub column: Option<u64>,
    /// `error`, `warning`...
    pub level: String,
    /// The message.
    pub message: String,
    /// The message as rustc renders it (with the code excerpt).
    pub rendered: Option<String>,
}

/// What a build produced.
pub(crate) struct Built {
    pub component: Vec<u8>,
    pub warnings: Vec<Diagnostic>,
}

/// A failed build: its diagnostics and the tail of its output.
#[derive(Clone, Debug, Serialize)]
pub struct BuildFailure {
    /// Errors first, then warnings.
    pub diagnostics: Vec<Diagnostic>,
    /// The last lines of cargo's stderr (and of build scripts' output).
    pub output_tail: String,
    /// Why it stopped, when not a compile error (time limit, no artifact).
    pub reason: Option<String>,
}

/// The host programs and directories a build needs.
#[derive(Clone, Debug)]
pub(crate) struct Toolchain {
    pub sysroot: PathBuf,
    pub sdk: PathBuf,
    pub vendor: PathBuf,
    /// The jail every build runs in: bwrap, prlimit and the layers under bwrap (a cgroup,
    /// the seccomp filter, and on a root host the drop to an unprivileged uid when it can
    /// reach the build's paths), detected as for the sandbox runtime. Its
    /// [`weakened`](Jail::weakened) is the gate every build passes first.
    pub jail: Arc<Jail>,
}

/// What one build sandbox may use at most (its cgroup): resident memory of every
/// process of the build together, processes and threads, CPU cores.
const BUILD_CGROUP: CgroupLimits = CgroupLimits { memory: 4 << 30, pids: 512, cpus: 2.0 };

/// The jail a build under `forge_dir` runs in: the sandbox's uid must reach the
/// toolchain, the SDK, the vendored crates and the build dirs, or the uid drop is off.
fn jail(forge_dir: &Path, programs: Programs, sysroot: &Path, cache: &Path) -> Arc<Jail> {
    let reach = vec![sysroot.to_owned(), cache.to_owned(), forge_dir.join("builds"), forge_dir.join("targets")];
    let jail = Jail::new(programs, (DEFAULT_SANDBOX_ID, DEFAULT_SANDBOX_ID), reach, None);
    // Said once per process, like the sandbox runtime's own warnings at start (a root
    // host whose forge dir that uid cannot reach builds without the uid drop).
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| jail.isolation().warn_unavailable());
    Arc::new(jail)
}

/// The variables of the host's environment the host-side Rust tools (`rustc --print
/// sysroot`, `cargo vendor`) are handed: where rustup and cargo keep their toolchains and
/// caches, which toolchain, and how this machine reaches the network. Nothing else (no
/// `CARGO_BUILD_*`, `RUSTFLAGS`, `CARGO_SOURCE_*` of the caller's shell) reaches them.
const RUST_TOOL_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CARGO_HTTP_CAINFO",
];

/// `program` as the host runs a Rust tool: in `cwd` (a directory of the forge's, never
/// the one the host was started in, so neither a `.cargo/config.toml` nor a
/// `rust-toolchain.toml` there applies), with only [`RUST_TOOL_ENV`] of the host's
/// environment.
fn rust_tool(program: &std::ffi::OsStr, cwd: &Path) -> std::process::Command {
    let mut command = std::process::Command::new(program);
    command.current_dir(cwd).env_clear();
    for name in RUST_TOOL_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command
}

/// Find the Rust sysroot (with the wasm32-wasip2 standard library), asking rustc from
/// `cwd` (see [`rust_tool`]).
fn sysroot(cwd: &Path) -> Result<PathBuf, ForgeError> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = rust_tool(&rustc, cwd)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| ForgeError::Setup(format!("cannot run rustc ({e}); install Rust with rustup to build Rust skills")))?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !sysroot.join("lib/rustlib").join(TARGET).is_dir() {
        return Err(ForgeError::Setup(format!(
            "the Rust toolchain at {} has no {TARGET} standard library; run `rustup target add {TARGET}`",
            sysroot.display()
        )));
    }
    Ok(sysroot)
}

/// The Rust sysroot where the build sandbox's unprivileged uid can read it. On a root host
/// rustup keeps the toolchain under root's private home, out of that uid's reach: its
/// `bin`, `lib` and `libexec` (a few hundred files) are hard-linked, or copied across file
/// systems, into `forge_dir/rust-<key>` once per toolchain. When that fails, the sysroot
/// as it is, and builds run without the uid drop (the host warns once).
fn reachable_sysroot(sysroot: PathBuf, forge_dir: &Path) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let id = DEFAULT_SANDBOX_ID;
    if !rustix::process::geteuid().is_root() || skillhost_jail::isolation::unreachable_parent(&sysroot, id, id).is_none() {
        return sysroot;
    }
    let link = || -> std::io::Result<PathBuf> {
        let rustc = std::fs::metadata(sysroot.join("bin/rustc"))?;
        let mut hasher = Sha256::new();
        hasher.update(sysroot.as_os_str().as_encoded_bytes());
        hasher.update(format!("{} {} {}.{}", rustc.ino(), rustc.size(), rustc.mtime(), rustc.mtime_nsec()));
        let dir = forge_dir.join(format!("rust-{}", hex::encode(&hasher.finalize()[..6])));
        if dir.join("ready").is_file() {
            return Ok(dir);
        }
        let _ = std::fs::remove_dir_all(&dir);
        for part in ["bin", "lib", "libexec"] {
            if sysroot.join(part).is_dir() {
                link_tree(&sysroot.join(part), &dir.join(part))?;
            }
        }
        std::fs::write(dir.join("ready"), "")?;
        Ok(dir)
    };
    match link() {
        Ok(dir) => dir,
        Err(e) => {
            tracing::warn!(sysroot = %sysroot.display(), "cannot give the forge's build sandbox a Rust toolchain it can reach: {e}");
            sysroot
        }
    }
}

/// Hard-link every file under `from` into `to` (a copy where links cannot cross file
/// systems), keeping directories, modes and relative symbolic links.
fn link_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(to)?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755))?;
    for entry in std::fs::read_dir(from)?.filter_map(Result::ok) {
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let meta = std::fs::symlink_metadata(&source)?;
        if meta.is_dir() {
            link_tree(&source, &target)?;
        } else if meta.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source)?, &target)?;
        } else if std::fs::hard_link(&source, &target).is_err() {
            std::fs::copy(&source, &target)?;
        }
    }
    Ok(())
}

/// Make (once) and return the toolchain cache for the SDK workspace at `workspace`.
pub(crate) fn toolchain(forge_dir: &Path, workspace: &Path) -> Result<Toolchain, ForgeError> {
    let setup = |what: &str| {
        let what = what.to_owned();
        move |e: std::io::Error| ForgeError::Setup(format!("{what}: {e}"))
    };
    let programs = Programs::find(None, None).map_err(|e| ForgeError::Setup(format!("cannot build skills: {e}")))?;
    std::fs::create_dir_all(forge_dir).map_err(setup("cannot create the forge's directory"))?;
    // Absolute: the tools run from directories of their own.
    let forge_dir = &std::path::absolute(forge_dir).map_err(setup("cannot make the forge's directory absolute"))?;
    let workspace = &std::path::absolute(workspace).map_err(setup("cannot make the SDK workspace absolute"))?;
    let sysroot = reachable_sysroot(sysroot(forge_dir)?, forge_dir);
    let root_toml =
        std::fs::read_to_string(workspace.join("Cargo.toml")).map_err(setup(&format!("cannot read {}/Cargo.toml", workspace.display())))?;
    let mut hasher = Sha256::new();
    hasher.update(root_toml.as_bytes());
    hash_tree(&workspace.join("guest-sdk"), &mut hasher).map_err(setup("cannot read the SDK sources"))?;
    hash_tree(&workspace.join("wit"), &mut hasher).map_err(setup("cannot read the WIT files"))?;
    let key = hex::encode(&hasher.finalize()[..6]);
    let dir = forge_dir.join(format!("toolchain-{key}"));
    let (sdk, vendor) = (dir.join("sdk"), dir.join("vendor"));
    if dir.join("ready").is_file() {
        let jail = jail(forge_dir, programs, &sysroot, &dir);
        return Ok(Toolchain { sysroot, sdk, vendor, jail });
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&sdk).map_err(setup("cannot create the toolchain cache"))?;
    std::fs::write(sdk.join("Cargo.toml"), sdk_workspace_manifest(&root_toml)?).map_err(setup("cannot write the SDK workspace"))?;
    copy_tree(&workspace.join("guest-sdk"), &sdk.join("guest-sdk")).map_err(setup("cannot copy the SDK"))?;
    copy_tree(&workspace.join("wit"), &sdk.join("wit")).map_err(setup("cannot copy the WIT files"))?;
    let template = dir.join("template");
    std::fs::create_dir_all(template.join("src")).map_err(setup("cannot create the template crate"))?;
    std::fs::write(template.join("src/lib.rs"), "").map_err(setup("cannot write the template crate"))?;
    std::fs::write(template.join("Cargo.toml"), cargo_toml("template", &sdk.join("guest-sdk").display().to_string()))
        .map_err(setup("cannot write the template crate"))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // Offline first (the local registry cache usually has everything), then online.
    let mut last = String::new();
    for offline in [true, false] {
        // From the template's directory: cargo reads the configuration of the directory it
        // runs in and its parents, which are the forge's.
        let mut command = rust_tool(&cargo, &template);
        command.args(["vendor", "--quiet", "--manifest-path"]).arg(template.join("Cargo.toml")).arg(&vendor);
        if offline {
            command.arg("--offline");
        }
        let out = command.output().map_err(setup("cannot run `cargo vendor`"))?;
        if out.status.success() {
            std::fs::write(dir.join("ready"), "").map_err(setup("cannot write the toolchain cache"))?;
            tracing::info!(dir = %dir.display(), "forge toolchain cache ready");
            let jail = jail(forge_dir, programs, &sysroot, &dir);
            return Ok(Toolchain { sysroot, sdk, vendor, jail });
        }
        last = String::from_utf8_lossy(&out.stderr).into_owned();
    }
    Err(ForgeError::Setup(format!("cannot vendor the SDK's dependencies (needs crates.io once): {}", last.trim())))
}

/// The SDK workspace's root manifest: the checkout's (`root`), with only the SDK's
/// crates as members. Applied to its own output it changes nothing.
pub fn sdk_workspace_manifest(root: &str) -> Result<String, ForgeError> {
    let mut table: toml::Table =
        root.parse().map_err(|e| ForgeError::Setup(format!("the SDK workspace's Cargo.toml does not parse: {e}")))?;
    let workspace = table
        .get_mut("workspace")
        .and_then(|w| w.as_table_mut())
        .ok_or_else(|| ForgeError::Setup("the SDK workspace's Cargo.toml has no [workspace]".into()))?;
    workspace.insert("members".into(), toml::Value::Array(vec!["guest-sdk".into(), "guest-sdk/macros".into()]));
    workspace.remove("default-members");
    workspace.remove("exclude");
    Ok(table.to_string())
}

/// The Cargo.toml the forge writes for a skill that has none.
pub(crate) fn cargo_toml(name: &str, sdk: &str) -> String {
    format!(
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n[lib]\ncrate-type = [\"cdylib\"]\n\n\
         [dependencies]\nskillhost-sdk = {{ path = \"{sdk}\" }}\n\n[workspace]\n\n[profile.release]\nopt-level = \"s\"\nstrip = true\n"
    )
}

/// A submitted Cargo.toml with its `skillhost-sdk` dependency pointed at the SDK inside
/// the sandbox: whatever it named (the SDK's version, as `skillhost new` writes, a
/// checkout's path, or the workspace's) is not there. A manifest that does not parse, or does not
/// depend on the SDK, is left as it is for cargo to report.
pub(crate) fn with_sandbox_sdk(manifest: &str) -> String {
    let Ok(mut table) = manifest.parse::<toml::Table>() else { return manifest.to_owned() };
    let Some(sdk) = table.get_mut("dependencies").and_then(toml::Value::as_table_mut).and_then(|d| d.get_mut("skillhost-sdk")) else {
        return manifest.to_owned();
    };
    *sdk = toml::Value::Table(toml::Table::from_iter([("path".to_owned(), toml::Value::from(sdk_path()))]));
    table.to_string()
}

/// The SDK path a skill's Cargo.toml names inside the sandbox.
pub(crate) fn sdk_path() -> String {
    format!("{SDK_MOUNT}/guest-sdk")
}

fn hash_tree(dir: &Path, hasher: &mut Sha256) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') || name == "target" {
            continue;
        }
        let meta = entry.metadata()?;
        hasher.update(name.as_encoded_bytes());
        if meta.is_dir() {
            hash_tree(&entry.path(), hasher)?;
        } else {
            hasher.update(std::fs::read(entry.path())?);
        }
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)?.filter_map(Result::ok) {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') || name == "target" {
            continue;
        }
        let meta = std::fs::symlink_metadata(entry.path())?;
        if meta.is_dir() {
            copy_tree(&entry.path(), &to.join(&name))?;
        } else if meta.is_file() {
            std::fs::copy(entry.path(), to.join(&name))?;
        }
    }
    Ok(())
}

/// Build limits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BuildLimits {
    pub wall: Duration,
}

/// The directories of one build attempt.
pub(crate) struct BuildDirs {
    /// The crate, staged by the host into a fresh dir: `/build/src`.
    pub src: PathBuf,
    /// The skill's target dir, kept across attempts (its parent is the host's): `/build/target`.
    pub target: PathBuf,
    /// A fresh dir of the host's own for this attempt, never mounted writable.
    pub private: PathBuf,
}

/// Build the crate staged in `dirs.src` in the sandbox. Returns the component or the
/// failure.
pub(crate) async fn build(
    toolchain: &Toolchain,
    build: &BuildDirs,
    limits: BuildLimits,
) -> Result<Result<Built, BuildFailure>, ForgeError> {
    let io = |what: &'static str| move |e: std::io::Error| ForgeError::Io { what, source: e };
    let etc = build.private.join("etc");
    skillhost_jail::profile::write_etc(&etc).map_err(io("cannot write the build sandbox's /etc"))?;
    let bind =
        |host: &Path, guest: &str, mode| Bind::host_dir(host, guest, mode).map_err(io("cannot open a directory of the build sandbox"));
    // The two writable dirs are opened from their parents (the host's, never mounted)
    // without following a link, `target` made if missing: what a build did below them
    // before is never followed by the host.
    let user = toolchain.jail.user().cloned();
    let writable = |dir: &Path, guest: String| -> Result<Bind, ForgeError> {
        let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
            return Err(io("cannot open a directory of the build sandbox")(std::io::Error::other(format!(
                "{} has no parent",
                dir.display()
            ))));
        };
        let fd = skillhost_core::open_beneath(parent, Path::new(name), user.is_some()).map_err(|e| {
            io("cannot open a writable directory of the build sandbox")(match e {
                skillhost_core::Beneath::Link(at) => {
                    std::io::Error::other(format!("{} is a link or not a directory; remove it", parent.join(at).display()))
                }
                skillhost_core::Beneath::Io(e) => e,
            })
        })?;
        // A root host builds as the sandbox's unprivileged uid: it owns the two writable
        // dirs (given through the descriptor, never a path a build could have replaced).
        if let Some(user) = &user {
            user.give(&fd).map_err(|e| io("cannot give a build dir to the sandbox's uid")(e.into()))?;
        }
        Ok(Bind { fd: Arc::new(fd), guest, mode: FileMode::ReadWrite })
    };
    let sysroot = toolchain.sysroot.display().to_string();
    let mut dirs = vec![
        bind(&toolchain.sysroot, &sysroot, FileMode::ReadOnly)?,
        bind(&toolchain.sdk, SDK_MOUNT, FileMode::ReadOnly)?,
        bind(&toolchain.vendor, VENDOR_MOUNT, FileMode::ReadOnly)?,
        writable(&build.src, format!("{BUILD_MOUNT}/src"))?,
        writable(&build.target, format!("{BUILD_MOUNT}/target"))?,
    ];
    // `cc` (the linker of build scripts and proc macros) is a Debian alternatives link.
    if Path::new("/etc/alternatives").is_dir() {
        dirs.push(bind(Path::new("/etc/alternatives"), "/etc/alternatives", FileMode::ReadOnly)?);
    }
    let profile = Profile {
        python: None,
        skill_dir: build.src.clone(),
        dirs,
        scratch: None,
        etc_dir: etc,
        env: vec![
            ("PATH".into(), format!("{sysroot}/bin:/usr/bin:/bin")),
            ("CARGO_HOME".into(), "/tmp/cargo-home".into()),
            ("RUSTC".into(), format!("{sysroot}/bin/rustc")),
            ("CARGO_TERM_COLOR".into(), "never".into()),
        ],
        limits: ResourceLimits {
            address_space: 16 << 30,
            processes: 512,
            cpu_seconds: limits.wall.as_secs().max(1) * 2,
            file_size: 1 << 30,
            open_files: 1024,
        },
        net: None,
        // cargo's working directory: an empty tmpfs, so that no configuration is found
        // there or above it (cargo reads `.cargo/config.toml` from its working directory
        // up, never from the manifest's); the source at `/skill` and `/build/src` is only
        // named by `--manifest-path`. The stager refuses hidden files besides.
        workspace: Some(BUILD_CWD_BYTES),
        init: None,
        node_modules: None,
    };
    let args: Vec<OsString> = [
        "build",
        "--offline",
        "--release",
        "--target",
        TARGET,
        "--message-format=json",
        "--manifest-path",
        "/build/src/Cargo.toml",
        "--target-dir",
        "/build/target",
        "--config",
        "source.crates-io.replace-with=\"forge-vendor\"",
        "--config",
        "source.forge-vendor.directory=\"/vendor\"",
    ]
    .iter()
    .map(Into::into)
    .collect();
    let cargo = toolchain.sysroot.join("bin/cargo");
    let Jailed { mut command, confinement: _confinement } =
        toolchain.jail.command(&profile, "forge-build", &BUILD_CGROUP, cargo.as_os_str(), &args).map_err(|e| {
            ForgeError::Setup(match e {
                JailError::Confine(e) => format!("cannot confine the build sandbox: {e}"),
                e => format!("cannot set up the build sandbox: {e}"),
            })
        })?;
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().map_err(io("cannot start the build sandbox"))?;
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let read_messages = async {
        let mut lines = BufReader::new(stdout).lines();
        let mut diagnostics = Vec::new();
        let mut artifact = None;
        while let Ok(Some(line)) = lines.next_line().await {
            match parse_message(&line) {
                Some(Message::Diagnostic(d)) if diagnostics.len() < MAX_DIAGNOSTICS * 4 => diagnostics.push(d),
                Some(Message::Artifact(path)) => artifact = Some(path),
                Some(Message::Diagnostic(_)) | None => {}
            }
        }
        (diagnostics, artifact)
    };
    let read_stderr = async {
        let mut tail = Vec::new();
        let mut buf = [0u8; 8192];
        while let Ok(n) = stderr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            tail.extend_from_slice(&buf[..n]);
            if tail.len() > 2 * MAX_OUTPUT {
                tail.drain(..tail.len() - MAX_OUTPUT);
            }
        }
        tail
    };
    let run = async { tokio::join!(read_messages, read_stderr, child.wait()) };
    let ((diagnostics, artifact), tail, status) = match tokio::time::timeout(limits.wall, run).await {
        Ok(done) => done,
        Err(_) => {
            return Ok(Err(BuildFailure {
                diagnostics: vec![],
                output_tail: String::new(),
                reason: Some(format!("the build was killed after the wall-clock limit of {:?}", limits.wall)),
            }));
        }
    };
    let output_tail = tail_text(&tail);
    let (mut errors, warnings): (Vec<Diagnostic>, Vec<Diagnostic>) = diagnostics.into_iter().partition(|d| d.level == "error");
    let success = status.as_ref().is_ok_and(|s| s.success());
    if !success {
        errors.extend(warnings);
        errors.truncate(MAX_DIAGNOSTICS);
        return Ok(Err(BuildFailure { diagnostics: errors, output_tail, reason: None }));
    }
    let Some(artifact) = artifact else {
        return Ok(Err(BuildFailure {
            diagnostics: warnings,
            output_tail,
            reason: Some("the crate built no cdylib; its Cargo.toml needs `[lib] crate-type = [\"cdylib\"]`".into()),
        }));
    };
    // The artifact's path is inside the sandbox: it must lie in the target dir, and is
    // read from there without following a link (the build wrote everything below it).
    let Some(relative) =
        artifact.strip_prefix(format!("{BUILD_MOUNT}/target")).ok().filter(|r| r.components().all(|c| matches!(c, Component::Normal(_))))
    else {
        return Ok(Err(BuildFailure {
            diagnostics: warnings,
            output_tail,
            reason: Some(format!("cargo named an artifact outside the target dir: {}", artifact.display())),
        }));
    };
    let component = match read_beneath(&build.target, relative) {
        Ok(bytes) => bytes,
        Err(e) => {
            return Ok(Err(BuildFailure {
                diagnostics: warnings,
                output_tail,
                reason: Some(format!("the built component {} cannot be read without following a link: {e}", artifact.display())),
            }));
        }
    };
    let mut warnings = warnings;
    warnings.truncate(MAX_DIAGNOSTICS);
    Ok(Ok(Built { component, warnings }))
}

/// Read the file `root/relative`, opening each component relative to its parent without
/// following a link: a link planted anywhere below `root` makes this fail.
fn read_beneath(root: &Path, relative: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;

    use rustix::fs::{CWD, Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let mut dir = rustix::fs::openat(CWD, root, flags | OFlags::DIRECTORY, Mode::empty())?;
    let parts: Vec<_> = relative.components().collect();
    let Some((file, dirs)) = parts.split_last() else {
        return Err(std::io::Error::other("no file named"));
    };
    for part in dirs {
        dir = rustix::fs::openat(&dir, part.as_os_str(), flags | OFlags::DIRECTORY, Mode::empty())?;
    }
    let fd = rustix::fs::openat(&dir, file.as_os_str(), flags, Mode::empty())?;
    let mut file = std::fs::File::from(fd);
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn tail_text(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(MAX_OUTPUT);
    let text = String::from_utf8_lossy(&bytes[start..]);
    // Drop cargo's progress noise.
    text.lines()
        .filter(|l| {
            let t = l.trim_start();
            !t.starts_with("Compiling ") && !t.starts_with("Finished ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

enum Message {
    Diagnostic(Diagnostic),
    Artifact(PathBuf),
}

/// One line of `cargo build --message-format=json`: a diagnostic (with its primary
/// span made relative to the submission) or the cdylib `.wasm` of the package at
/// `/build/src`.
fn parse_message(line: &str) -> Option<Message> {
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    match value["reason"].as_str()? {
        "compiler-message" => {
            let message = &value["message"];
            let level = message["level"].as_str()?.to_owned();
            if !matches!(level.as_str(), "error" | "warning") {
                return None;
            }
            let text = message["message"].as_str()?.to_owned();
            // rustc's closing summaries ("aborting due to...") carry no place.
            if text.starts_with("aborting due to") || text.contains("warning emitted") || text.contains("warnings emitted") {
                return None;
            }
            let span = message["spans"].as_array().and_then(|spans| spans.iter().find(|s| s["is_primary"] == true));
            let file = span.and_then(|s| s["file_name"].as_str()).map(relative_file);
            Some(Message::Diagnostic(Diagnostic {
                file,
                line: span.and_then(|s| s["line_start"].as_u64()),
                column: span.and_then(|s| s["column_start"].as_u64()),
                level,
                message: text,
                rendered: message["rendered"].as_str().map(str::to_owned),
            }))
        }
        "compiler-artifact" => {
            let ours = value["manifest_path"].as_str() == Some("/build/src/Cargo.toml");
            let cdylib = value["target"]["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "cdylib"));
            if !(ours && cdylib) {
                return None;
            }
            value["filenames"]
                .as_array()?
                .iter()
                .filter_map(|f| f.as_str())
                .find(|f| f.ends_with(".wasm"))
                .map(|f| Message::Artifact(PathBuf::from(f)))
        }
        _ => None,
    }
}

fn relative_file(file: &str) -> String {
    file.strip_prefix("/build/src/").unwrap_or(file).to_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_submitted_manifest_builds_against_the_sandboxed_sdk() {
        let by_path = "[package]\nname = \"greet\"\nversion = \"0.1.0\"\n\n[dependencies]\nskillhost-sdk = { path = \"/home/ada/.local/share/skillhost/sdk/0.1.0-ab/guest-sdk\" }\nserde = \"1\"\n";
        let fixed: toml::Table = with_sandbox_sdk(by_path).parse().unwrap();
        assert_eq!(fixed["dependencies"]["skillhost-sdk"]["path"].as_str(), Some("/sdk/guest-sdk"));
        assert_eq!(fixed["dependencies"]["serde"].as_str(), Some("1"), "other dependencies stay");
        let by_version = "[package]\nname = \"greet\"\n\n[dependencies]\nskillhost-sdk = \"0.1\"\n";
        let fixed: toml::Table = with_sandbox_sdk(by_version).parse().unwrap();
        assert_eq!(fixed["dependencies"]["skillhost-sdk"]["path"].as_str(), Some("/sdk/guest-sdk"));
        let inherited = "[package]\nname = \"greet\"\n\n[dependencies]\nskillhost-sdk.workspace = true\n";
        let fixed: toml::Table = with_sandbox_sdk(inherited).parse().unwrap();
        assert_eq!(
            fixed["dependencies"]["skillhost-sdk"].as_table().unwrap(),
            &toml::Table::from_iter([("path".to_owned(), toml::Value::from("/sdk/guest-sdk"))])
        );
        for left_alone in ["not toml [", "[package]\nname = \"x\"\n"] {
            assert_eq!(with_sandbox_sdk(left_alone), left_alone);
        }
    }

    use super::*;

    #[test]
    fn diagnostics_are_relative_to_the_submission() {
        let line = r#"{"reason":"compiler-message","message":{"level":"error","message":"cannot find value `x` in this scope","rendered":"error[E0425]: ...","spans":[{"file_name":"/build/src/src/lib.rs","line_start":7,"column_start":5,"is_primary":true}]}}"#;
        let Some(Message::Diagnostic(d)) = parse_message(line) else { panic!("not a diagnostic") };
        assert_eq!((d.file.as_deref(), d.line, d.column, d.level.as_str()), (Some("src/lib.rs"), Some(7), Some(5), "error"));
        let relative = r#"{"reason":"compiler-message","message":{"level":"error","message":"m","rendered":null,"spans":[{"file_name":"src/lib.rs","line_start":1,"column_start":2,"is_primary":true}]}}"#;
        let Some(Message::Diagnostic(d)) = parse_message(relative) else { panic!("not a diagnostic") };
        assert_eq!(d.file.as_deref(), Some("src/lib.rs"));
        let summary =
            r#"{"reason":"compiler-message","message":{"level":"error","message":"aborting due to 1 previous error","spans":[]}}"#;
        assert!(parse_message(summary).is_none());
        let artifact = r#"{"reason":"compiler-artifact","manifest_path":"/build/src/Cargo.toml","target":{"kind":["cdylib"]},"filenames":["/build/target/wasm32-wasip2/release/demo.wasm"]}"#;
        assert!(
            matches!(parse_message(artifact), Some(Message::Artifact(p)) if p == Path::new("/build/target/wasm32-wasip2/release/demo.wasm"))
        );
        assert!(parse_message("not json").is_none());
    }

    #[test]
    fn the_component_is_read_without_following_links() {
        let dir = tempfile::tempdir().unwrap();
        let (target, outside) = (dir.path().join("target"), dir.path().join("outside"));
        std::fs::create_dir_all(target.join("wasm32-wasip2/release")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.wasm"), "host file").unwrap();
        std::fs::write(target.join("wasm32-wasip2/release/ok.wasm"), "component").unwrap();
        assert_eq!(read_beneath(&target, Path::new("wasm32-wasip2/release/ok.wasm")).unwrap(), b"component");
        std::os::unix::fs::symlink(outside.join("secret.wasm"), target.join("wasm32-wasip2/release/link.wasm")).unwrap();
        std::os::unix::fs::symlink(&outside, target.join("wasm32-wasip2/linked")).unwrap();
        assert!(read_beneath(&target, Path::new("wasm32-wasip2/release/link.wasm")).is_err(), "a link as the file");
        assert!(read_beneath(&target, Path::new("wasm32-wasip2/linked/secret.wasm")).is_err(), "a link as a directory");
    }

    #[test]
    fn the_sdk_workspace_keeps_only_the_sdk() {
        let root = "[workspace]\nmembers = [\"host/core\", \"guest-sdk\"]\ndefault-members = [\"host/core\"]\nexclude = [\"x\"]\n[workspace.dependencies]\nserde = \"1\"\n";
        let text = sdk_workspace_manifest(root).unwrap();
        let table: toml::Table = text.parse().unwrap();
        let ws = table["workspace"].as_table().unwrap();
        assert_eq!(ws["members"].as_array().unwrap().len(), 2);
        assert!(!ws.contains_key("default-members") && !ws.contains_key("exclude"));
        assert_eq!(ws["dependencies"]["serde"].as_str(), Some("1"));
    }
}
