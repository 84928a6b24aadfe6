//! Git sources (`git+URL#path=DIR&rev=REV`), through the system `git`.
//!
//! A fetch makes a bare clone (no checkout, so no hooks, filters or submodules run) in a
//! fresh 0700 directory under [`FetchOptions::staging`], removed when the fetch ends
//! whatever happens; resolves `rev` to a commit; and reads the skill's folder at that commit
//! as `git archive` tar+gzip output from the pipe (capped), unpacked in memory under
//! [`archive`]'s rules (a symlink in the tree is refused like one in any archive). Every `git` runs from an
//! argument vector (never a shell), with a cleared git environment, no system or global
//! configuration, no repository of the caller's working directory (it runs in an empty
//! private one), only the transport protocols the address allows, and the fetch's timeout,
//! after which it is killed.
//!
//! [`archive`]: crate::archive

use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use rustix::process::Pid;

use skillhost_core::text;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::time::Instant;

use crate::address::{GitAddr, SourceAddr, is_loopback};
use crate::error::SourceError;
use crate::{Artifact, FetchOptions, Fetched, Provenance, SignatureStatus};

/// Most bytes of a git's standard error kept for a message.
const STDERR_CAP: usize = 8 << 10;

/// How often a clone's size on disk is checked while git writes it.
const CLONE_WATCH: Duration = Duration::from_millis(100);

/// Characters of a git's standard error shown in a message.
const STDERR_SHOWN: usize = 600;

/// Attributes written into the clone's `info/attributes`, which take precedence over any
/// `.gitattributes` in the tree: `git archive` then writes every file's blob exactly
/// (no `export-ignore` dropping files, no `export-subst` rewriting them, no end-of-line or
/// filter conversion), so the skill is what the commit holds.
const EXACT_ATTRIBUTES: &str = "* -text -eol -filter -ident -export-ignore -export-subst -working-tree-encoding\n";

/// The skill folder `addr` names, at the commit its `rev` names now.
pub async fn fetch(addr: &GitAddr, options: &FetchOptions) -> Result<Fetched, SourceError> {
    let deadline = Instant::now() + options.caps.timeout;
    let staged = Staged::make(addr, options, deadline).await?;
    let commit = staged.commit(&addr.rev).await?;
    let tree = if addr.path.is_empty() { commit.clone() } else { format!("{commit}:{}", addr.path) };
    let what = format!("{addr} at {commit}");
    // tar+gzip, the form the archive rules read; git gzips it itself (no external command).
    let args = [OsString::from("archive"), "--format=tar.gz".into(), tree.into()];
    let tar = staged.git.run(&args, Some(staged.dir()), options.caps.download, deadline).await.map_err(|e| match e {
        Failure::Exit(stderr) if stderr.contains("not a valid object name") || stderr.contains("not a tree object") => {
            staged.git.error(format!("path={} is not a folder at commit {commit}; check the path in the address", addr.path))
        }
        other => staged.git.failed("git archive", other, &what),
    })?;
    drop(staged);
    let files = crate::archive::unpack(&tar, &what, &options.caps)?;
    Ok(Fetched {
        artifact: Artifact::Folder(files),
        provenance: Provenance {
            source: addr.to_string(),
            pinned: SourceAddr::Git(addr.clone()).pinned(&commit).to_string(),
            digest: commit,
            signature: SignatureStatus::NotChecked,
        },
    })
}

/// The full commit id `addr.rev` names now: a full commit id is itself (no network); a
/// branch or tag is asked of the remote with `git ls-remote`; anything else (an
/// abbreviated commit) is resolved in a clone.
pub async fn resolve(addr: &GitAddr, options: &FetchOptions) -> Result<String, SourceError> {
    if is_full_commit(&addr.rev) {
        return Ok(addr.rev.to_ascii_lowercase());
    }
    let deadline = Instant::now() + options.caps.timeout;
    let git = Git::new(&addr.url)?;
    let peeled = format!("{}^{{}}", addr.rev);
    let args = [OsString::from("ls-remote"), "--".into(), addr.url.clone().into(), addr.rev.clone().into(), peeled.into()];
    // The listing of a few refs: small, but held to the download cap like any answer.
    let listing = git.run(&args, None, options.caps.download, deadline).await.map_err(|e| git.failed("git ls-remote", e, &addr.url))?;
    if let Some(commit) = pick_ref(&String::from_utf8_lossy(&listing), &addr.rev) {
        return Ok(commit);
    }
    let staged = Staged::make(addr, options, deadline).await?;
    staged.commit(&addr.rev).await
}

