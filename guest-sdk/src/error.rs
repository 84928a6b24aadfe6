//! `ToolError`: why a tool did not produce an output.

use std::fmt;
use std::io;

/// Why a tool did not produce an output.
///
/// The host shows the message to the agent (and to a human for
/// [`ToolError::Denied`]), so say what went wrong and how to fix it:
/// `"column `price` not found; columns are: name, qty"` rather than
/// `"bad input"`.
///
/// `?` converts [`std::io::Error`] and [`serde_json::Error`] into a
/// `ToolError`; the [`files`](crate::files) helpers also name the path.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolError {
    /// The input was not valid for the tool: say which field and why.
    InvalidInput(String),
    /// The tool ran and failed: say what failed.
    Failed(String),
    /// The tool was refused something it needs (a file, a host): name what
    /// was refused so a human can decide to grant it.
    Denied(String),
}

impl ToolError {
    /// The input was not valid for the tool.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::InvalidInput(message.into())
    }

    /// The tool ran and failed.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }

    /// The tool was refused something it needs.
    pub fn denied(message: impl Into<String>) -> Self {
        Self::Denied(message.into())
    }

    /// The message, without the kind.
    pub fn message(&self) -> &str {
        match self {
            Self::InvalidInput(m) | Self::Failed(m) | Self::Denied(m) => m,
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidInput(m) => write!(f, "invalid input: {m}"),
            Self::Failed(m) => write!(f, "failed: {m}"),
            Self::Denied(m) => write!(f, "denied: {m}"),
        }
    }
}

impl std::error::Error for ToolError {}

/// Whether the sandbox, not the file system, refused an I/O operation.
///
/// A path outside every granted directory has no pre-opened directory to go
/// through (std reports it with this message and no specific kind); a path
/// inside one can still be refused (`..`, symlinks out, writing a read-only
/// grant).
pub(crate) fn is_refusal(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem)
        || error.to_string().contains("pre-opened file descriptor")
}

impl From<io::Error> for ToolError {
    /// A refusal by the sandbox (permission denied, read-only, outside every
    /// granted directory) becomes [`ToolError::Denied`], anything else
    /// [`ToolError::Failed`].
    fn from(error: io::Error) -> Self {
        if is_refusal(&error) { Self::Denied(error.to_string()) } else { Self::Failed(error.to_string()) }
    }
}

impl From<serde_json::Error> for ToolError {
    fn from(error: serde_json::Error) -> Self {
        Self::Failed(error.to_string())
    }
}
