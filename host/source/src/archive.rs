//! Skill folders as archives: [`pack_tar_gz`] makes the one layout skillhost publishes
//! (deterministic bytes), [`unpack`] reads a `.tar.gz` or `.zip` into memory under the
//! archive rules, so nothing reaches the disk before it is checked:
//!
//! - only regular files and folders: a symlink, hard link, device or FIFO is refused;
//! - every name is a plain relative path: no absolute path, no `..`, no backslash, no
//!   control character, no duplicate;
//! - at most [`Caps::files`] entries and [`Caps::unpacked`] bytes unpacked, counted as the
//!   bytes come out of the decompressor (a zip or gzip bomb stops at the cap, whatever the
//!   archive declares);
//! - hidden names (`.git/`, `.DS_Store`, `__MACOSX/`) are left out, as a skill's content
//!   hash leaves them out;
//! - when every entry sits under one top-level folder and none of a skill's own files is at
//!   the root, that folder is the skill (`NAME/SKILL.md`).

use std::collections::BTreeMap;
use std::io::{Cursor, Read};

use crate::Caps;
use crate::error::SourceError;

/// Packing lives in skillhost-package, beside the well-known index format that also packs;
/// reading back is here.
pub use skillhost_package::pack_tar_gz;

/// Files a skill is recognised by at the root of an archive.
const ROOT_MARKERS: [&str; 2] = ["SKILL.md", "skill.toml"];

/// The files of the archive `bytes` (`.tar.gz` or `.zip`, told by its first bytes), named
/// `what` in errors, under the archive rules and `caps`.
pub fn unpack(bytes: &[u8], what: &str, caps: &Caps) -> Result<BTreeMap<String, Vec<u8>>, SourceError> {
    let mut out = Unpacked { what, caps, files: BTreeMap::new(), entries: 0, total: 0 };
    if bytes.starts_with(&[0x1f, 0x8b]) {
        out.tar(flate2::read::GzDecoder::new(bytes))?;
    } else if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        out.zip(bytes)?;
    } else {
        return Err(out.refuse("(the archive)", "not a .tar.gz or .zip archive"));
    }
    let files = strip_single_folder(out.files);
    if files.is_empty() {
        return Err(SourceError::Archive { archive: what.to_owned(), entry: String::new(), reason: "the archive holds no files".into() });
    }
    Ok(files)
}

/// The files read so far, against the caps.
struct Unpacked<'a> {
    what: &'a str,
    caps: &'a Caps,
    files: BTreeMap<String, Vec<u8>>,
    entries: usize,
    total: u64,
}

impl Unpacked<'_> {
    fn refuse(&self, entry: &str, reason: impl Into<String>) -> SourceError {
        SourceError::Archive { archive: self.what.to_owned(), entry: entry.escape_debug().to_string(), reason: reason.into() }
    }

    fn too_large(&self) -> SourceError {
        SourceError::TooLarge { what: format!("the files of {} unpacked", self.what), limit: self.caps.unpacked, fix: None }
    }

    /// Count one entry against the entry cap.
    fn count(&mut self, entry: &str) -> Result<(), SourceError> {
        self.entries += 1;
        if self.entries > self.caps.files {
            return Err(self.refuse(entry, format!("the archive holds more than {} entries", self.caps.files)));
        }
        Ok(())
    }

    /// Read one file's bytes from `reader`, at most what is left of the unpacked cap.
    fn add(&mut self, raw: &[u8], reader: impl Read) -> Result<(), SourceError> {
        let name = std::str::from_utf8(raw).map_err(|_| self.refuse(&String::from_utf8_lossy(raw), "a name that is not UTF-8"))?;
        let Some(path) = plain_path(name).map_err(|reason| self.refuse(name, reason))? else {
            return Ok(());
        };
        let left = self.caps.unpacked - self.total;
        let mut bytes = Vec::new();
        reader.take(left + 1).read_to_end(&mut bytes).map_err(|e| self.refuse(name, format!("cannot be read: {e}")))?;
        if bytes.len() as u64 > left {
            return Err(self.too_large());
        }
        self.total += bytes.len() as u64;
        if self.files.insert(path, bytes).is_some() {
            return Err(self.refuse(name, "the name appears twice"));
        }
        Ok(())
    }

    fn tar(&mut self, reader: impl Read) -> Result<(), SourceError> {
        let mut archive = tar::Archive::new(reader);
        let entries = archive.entries().map_err(|e| self.refuse("(the archive)", format!("not a tar archive: {e}")))?;
        for entry in entries {
            let entry = entry.map_err(|e| self.refuse("(the archive)", format!("a damaged entry: {e}")))?;
            let raw = entry.path_bytes().into_owned();
            let name = String::from_utf8_lossy(&raw).into_owned();
            self.count(&name)?;
            match entry.header().entry_type() {
                tar::EntryType::Regular | tar::EntryType::Continuous => {
                    if entry.size() > self.caps.unpacked - self.total {
                        return Err(self.too_large());
                    }
                    self.add(&raw, entry)?;
                }
                tar::EntryType::Directory => {
                    plain_path(name.trim_end_matches('/')).map_err(|reason| self.refuse(&name, reason))?;
                }
                // Extended headers a tar carries for the entry that follows (long names,
                // timestamps) are read by the tar reader itself and never reach here as
                // files; a global one sets defaults and holds no file.
                tar::EntryType::XGlobalHeader => {}
                tar::EntryType::Symlink => return Err(self.refuse(&name, "a symbolic link (an archive holds files and folders only)")),
                tar::EntryType::Link => return Err(self.refuse(&name, "a hard link (an archive holds files and folders only)")),
                other => return Err(self.refuse(&name, format!("a special entry ({other:?}); an archive holds files and folders only"))),
            }
        }
        Ok(())
    }

    fn zip(&mut self, bytes: &[u8]) -> Result<(), SourceError> {
        let mut archive =
            zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| self.refuse("(the archive)", format!("not a zip archive: {e}")))?;
        for i in 0..archive.len() {
            let file = archive.by_index(i).map_err(|e| self.refuse("(the archive)", format!("entry {i} cannot be read: {e}")))?;
            let raw = file.name_raw().to_vec();
            let name = String::from_utf8_lossy(&raw).into_owned();
            self.count(&name)?;
            if file.is_symlink() {
                return Err(self.refuse(&name, "a symbolic link (an archive holds files and folders only)"));
            }
            if file.encrypted() {
                return Err(self.refuse(&name, "an encrypted entry"));
            }
            if file.is_dir() {
                plain_path(name.trim_end_matches('/')).map_err(|reason| self.refuse(&name, reason))?;
                continue;
            }
            if !file.is_file() {
                return Err(self.refuse(&name, "a special entry; an archive holds files and folders only"));
            }
            self.add(&raw, file)?;
        }
        Ok(())
    }
}