/// Whether `rev` is a full commit id (SHA-1 or SHA-256).
fn is_full_commit(rev: &str) -> bool {
    (rev.len() == 40 || rev.len() == 64) && rev.chars().all(|c| c.is_ascii_hexdigit())
}

/// The commit `rev` names in `git ls-remote` output, in the order `git rev-parse` looks a
/// name up (so that [`resolve`] and [`fetch`] agree): the exact ref (`HEAD`,
/// `refs/heads/main`), `refs/REV`, a tag (peeled to its commit), a branch.
fn pick_ref(listing: &str, rev: &str) -> Option<String> {
    let refs: Vec<(&str, &str)> = listing.lines().filter_map(|line| line.split_once('\t')).collect();
    let find = |name: &str| refs.iter().find(|(_, r)| *r == name).map(|(id, _)| (*id).to_owned());
    let tag = format!("refs/tags/{rev}");
    find(rev)
        .or_else(|| find(&format!("refs/{rev}")))
        .or_else(|| find(&format!("{tag}^{{}}")))
        .or_else(|| find(&tag))
        .or_else(|| find(&format!("refs/heads/{rev}")))
        .filter(|id| is_full_commit(id))
}

/// A bare clone in its staging directory, removed when this is dropped.
struct Staged {
    git: Git,
    /// The staging directory (0700); its removal is the guard.
    staging: tempfile::TempDir,
    deadline: Instant,
}

impl Staged {
    /// Clone `addr.url` bare into a fresh directory under `options.staging`, stopped as
    /// soon as it passes `caps.download` bytes on disk.
    async fn make(addr: &GitAddr, options: &FetchOptions, deadline: Instant) -> Result<Self, SourceError> {
        let git = Git::new(&addr.url)?;
        let root = &options.staging;
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(root).map_err(|e| SourceError::io(root, e))?;
        // tempfile makes the directory 0700 under a fresh random name, and removes it with
        // everything in it when the guard drops: on success, on error and on a panic.
        let staging = tempfile::Builder::new().prefix("git-").tempdir_in(root).map_err(|e| SourceError::io(root, e))?;
        let staged = Self { git, staging, deadline };
        let args = [
            OsString::from("clone"),
            // No work tree: nothing is checked out, so no filter, hook or submodule runs.
            "--bare".into(),
            "--no-recurse-submodules".into(),
            // No template directory: no sample hooks or other files copied in.
            "--template=".into(),
            "--quiet".into(),
            // Everything after this is an address or a path, never an option.
            "--".into(),
            addr.url.clone().into(),
            staged.dir().as_os_str().to_owned(),
        ];
        let cap = options.caps.download;
        let clone = staged.git.run(&args, None, cap, deadline);
        // The clone's size on disk is watched while git writes it: a repository larger than
        // the cap stops the clone (git is killed) rather than filling the disk first.
        // Its size is also the clone's progress, for a terminal.
        let what = format!("the clone of {}", addr.url);
        let watch = async {
            loop {
                tokio::time::sleep(CLONE_WATCH).await;
                let Ok(size) = disk_size(staged.dir()) else { continue };
                options.progress.bytes(&what, size, None);
                if size > cap {
                    return;
                }
            }
        };
        tokio::select! {
            cloned = clone => cloned.map_err(|e| staged.git.failed("git clone", e, &addr.url))?,
            () = watch => return Err(SourceError::TooLarge { what: format!("the clone of {} on disk", addr.url), limit: cap, fix: None }),
        };
        let size = disk_size(staged.dir()).map_err(|e| SourceError::io(staged.dir(), e))?;
        if size > cap {
            return Err(SourceError::TooLarge { what: format!("the clone of {} ({size} bytes on disk)", addr.url), limit: cap, fix: None });
        }
        let attributes = staged.dir().join("info").join("attributes");
        std::fs::create_dir_all(staged.dir().join("info")).map_err(|e| SourceError::io(staged.dir(), e))?;
        std::fs::write(&attributes, EXACT_ATTRIBUTES).map_err(|e| SourceError::io(&attributes, e))?;
        Ok(staged)
    }

