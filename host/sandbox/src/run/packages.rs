//! The packages a skill's scripts declare, resolved and installed when a human approves
//! the skill, never at run time: [`BwrapRuntime::install_packages`] asks uv (from PyPI,
//! installed into the managed venv by `skillhost setup python`) to resolve the
//! requirements to exact versions for the managed venv's Python, then installs exactly
//! that set, wheels only (no package's build code runs on the host), into an
//! environment named by the hash of the set: `<work_dir>/envs/py-HASH`, shared by every
//! skill with the same set, bound read-only into the jails of their runs.
//!
//! uv was chosen over pip: it resolves a set to exact versions without installing it
//! (`uv pip compile`), refuses source builds with one flag, is one static binary from
//! PyPI, and installs a resolved set in well under a second from its cache.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;

use sha2::Digest;
use skillhost_core::PackageLock;
use tokio::io::AsyncWriteExt;

use crate::BwrapRuntime;

/// Why the packages could not be resolved or installed.
#[derive(Debug, thiserror::Error)]
#[error("cannot install its packages: {0}")]
pub struct PackagesError(String);

/// The file that marks an environment as complete.
const COMPLETE: &str = ".skillhost-complete";

impl BwrapRuntime {
    /// Resolve `declared` (plain requirements, see
    /// [`declared_packages`](skillhost_core::run::declared_packages)) to exact versions
    /// and install them into their shared environment (kept when it is already there):
    /// the lock to record for the skill.
    pub async fn install_packages(&self, declared: &[String]) -> Result<PackageLock, PackagesError> {
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
        let resolved = uv_run(&uv, &compile, Some(declared.join("\n")))
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
            uv_run(&uv, &make, None).await.map_err(|e| fail(format!("uv could not make {}: {e}", dir.display())))?;
            let mut install: Vec<OsString> =
                ["pip", "install", "--quiet", "--no-deps", "--only-binary", ":all:", "--python"].map(OsString::from).into();
            install.push(dir.join("bin/python").into_os_string());
            install.extend(index.iter().cloned());
            install.extend(packages.iter().map(OsString::from));
            uv_run(&uv, &install, None).await.map_err(|e| fail(format!("uv could not install {}: {e}", packages.join(", "))))?;
            std::fs::write(dir.join(COMPLETE), packages.join("\n")).map_err(|e| fail(e.to_string()))?;
        }
        Ok(PackageLock { declared: PackageLock::declared_hash(declared), packages, env })
    }

    /// The directory of the environment `name` (a [`PackageLock::env`]), if it is complete.
    pub(crate) fn package_env(&self, name: &str) -> Option<PathBuf> {
        let valid = name.strip_prefix("py-").is_some_and(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()));
        let dir = self.inner.config.work_dir.join("envs").join(name);
        (valid && dir.join(COMPLETE).is_file()).then_some(dir)
    }
}

/// Run uv with `args` (stdin `input`), its stdout, or its stderr's last lines.
async fn uv_run(uv: &std::path::Path, args: &[OsString], input: Option<String>) -> Result<String, String> {
    let mut command = tokio::process::Command::new(uv);
    command.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    command.env("UV_NO_PROGRESS", "1");
    let mut child = command.spawn().map_err(|e| format!("cannot start {}: {e}", uv.display()))?;
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
