//! Git repositories for tests, made with the git CLI: a work tree and the bare repository
//! it pushes to, which is what a `git+file://` source reads.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A work repository and its bare remote, in a temporary folder.
pub struct GitRepo {
    dir: tempfile::TempDir,
    /// The work tree commits are made in.
    pub work: PathBuf,
    /// The bare repository they are pushed to (branch `main`).
    pub bare: PathBuf,
}

/// Run git in `dir` with no user or system configuration; its trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

impl GitRepo {
    /// An empty work tree and bare repository.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        let bare = dir.path().join("repo.git");
        std::fs::create_dir(&work).unwrap();
        git(&work, &["init", "-q"]);
        git(dir.path(), &["init", "-q", "--bare", bare.to_str().unwrap()]);
        Self { dir, work, bare }
    }

    /// The temporary folder holding both.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Write `files` into the work tree, commit them all and push to `main`; the commit id.
    pub fn commit(&self, files: &[(&str, &[u8])]) -> String {
        for (path, bytes) in files {
            let path = self.work.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
        git(&self.work, &["add", "-A"]);
        git(&self.work, &["commit", "-q", "-m", "change"]);
        git(&self.work, &["push", "-q", self.bare.to_str().unwrap(), "HEAD:refs/heads/main"]);
        git(&self.work, &["rev-parse", "HEAD"])
    }
}

impl Default for GitRepo {
    fn default() -> Self {
        Self::new()
    }
}