    /// The bare repository.
    fn dir(&self) -> &Path {
        self.staging.path()
    }

    /// The full commit id `rev` names in the clone.
    async fn commit(&self, rev: &str) -> Result<String, SourceError> {
        let spec = format!("{rev}^{{commit}}");
        let args = [OsString::from("rev-parse"), "--verify".into(), "--quiet".into(), spec.into()];
        let out = self.git.run(&args, Some(self.dir()), STDERR_CAP as u64, self.deadline).await.map_err(|e| match e {
            Failure::Exit(_) => {
                self.git.error(format!("rev `{}` names no commit there; check the branch, tag or commit id", text::one_line(rev, 100)))
            }
            other => self.git.failed("git rev-parse", other, rev),
        })?;
        let commit = String::from_utf8_lossy(&out).trim().to_owned();
        if !is_full_commit(&commit) {
            return Err(self.git.error(format!("git rev-parse answered `{}`, not a commit id", text::one_line(&commit, 100))));
        }
        Ok(commit)
    }
}

/// Bytes under `dir`, links not followed.
fn disk_size(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                pending.push(entry.path());
            } else {
                total += meta.len();
            }
        }
    }
    Ok(total)
}

/// Why one `git` run failed.
enum Failure {
    /// It exited unsuccessfully; its standard error, capped.
    Exit(String),
    /// Its standard output passed the cap.
    TooLarge(u64),
    /// The fetch's time ran out.
    Timeout,
    /// It could not be started or read.
    Io(std::io::Error),
}

/// The system `git`, hardened, for one repository URL.
struct Git {
    url: String,
    /// Whether plain `http://` may be used: only to a loopback host (the address parser
    /// refuses it otherwise; checked again here so this module stands on its own).
    http: bool,
}

impl Git {
    fn new(url: &str) -> Result<Self, SourceError> {
        let parsed = url::Url::parse(url).map_err(|e| SourceError::Git { url: url.to_owned(), reason: format!("not a URL: {e}") })?;
        let http = match parsed.scheme() {
            "https" | "ssh" | "file" => false,
            "http" if parsed.host_str().is_some_and(is_loopback) => true,
            other => {
                return Err(SourceError::Git {
                    url: url.to_owned(),
                    reason: format!("git over `{other}` is not allowed; use https://, ssh:// or file:// (http:// to loopback only)"),
                });
            }
        };
        Ok(Self { url: url.to_owned(), http })
    }

    fn error(&self, reason: String) -> SourceError {
        SourceError::Git { url: self.url.clone(), reason }
    }

    /// `step` failed on `what`, said as an error.
    fn failed(&self, step: &str, failure: Failure, what: &str) -> SourceError {
        match failure {
            Failure::Exit(stderr) => self.error(format!("{step} failed: {}", text::one_line(&stderr, STDERR_SHOWN))),
            Failure::TooLarge(limit) => SourceError::TooLarge { what: format!("{step} output for {what}"), limit, fix: None },
            Failure::Timeout => self.error(format!("{step} timed out and was stopped; raise the fetch timeout if the repository is slow")),
            Failure::Io(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.error("the `git` program was not found; install git (e.g. `apt-get install git`) to use git+ sources".into())
            }
            Failure::Io(e) => self.error(format!("{step}: {e}")),
        }
    }

