//! The packages a skill's scripts declare, resolved and installed when a human approves
//! the skill, never at run time ([`BwrapRuntime::install_packages`]):
//!
//! - Python: uv (from PyPI, installed into the managed venv by `skillhost setup python`)
//!   resolves the requirements to exact versions for the managed venv's Python, then
//!   installs exactly that set, wheels only (no package's build code runs on the host),
//!   into `<work_dir>/envs/py-HASH`, named by the hash of the set and shared by every
//!   skill with the same set; a run uses it instead of the managed venv.
//! - Node: `npm ci --ignore-scripts --omit=dev` installs exactly what the skill's
//!   `package-lock.json` names (no install script runs) into `<work_dir>/envs/node-HASH`,
//!   named by the hash of its `package.json` and lockfile; a run sees it at
//!   `/node_modules`, where node's resolution finds it from any script under `/skill`.
//!
//! Both are bound read-only into the jails of their runs.
//!
//! uv was chosen over pip for Python: it resolves a set to exact versions without installing it
//! (`uv pip compile`), refuses source builds with one flag, is one static binary from
//! PyPI, and installs a resolved set in well under a second from its cache.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;

use std::collections::BTreeMap;

use sha2::Digest;
use skillhost_core::{NodeLock, NodePackages, PackageLock};
use tokio::io::AsyncWriteExt;

use crate::BwrapRuntime;

/// Why the packages could not be resolved or installed.
#[derive(Debug, thiserror::Error)]
#[error("cannot install its packages: {0}")]
pub struct PackagesError(String);

/// The file that marks an environment as complete.
const COMPLETE: &str = ".skillhost-complete";

impl BwrapRuntime {
    /// Resolve and install what a skill's scripts declare: `python` (plain requirements,
    /// see [`declared_packages`](skillhost_core::run::declared_packages)) and the node
    /// packages of its `files` ([`declared_node`](skillhost_core::run::declared_node)),
    /// each into its shared environment (kept when it is already there): the lock to
    /// record for the skill.
    pub async fn install_packages(&self, python: &[String], files: &BTreeMap<String, Vec<u8>>) -> Result<PackageLock, PackagesError> {
        let node = skillhost_core::run::declared_node(files).map_err(PackagesError)?;
        let (packages, env) = if python.is_empty() { (Vec::new(), String::new()) } else { self.install_python(python).await? };
        let node_lock = match &node {
            Some(node) => Some(self.install_node(node, files).await?),
            None => None,
        };
        Ok(PackageLock { declared: PackageLock::declared_hash(python, node.as_ref()), packages, env, node: node_lock })
    }

