//! Files in the directories the skill was granted.
//!
//! A skill asks for directories in its `skill.toml`:
//!
//! ```toml
//! [[capabilities.files]]
//! path = "."      # relative to the skill's data directory
//! mode = "ro"     # or "rw"
//! ```
//!
//! The host pre-opens each granted directory at [`DATA_DIR`] (`path = "."`)
//! or below it (`path = "reports"` is `/data/reports`); nothing else exists
//! for the skill. The helpers here take paths *relative to* [`DATA_DIR`],
//! refuse absolute paths and `..`, and turn the host's refusals into
//! [`ToolError::Denied`] errors that name the path and the missing grant.
//!
//! ```no_run
//! use skillhost_sdk::{files, ToolError};
//!
//! fn count_lines(file: &str) -> Result<usize, ToolError> {
//!     Ok(files::read_to_string(file)?.lines().count())
//! }
//! ```
//!
//! For anything the helpers do not cover, resolve the path with [`path`]
//! and call `std::fs` yourself; [`io_error`] gives the same messages.
//!
//! Off wasm, a skill's native unit tests point the helpers at a directory of
//! their choice with `with_data_dir` (only compiled off wasm).

use std::io;
use std::path::{Component, Path, PathBuf};

use crate::ToolError;

/// Where the skill's data directory is mounted inside the sandbox.
pub const DATA_DIR: &str = "/data";

#[cfg(not(target_arch = "wasm32"))]
thread_local! {
    static TEST_DATA_DIR: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) };
}

/// The data directory: [`DATA_DIR`], or the one set by [`with_data_dir`] off wasm.
fn data_dir() -> PathBuf {
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(dir) = TEST_DATA_DIR.with(|d| d.borrow().clone()) {
        return dir;
    }
    PathBuf::from(DATA_DIR)
}

/// Runs `f` with the data directory at `dir` on this thread: for a skill's
/// native unit tests (only compiled off wasm).
///
/// ```no_run
/// # fn main() -> Result<(), skillhost_sdk::ToolError> {
/// let text = skillhost_sdk::files::with_data_dir("tests/data", || {
///     skillhost_sdk::files::read_to_string("sample.csv")
/// })?;
/// # Ok(()) }
/// ```
#[cfg(not(target_arch = "wasm32"))]
pub fn with_data_dir<R>(dir: impl Into<PathBuf>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<PathBuf>);
    impl Drop for Restore {
        fn drop(&mut self) {
            TEST_DATA_DIR.with(|d| *d.borrow_mut() = self.0.take());
        }
    }
    let _restore = Restore(TEST_DATA_DIR.with(|d| d.borrow_mut().replace(dir.into())));
    f()
}

/// Resolves `relative` inside the data directory.
///
/// `""` and `"."` are the data directory itself. Absolute paths and paths
/// with `..` are refused with [`ToolError::Denied`]: a tool's input often
/// comes from an agent, and the path is checked here before the sandbox
/// checks it again.
pub fn path(relative: &str) -> Result<PathBuf, ToolError> {
    let mut resolved = data_dir();
    for component in Path::new(relative).components() {
        match component {
            Component::Normal(part) => resolved.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(ToolError::denied(format!(
                    "path `{relative}` uses `..`: paths are relative to the skill's data \
                     directory and cannot leave it"
                )));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(ToolError::denied(format!(
                    "path `{relative}` is absolute: give a path relative to the skill's data \
                     directory ({DATA_DIR})"
                )));
            }
        }
    }
    Ok(resolved)
}

/// What an operation wanted, for the grant hint in an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reading or listing: any grant covering the path will do.
    Read,
    /// Creating or changing: the grant must have `mode = "rw"`.
    Write,
}

/// Turns an I/O error on `relative` into a [`ToolError`] that names it.
///
/// Refusals by the sandbox become [`ToolError::Denied`] with a hint about the
/// `[[capabilities.files]]` grant the skill needs; everything else becomes
/// [`ToolError::Failed`].
pub fn io_error(relative: &str, access: Access, error: io::Error) -> ToolError {
    let shown = if relative.is_empty() { "." } else { relative };
    if crate::error::is_refusal(&error) {
        let mode = match access {
            Access::Read => "",
            Access::Write => " with mode = \"rw\"",
        };
        ToolError::denied(format!(
            "access to `{shown}` in the data directory was refused ({error}): the skill needs \
             a [[capabilities.files]] grant covering it{mode} in skill.toml"
        ))
    } else if error.kind() == io::ErrorKind::NotFound {
        // The sandbox reports a path no granted directory covers as missing too: tell
        // the two apart by whether the nearest existing directory above it is visible.
        match path(relative) {
            Ok(full) if !granted(&full) => {
                let dir = Path::new(shown).parent().map(|p| p.to_string_lossy().into_owned()).filter(|p| !p.is_empty());
                let dir = dir.as_deref().unwrap_or(".");
                let mode = match access {
                    Access::Read => "ro",
                    Access::Write => "rw",
                };
                ToolError::denied(format!(
                    "`{shown}` is outside the skill's granted files: no [[capabilities.files]] grant covers \
                     {}; add one to skill.toml ([[capabilities.files]] path = \"{dir}\" mode = \"{mode}\"), \
                     rebuild the skill and approve it again",
                    full.display()
                ))
            }
            _ => ToolError::failed(format!("`{shown}` does not exist in the data directory")),
        }
    } else {
        ToolError::failed(format!("`{shown}`: {error}"))
    }
}