    /// Run `git ARGS` (in the bare repository `git_dir` when given), its standard output
    /// read whole up to `cap` bytes, killed at `deadline`.
    async fn run(&self, args: &[OsString], git_dir: Option<&Path>, cap: u64, deadline: Instant) -> Result<Vec<u8>, Failure> {
        let mut command = Command::new("git");
        // Every inherited GIT_* variable (GIT_DIR, GIT_SSH_COMMAND, GIT_CONFIG_PARAMETERS,
        // GIT_EXEC_PATH, …) could redirect or reconfigure git: none reaches it.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("GIT_") {
                command.env_remove(key);
            }
        }
        command
            // Never ask for a user name or password on the terminal: fail instead.
            .env("GIT_TERMINAL_PROMPT", "0")
            // No system-wide configuration (its aliases, helpers, url rewrites).
            .env("GIT_CONFIG_NOSYSTEM", "1")
            // No user configuration either: only the settings below apply.
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            // No system-wide attributes file (the clone's own info/attributes rules).
            .env("GIT_ATTR_NOSYSTEM", "1");
        // No repository of the directory the host was started in either (its
        // `.git/config` could rewrite the URL with `insteadOf`, name a credential helper
        // to run...): git runs in an empty private directory and looks no further up.
        let cwd = tempfile::Builder::new().prefix("skillhost-git-").tempdir().map_err(Failure::Io)?;
        command.current_dir(cwd.path());
        if let Some(parent) = cwd.path().parent() {
            command.env("GIT_CEILING_DIRECTORIES", parent);
        }
        if let Some(dir) = git_dir {
            command.arg("--git-dir").arg(dir);
        }
        // Transports: none unless named. `ext::` (runs a command) and the rest are refused,
        // also for a submodule or a redirect.
        command.args(["-c", "protocol.allow=never"]);
        command.args(["-c", "protocol.https.allow=always", "-c", "protocol.file.allow=always", "-c", "protocol.ssh.allow=always"]);
        if self.http {
            // Plain HTTP only because the address is a loopback host.
            command.args(["-c", "protocol.http.allow=always"]);
        }
        command
            // A server may not redirect the clone to another place (or scheme).
            .args(["-c", "http.followRedirects=false"])
            // No hooks run, whatever the repository or a template holds.
            .args(["-c", "core.hooksPath=/dev/null"])
            // Every object received is checked for well-formedness (malformed trees, paths
            // such as `.git` or `..`) before it is stored.
            .args(["-c", "transfer.fsckObjects=true"])
            // ssh never prompts (a password, an unknown host key): it fails instead.
            .args(["-c", "core.sshCommand=ssh -o BatchMode=yes"]);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // git and what it starts (index-pack, remote helpers) in a group of their own,
            // killed together when the fetch gives up (timeout, cap): see [`Group`].
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(Failure::Io)?;
        // Declared after `child`, so dropped before it: the group is killed while its
        // leader is not yet reaped, so its id cannot name another process group by then.
        let group = Group::of(&child);
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(Failure::Io(std::io::Error::other("git's output pipes were not opened")));
        };
        let work = async {
            // Both pipes are read at once (a git blocked on a full stderr pipe would never
            // finish its stdout); past the cap on stdout, reading stops and git is killed.
            let (out, err) = tokio::try_join!(read_capped(stdout, cap), read_stderr(stderr))?;
            let status = child.wait().await.map_err(Failure::Io)?;
            group.reaped();
            if status.success() {
                Ok(out)
            } else {
                let stderr = String::from_utf8_lossy(&err).trim().to_owned();
                Err(Failure::Exit(if stderr.is_empty() { status.to_string() } else { stderr }))
            }
        };
        // On a timeout or a cap the future (and the child with it) is dropped: killed.
        tokio::time::timeout_at(deadline, work).await.unwrap_or(Err(Failure::Timeout))
    }
}