    /// Resolve `declared` with uv and install the set: its packages and environment.
    async fn install_python(&self, declared: &[String]) -> Result<(Vec<String>, String), PackagesError> {
        let fail = |what: String| PackagesError(what);
        let venv = self.venv().ok_or_else(|| fail("this host has no managed Python venv; run `skillhost setup python`".into()))?;
        let uv = venv.dir.join("bin/uv");
        if !uv.is_file() {
            return Err(fail(format!("{} is missing; run `skillhost setup python`, which installs uv into the venv", uv.display())));
        }
        let python = venv.python();
        let index = &self.inner.config.package_index;
        let mut compile: Vec<OsString> =
            ["pip", "compile", "-", "--quiet", "--no-header", "--no-annotate", "--only-binary", ":all:", "--python"]
                .map(OsString::from)
                .into();
        compile.push(python.clone().into_os_string());
        compile.extend(index.iter().cloned());
        let resolved = run_tool(&uv, &compile, Some(declared.join("\n")), None)
            .await
            .map_err(|e| fail(format!("uv could not resolve {}: {e}", declared.join(", "))))?;
        let mut packages: Vec<String> =
            resolved.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_owned).collect();
        packages.sort();
        let env = format!("py-{}", &hex::encode(sha2::Sha256::digest(packages.join("\n")))[..16]);
        let dir = self.inner.config.work_dir.join("envs").join(&env);
        if !dir.join(COMPLETE).is_file() {
            if dir.exists() {
                std::fs::remove_dir_all(&dir).map_err(|e| fail(format!("cannot clear the unfinished {}: {e}", dir.display())))?;
            }
            std::fs::create_dir_all(dir.parent().unwrap_or(&dir)).map_err(|e| fail(e.to_string()))?;
            let mut make: Vec<OsString> = ["venv", "--quiet", "--python"].map(OsString::from).into();
            make.push(python.into_os_string());
            make.push(dir.clone().into_os_string());
            run_tool(&uv, &make, None, None).await.map_err(|e| fail(format!("uv could not make {}: {e}", dir.display())))?;
            let mut install: Vec<OsString> =
                ["pip", "install", "--quiet", "--no-deps", "--only-binary", ":all:", "--python"].map(OsString::from).into();
            install.push(dir.join("bin/python").into_os_string());
            install.extend(index.iter().cloned());
            install.extend(packages.iter().map(OsString::from));
            run_tool(&uv, &install, None, None).await.map_err(|e| fail(format!("uv could not install {}: {e}", packages.join(", "))))?;
            std::fs::write(dir.join(COMPLETE), packages.join("\n")).map_err(|e| fail(e.to_string()))?;
        }
        Ok((packages, env))
    }

    /// Install what `node`'s lockfile names with `npm ci`, into its shared environment.
    async fn install_node(&self, node: &NodePackages, files: &BTreeMap<String, Vec<u8>>) -> Result<NodeLock, PackagesError> {
        let fail = |what: String| PackagesError(what);
        let npm = skillhost_jail::which("npm").ok_or_else(|| fail("`npm` was not found on PATH; install node and npm".into()))?;
        let env = format!("node-{}", &node.hash[..16]);
        let envs = self.inner.config.work_dir.join("envs");
        let dir = envs.join(&env);
        if !dir.join(COMPLETE).is_file() {
            std::fs::create_dir_all(&envs).map_err(|e| fail(e.to_string()))?;
            // Made aside and renamed: npm ci's tree has no absolute paths.
            let staging = tempfile::Builder::new().prefix(".staging-node-").tempdir_in(&envs).map_err(|e| fail(e.to_string()))?;
            for file in ["package.json", "package-lock.json"] {
                std::fs::write(staging.path().join(file), &files[&format!("{}{file}", node.dir)]).map_err(|e| fail(e.to_string()))?;
            }
            let mut args: Vec<OsString> =
                ["ci", "--ignore-scripts", "--omit=dev", "--no-audit", "--no-fund", "--loglevel=error"].map(OsString::from).into();
            args.extend(self.inner.config.npm_args.iter().cloned());
            run_tool(&npm, &args, None, Some(staging.path()))
                .await
                .map_err(|e| fail(format!("npm could not install {}: {e}", node.packages.join(", "))))?;
            std::fs::write(staging.path().join(COMPLETE), node.packages.join("\n")).map_err(|e| fail(e.to_string()))?;
            if dir.exists() {
                std::fs::remove_dir_all(&dir).map_err(|e| fail(format!("cannot clear the unfinished {}: {e}", dir.display())))?;
            }
            let staged = staging.keep();
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o755));
            std::fs::rename(&staged, &dir).map_err(|e| fail(format!("cannot move the environment into place: {e}")))?;
        }
        Ok(NodeLock { packages: node.packages.clone(), env })
    }

    /// The directory of the environment `name` (a [`PackageLock::env`] or
    /// [`NodeLock::env`]), if it is complete.
    pub(crate) fn package_env(&self, name: &str) -> Option<PathBuf> {
        let hash = name.strip_prefix("py-").or_else(|| name.strip_prefix("node-"));
        let valid = hash.is_some_and(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()));
        let dir = self.inner.config.work_dir.join("envs").join(name);
        (valid && dir.join(COMPLETE).is_file()).then_some(dir)
    }
}

/// Run `program` (uv, npm) with `args` (stdin `input`, in `cwd`): its stdout, or its
/// stderr's last lines.
async fn run_tool(
    program: &std::path::Path,
    args: &[OsString],
    input: Option<String>,
    cwd: Option<&std::path::Path>,
) -> Result<String, String> {
    let mut command = tokio::process::Command::new(program);
    command.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    command.env("UV_NO_PROGRESS", "1");
    let mut child = command.spawn().map_err(|e| format!("cannot start {}: {e}", program.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.unwrap_or_default().as_bytes()).await;
    }
    let out = tokio::time::timeout(std::time::Duration::from_secs(600), child.wait_with_output())
        .await
        .map_err(|_| "it took more than 10 minutes".to_owned())?
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(6).collect();
        return Err(tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
