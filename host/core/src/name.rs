//! [`SkillName`]: the validated name of a skill, used as its id everywhere.

use std::fmt;

/// Longest allowed skill name, in bytes.
pub const MAX_NAME_LEN: usize = 64;

/// A skill name: `^[a-z][a-z0-9-]*[a-z0-9]$`, at most 64 bytes.
///
/// ```
/// # use skillhost_core::SkillName;
/// assert!(SkillName::new("csv-summary").is_ok());
/// assert!(SkillName::new("CSV").is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct SkillName(String);

/// Why a string is not a valid skill name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid skill name `{name}`: {reason}; use lowercase letters, digits and inner hyphens, e.g. `my-skill`")]
pub struct NameError {
    /// The rejected name.
    pub name: String,
    /// What rule it breaks.
    pub reason: &'static str,
}

impl SkillName {
    /// Validate `name`.
    pub fn new(name: impl Into<String>) -> Result<Self, NameError> {
        let name = name.into();
        let reason = if name.is_empty() {
            Some("it is empty")
        } else if name.len() > MAX_NAME_LEN {
            Some("it is longer than 64 bytes")
        } else if !name.as_bytes()[0].is_ascii_lowercase() {
            Some("it must start with a lowercase letter")
        } else if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
            Some("only a-z, 0-9 and `-` are allowed")
        } else if name.len() < 2 || name.ends_with('-') {
            Some("it must end with a letter or digit and be at least two characters")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(NameError { name, reason }),
            None => Ok(Self(name)),
        }
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SkillName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for SkillName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let table = [
            ("ab", true),
            ("csv-summary", true),
            ("a1", true),
            ("a", false),
            ("", false),
            ("1abc", false),
            ("abc-", false),
            ("-abc", false),
            ("Abc", false),
            ("a_b", false),
            ("a.b", false),
            ("naïve", false),
        ];
        for (name, ok) in table {
            assert_eq!(SkillName::new(name).is_ok(), ok, "{name}");
        }
        assert!(SkillName::new("a".repeat(64)).is_ok());
        assert!(SkillName::new("a".repeat(65)).is_err());
    }
}