/// The process group a git command runs in. Killing `git` alone (as `kill_on_drop` does)
/// leaves the `index-pack` or remote helper it started writing into the staging folder
/// while that folder is removed, so a stopped fetch could leave files behind. When this is
/// dropped before git exited, every process of the group is killed and waited for (up to
/// [`GROUP_EXIT`]) before anything else is dropped.
struct Group {
    /// The group's id: git's pid while git is not reaped, 0 once it is.
    id: AtomicI32,
}

/// How long a killed group's processes are waited for.
const GROUP_EXIT: Duration = Duration::from_secs(2);

impl Group {
    fn of(child: &tokio::process::Child) -> Self {
        Self { id: AtomicI32::new(child.id().and_then(|pid| i32::try_from(pid).ok()).unwrap_or(0)) }
    }

    /// git exited and was reaped (its helpers exit before it does): nothing to kill, and
    /// its id may now be reused by others.
    fn reaped(&self) {
        self.id.store(0, Ordering::Relaxed);
    }

    /// Whether a process of group `id` is still alive (zombies, which write nothing, are
    /// not counted: those of git's helpers are reaped by whoever adopted them).
    fn alive(id: Pid) -> bool {
        let Ok(entries) = std::fs::read_dir("/proc") else { return false };
        entries.flatten().filter(|e| e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))).any(|e| {
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { return false };
            // `pid (comm) state ppid pgrp …`: comm may hold anything, so read after its last `)`.
            let mut fields = stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace()).into_iter().flatten();
            let state = fields.next();
            let pgrp = fields.nth(1);
            state != Some("Z") && pgrp == Some(&id.as_raw_nonzero().to_string())
        })
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let Some(id) = Pid::from_raw(self.id.swap(0, Ordering::Relaxed)) else { return };
        if rustix::process::kill_process_group(id, rustix::process::Signal::KILL).is_err() {
            return;
        }
        let until = Instant::now() + GROUP_EXIT;
        while Self::alive(id) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// All of `reader`, refused past `cap` bytes.
async fn read_capped(reader: impl AsyncRead + Unpin, cap: u64) -> Result<Vec<u8>, Failure> {
    let mut bytes = Vec::new();
    reader.take(cap + 1).read_to_end(&mut bytes).await.map_err(Failure::Io)?;
    if bytes.len() as u64 > cap {
        return Err(Failure::TooLarge(cap));
    }
    Ok(bytes)
}

/// The first [`STDERR_CAP`] bytes of `reader`, the rest read and dropped (so git never
/// blocks on the pipe).
async fn read_stderr(mut reader: impl AsyncRead + Unpin) -> Result<Vec<u8>, Failure> {
    let mut kept = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = reader.read(&mut chunk).await.map_err(Failure::Io)?;
        if n == 0 {
            return Ok(kept);
        }
        let room = STDERR_CAP.saturating_sub(kept.len()).min(n);
        kept.extend_from_slice(&chunk[..room]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_are_picked_in_rev_parse_order() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let c = "c".repeat(40);
        let listing = format!("{a}\trefs/heads/v1\n{b}\trefs/tags/v1\n{c}\trefs/tags/v1^{{}}\n{a}\tHEAD\n");
        assert_eq!(pick_ref(&listing, "v1"), Some(c.clone()), "a tag, peeled, before a branch");
        assert_eq!(pick_ref(&listing, "HEAD"), Some(a.clone()));
        assert_eq!(pick_ref(&listing, "refs/heads/v1"), Some(a.clone()));
        assert_eq!(pick_ref(&format!("{a}\trefs/heads/main\n"), "main"), Some(a));
        assert_eq!(pick_ref(&listing, "main"), None);
        assert_eq!(pick_ref("", "main"), None);
    }

    #[test]
    fn full_commits() {
        assert!(is_full_commit(&"0123456789abcdef".repeat(4)[..40]));
        assert!(is_full_commit(&"ab".repeat(32)));
        assert!(!is_full_commit("abc1234"));
        assert!(!is_full_commit(&"g".repeat(40)));
    }
}