/// `name` as a plain relative path (a leading `./` dropped), `None` for a hidden entry left
/// out, or why it is refused.
fn plain_path(name: &str) -> Result<Option<String>, &'static str> {
    if name.starts_with('/') {
        return Err("an absolute path");
    }
    if name.contains('\\') {
        return Err("a backslash in a name (names are `/`-separated)");
    }
    if name.chars().any(char::is_control) {
        return Err("a control character in a name");
    }
    let name = name.trim_start_matches("./");
    let parts: Vec<&str> = name.split('/').collect();
    if parts.contains(&"..") {
        return Err("a `..` in a path");
    }
    if name.is_empty() || parts.iter().any(|p| p.is_empty() || *p == ".") {
        return Err("an empty or `.` part in a path");
    }
    if parts.iter().any(|p| p.starts_with('.') || *p == "__MACOSX") {
        return Ok(None);
    }
    Ok(Some(name.to_owned()))
}

/// When all of `files` sit under one folder and no skill marker is at the root, the files
/// of that folder.
fn strip_single_folder(files: BTreeMap<String, Vec<u8>>) -> BTreeMap<String, Vec<u8>> {
    let at_root = files.keys().any(|p| !p.contains('/') || ROOT_MARKERS.contains(&p.as_str()));
    let first = files.keys().next().and_then(|p| p.split_once('/')).map(|(top, _)| top.to_owned());
    match first {
        Some(top) if !at_root && files.keys().all(|p| p.starts_with(&format!("{top}/"))) => {
            files.into_iter().map(|(p, bytes)| (p[top.len() + 1..].to_owned(), bytes)).collect()
        }
        _ => files,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        pairs.iter().map(|(p, c)| (p.to_string(), c.as_bytes().to_vec())).collect()
    }

    #[test]
    fn packing_is_deterministic_and_round_trips() {
        let skill = files(&[("SKILL.md", "---\nname: x\n---\n"), ("scripts/run.sh", "echo hi\n"), (&"d/".repeat(80), "long")]);
        let skill: BTreeMap<_, _> = skill.into_iter().map(|(p, b)| (p.trim_end_matches('/').to_owned(), b)).collect();
        let packed = pack_tar_gz(&skill);
        assert_eq!(packed, pack_tar_gz(&skill));
        assert_eq!(unpack(&packed, "t", &Caps::default()).unwrap(), skill);
    }

    #[test]
    fn one_top_folder_is_the_skill() {
        let packed = pack_tar_gz(&files(&[("x/SKILL.md", "a"), ("x/scripts/a.sh", "b")]));
        assert_eq!(unpack(&packed, "t", &Caps::default()).unwrap(), files(&[("SKILL.md", "a"), ("scripts/a.sh", "b")]));
        let packed = pack_tar_gz(&files(&[("SKILL.md", "a"), ("x/a.sh", "b")]));
        assert_eq!(unpack(&packed, "t", &Caps::default()).unwrap().len(), 2);
    }

    #[test]
    fn names_must_be_plain() {
        for bad in ["/etc/passwd", "../x", "a/../../x", "a\\..\\x", "a\u{1b}[2J", "a//b", "./"] {
            assert!(plain_path(bad).is_err(), "{bad}");
        }
        assert_eq!(plain_path("./a/b").unwrap().as_deref(), Some("a/b"));
        assert_eq!(plain_path(".git/config").unwrap(), None);
    }

    #[test]
    fn caps_bind_on_unpacked_bytes() {
        let big = files(&[("SKILL.md", &"a".repeat(10_000))]);
        let caps = Caps { unpacked: 9_999, ..Caps::default() };
        assert!(matches!(unpack(&pack_tar_gz(&big), "t", &caps), Err(SourceError::TooLarge { .. })));
        let many: BTreeMap<_, _> = (0..11).map(|i| (format!("f{i}"), vec![])).collect();
        let caps = Caps { files: 10, ..Caps::default() };
        assert!(unpack(&pack_tar_gz(&many), "t", &caps).is_err());
        assert!(unpack(b"plain text", "t", &Caps::default()).is_err());
    }
}
