//! `skills.lock`: the exact set of remote skills a team shares, in TOML.
//!
//! ```toml
//! version = 1
//!
//! [[skill]]
//! name = "hello"
//! source = "oci://registry.example.com/skills/hello:1.0"
//! digest = "sha256:…"   # the OCI manifest, the index artifact, or the git commit
//! content = "…"         # the content hash of the installed files
//! key = "sha256:…"      # when a signature was verified: the key's fingerprint
//! ```
//!
//! `source` is what was asked for (a tag, a branch, an index entry); `digest` pins it.
//! `skillhost sync` installs exactly the pinned bytes and refuses any whose digest or
//! content hash is not the locked one; only `sync --update` moves a pin. The file is
//! rewritten whole and atomically (a temporary file renamed over it), sorted by name, so
//! a diff of it reads as what changed.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::address::SourceAddr;
use crate::error::SourceError;

/// The lockfile's name, beside a skills directory.
pub const LOCK_FILE: &str = "skills.lock";

/// The format version this host writes and reads.
const VERSION: u32 = 1;

/// Largest lockfile read, in bytes.
pub const MAX_LOCK_BYTES: u64 = 1 << 20;

/// The pinned set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lockfile {
    version: u32,
    /// The skills, sorted by name.
    #[serde(default, rename = "skill")]
    pub skills: Vec<Locked>,
}

/// One pinned skill.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Locked {
    /// The skill's name.
    pub name: String,
    /// The source as asked for.
    pub source: String,
    /// What pins it: the OCI manifest's or the index artifact's `sha256:…`, or the commit.
    pub digest: String,
    /// The content hash of its files.
    pub content: String,
    /// The fingerprint of the key whose signature was verified, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl Locked {
    /// Its source, parsed.
    pub fn address(&self) -> Result<SourceAddr, SourceError> {
        self.source.parse()
    }

    /// The address that fetches exactly the pinned bytes.
    pub fn pinned(&self) -> Result<SourceAddr, SourceError> {
        Ok(self.address()?.pinned(&self.digest))
    }
}

impl Lockfile {
    /// An empty lockfile.
    pub fn new() -> Self {
        Self { version: VERSION, skills: Vec::new() }
    }

    /// The lockfile at `path`; an empty one when there is none.
    pub fn read(path: &Path) -> Result<Self, SourceError> {
        let bytes = match crate::http::read_file_capped(path, "the lockfile", MAX_LOCK_BYTES) {
            Ok(bytes) => bytes,
            Err(SourceError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => return Ok(Self::new()),
            Err(e) => return Err(e),
        };
        let bad = |reason: String| SourceError::Lock { path: path.to_owned(), reason };
        let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8".into()))?;
        let lock: Lockfile = toml::from_str(&text).map_err(|e| bad(format!("not a skills.lock: {e}")))?;
        if lock.version != VERSION {
            return Err(bad(format!("version {} is not the version {VERSION} this skillhost reads; upgrade skillhost", lock.version)));
        }
        let mut names: Vec<&str> = lock.skills.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        if let Some(pair) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(bad(format!("skill `{}` is locked twice; keep one entry", pair[0])));
        }
        for skill in &lock.skills {
            skillhost_core::SkillName::new(&skill.name).map_err(|e| bad(format!("skill `{}`: {e}", skill.name.escape_debug())))?;
            let source = skill.address().map_err(|e| bad(format!("skill `{}`: {e}", skill.name)))?;
            check_pin(&source, &skill.digest).map_err(|form| {
                bad(format!(
                    "skill `{}`: its digest {} is not {form}, and a lock pins with a digest only (it becomes part of the address fetched); \
                     restore the line with `skillhost install {}`",
                    skill.name,
                    skillhost_core::text::quote(&skill.digest, 100),
                    skill.source
                ))
            })?;
        }
        Ok(lock)
    }

    /// Write it to `path` atomically: a temporary file beside it, renamed over it.
    pub fn write(&self, path: &Path) -> Result<(), SourceError> {
        let mut lock = self.clone();
        lock.skills.sort_by(|a, b| a.name.cmp(&b.name));
        let body = toml::to_string(&lock).map_err(|e| SourceError::Lock { path: path.to_owned(), reason: e.to_string() })?;
        let text = format!(
            "# skills.lock: the remote skills of this set, pinned. Written by `skillhost install` and\n\
             # `skillhost sync --update`; `skillhost sync` installs exactly these.\n{body}"
        );
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let temp = tempfile_in(dir, path)?;
        std::fs::write(&temp, text).map_err(|e| SourceError::io(&temp, e))?;
        std::fs::rename(&temp, path).map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            SourceError::io(path, e)
        })
    }

    /// The entry of `name`.
    pub fn get(&self, name: &str) -> Option<&Locked> {
        self.skills.iter().find(|s| s.name == name)
    }

    /// Add `locked`, replacing the entry of its name.
    pub fn upsert(&mut self, locked: Locked) {
        self.skills.retain(|s| s.name != locked.name);
        self.skills.push(locked);
        self.skills.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// Drop the entry of `name`; whether there was one.
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.skills.len();
        self.skills.retain(|s| s.name != name);
        before != self.skills.len()
    }
}