/// Whether `full` (a path under the data directory) is inside a directory the skill was
/// granted: one of its ancestors up to the data directory is visible. The sandbox
/// shows only granted directories, so with no grant covering it not even the data
/// directory exists.
fn granted(full: &Path) -> bool {
    let root = data_dir();
    full.ancestors().skip(1).take_while(|dir| dir.starts_with(&root)).any(Path::is_dir)
}

/// Reads a UTF-8 text file.
pub fn read_to_string(relative: &str) -> Result<String, ToolError> {
    std::fs::read_to_string(path(relative)?).map_err(|e| io_error(relative, Access::Read, e))
}

/// Reads a file's bytes.
pub fn read(relative: &str) -> Result<Vec<u8>, ToolError> {
    std::fs::read(path(relative)?).map_err(|e| io_error(relative, Access::Read, e))
}

/// Writes a file, creating its parent directories and replacing any file
/// already there.
pub fn write(relative: &str, contents: impl AsRef<[u8]>) -> Result<(), ToolError> {
    let full = path(relative)?;
    if let Some(parent) = full.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io_error(relative, Access::Write, e))?;
    }
    std::fs::write(&full, contents).map_err(|e| io_error(relative, Access::Write, e))
}

/// Lists the names in a directory, sorted; directories end with `/`.
pub fn list(relative_dir: &str) -> Result<Vec<String>, ToolError> {
    let entries = std::fs::read_dir(path(relative_dir)?).map_err(|e| io_error(relative_dir, Access::Read, e))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_error(relative_dir, Access::Read, e))?;
        let mut name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            name.push('/');
        }
        names.push(name);
    }
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_data_dir_overrides_and_restores() {
        with_data_dir("/tmp/x", || assert_eq!(path("a").unwrap(), PathBuf::from("/tmp/x/a")));
        assert_eq!(path("a").unwrap(), PathBuf::from("/data/a"));
    }

    #[test]
    fn relative_paths_resolve_inside_the_data_dir() {
        assert_eq!(path("a/b.csv").unwrap(), data_dir().join("a/b.csv"));
        assert_eq!(path("./a/./b").unwrap(), data_dir().join("a/b"));
        assert_eq!(path("").unwrap(), data_dir());
        assert_eq!(path(".").unwrap(), data_dir());
    }

    #[test]
    fn escapes_are_denied_and_named() {
        for bad in ["..", "../etc/passwd", "a/../../b", "a/..", "/etc/passwd", "/data/x"] {
            let error = path(bad).unwrap_err();
            assert!(matches!(error, ToolError::Denied(_)), "{bad}: {error}");
            assert!(error.message().contains(bad), "{bad}: {error}");
        }
    }

    #[test]
    fn io_errors_name_the_path_and_the_grant() {
        let denied = io_error("x.csv", Access::Write, io::Error::from(io::ErrorKind::PermissionDenied));
        assert!(matches!(&denied, ToolError::Denied(m) if m.contains("x.csv") && m.contains("[[capabilities.files]]") && m.contains("rw")));
        // In a data directory the skill was granted (one that exists).
        let missing = with_data_dir(std::env::temp_dir(), || io_error("x.csv", Access::Read, io::Error::from(io::ErrorKind::NotFound)));
        assert!(matches!(&missing, ToolError::Failed(m) if m.contains("x.csv")));
    }

    #[test]
    fn a_missing_grant_is_told_from_a_missing_file() {
        let dir = std::env::temp_dir().join(format!("skillhost-sdk-files-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("granted")).unwrap();
        let not_found = || io::Error::from(io::ErrorKind::NotFound);
        with_data_dir(dir.join("granted"), || {
            let missing = io_error("sub/x.csv", Access::Read, not_found());
            assert!(matches!(&missing, ToolError::Failed(m) if m.contains("does not exist")), "{missing}");
        });
        // As the sandbox shows it with no grant: not even the data directory exists.
        with_data_dir(dir.join("not-granted"), || {
            let denied = io_error("notes/note.txt", Access::Read, not_found());
            let ToolError::Denied(message) = &denied else { panic!("{denied}") };
            assert!(message.contains("`notes/note.txt` is outside the skill's granted files"), "{message}");
            assert!(message.contains("path = \"notes\" mode = \"ro\"") && message.contains("approve it again"), "{message}");
            let denied = io_error("out.txt", Access::Write, not_found());
            assert!(denied.message().contains("path = \".\" mode = \"rw\""), "{denied}");
        });
        std::fs::remove_dir_all(dir).unwrap();
    }
}