/// Whether `digest` is what pins `source`: `sha256:` and 64 lower-case hex digits for an OCI
/// manifest or an index artifact, a full commit id (40 or 64 lower-case hex digits) for git;
/// else the form it should have. [`Locked::pinned`] puts it into the address fetched, so
/// anything else (a path, a query, an option to git) is refused here.
fn check_pin(source: &SourceAddr, digest: &str) -> Result<(), &'static str> {
    let hex = |text: &str, lengths: &[usize]| lengths.contains(&text.len()) && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    match source {
        SourceAddr::Oci(_) | SourceAddr::Index(_) => match digest.strip_prefix("sha256:") {
            Some(rest) if hex(rest, &[64]) => Ok(()),
            _ => Err("`sha256:` and 64 lower-case hex digits"),
        },
        SourceAddr::Git(_) if hex(digest, &[40, 64]) => Ok(()),
        SourceAddr::Git(_) => Err("a full commit id (40 or 64 lower-case hex digits)"),
    }
}

/// A fresh temporary path beside `path`, for an atomic rewrite.
fn tempfile_in(dir: &Path, path: &Path) -> Result<PathBuf, SourceError> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| LOCK_FILE.to_owned());
    Ok(dir.join(format!(".{name}.{}.tmp", std::process::id())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> Locked {
        Locked {
            name: name.into(),
            source: format!("oci://127.0.0.1:5000/skills/{name}:1"),
            digest: format!("sha256:{}", "a".repeat(64)),
            content: "c".repeat(64),
            key: None,
        }
    }

    #[test]
    fn round_trips_sorted_and_atomic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        assert_eq!(Lockfile::read(&path).unwrap(), Lockfile::new());
        let mut lock = Lockfile::new();
        lock.upsert(entry("bb"));
        lock.upsert(entry("aa"));
        lock.upsert(Locked { key: Some("sha256:k".into()), ..entry("bb") });
        lock.write(&path).unwrap();
        let read = Lockfile::read(&path).unwrap();
        assert_eq!(read.skills.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["aa", "bb"]);
        assert_eq!(read.get("bb").unwrap().key.as_deref(), Some("sha256:k"));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");
    }

    #[test]
    fn a_bad_lockfile_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        for text in [
            "version = 2\n",
            "version = 1\n[[skill]]\nname = \"../x\"\nsource = \"oci://r/a:1\"\ndigest = \"d\"\ncontent = \"c\"\n",
            "version = 1\n[[skill]]\nname = \"x\"\nsource = \"/tmp/x\"\ndigest = \"d\"\ncontent = \"c\"\n",
            "version = 1\n[[skill]]\nname = \"x\"\nsource = \"oci://r/a:1\"\ndigest = \"d\"\ncontent = \"c\"\n[[skill]]\nname = \"x\"\nsource = \"oci://r/a:1\"\ndigest = \"d\"\ncontent = \"c\"\n",
            "version = 1\nextra = 1\n",
        ] {
            std::fs::write(&path, text).unwrap();
            assert!(matches!(Lockfile::read(&path), Err(SourceError::Lock { .. })), "{text}");
        }
    }

    #[test]
    fn a_pin_is_only_a_digest() {
        // `pinned()` puts the digest into the address fetched: a lock line may not use it to
        // steer the fetch (another path or host, an option to git) instead of naming a digest.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let line = |source: &str, digest: &str| {
            format!("version = 1\n[[skill]]\nname = \"xy\"\nsource = \"{source}\"\ndigest = \"{digest}\"\ncontent = \"c\"\n")
        };
        let hex = "a".repeat(64);
        for (source, digest) in [
            ("oci://r.io/a:1", format!("sha256:{hex}/../../../b/manifests/latest")),
            ("oci://r.io/a:1", "latest".to_owned()),
            ("oci://r.io/a:1", format!("sha256:{}", "A".repeat(64))),
            ("git+https://h.example/r.git#rev=main", "--upload-pack=touch /tmp/x".to_owned()),
            ("git+https://h.example/r.git#rev=main", "main".to_owned()),
            ("https://h.example/#skill=x", "sha256:00".to_owned()),
        ] {
            std::fs::write(&path, line(source, &digest)).unwrap();
            let error = Lockfile::read(&path).unwrap_err().to_string();
            assert!(error.contains("digest"), "{source} {digest}: {error}");
        }
        for (source, digest) in [
            ("oci://r.io/a:1", format!("sha256:{hex}")),
            ("git+https://h.example/r.git#rev=main", "b".repeat(40)),
            ("https://h.example/#skill=x", format!("sha256:{hex}")),
        ] {
            std::fs::write(&path, line(source, &digest)).unwrap();
            Lockfile::read(&path).unwrap_or_else(|e| panic!("{source} {digest}: {e}"));
        }
    }
}
