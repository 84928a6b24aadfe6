//! Hard limits on a call ([`Limits`]), the overrides a manifest may ask for
//! ([`LimitsRequest`]), and the human-readable units they are written in.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// A byte count that prints in binary units (`64 MiB`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
        for (unit, size) in UNITS {
            if self.0 >= size && self.0.is_multiple_of(size) {
                return write!(f, "{} {unit}", self.0 / size);
            }
        }
        for (unit, size) in UNITS {
            if self.0 >= size {
                // One decimal, unless that would read as a whole number this size is not
                // ("1.0 MiB" for 1 MiB and a byte, beside a limit of "1 MiB"): then bytes.
                let shown = format!("{:.1}", self.0 as f64 / size as f64);
                if shown.ends_with(".0") {
                    break;
                }
                return write!(f, "{shown} {unit}");
            }
        }
        write!(f, "{} bytes", self.0)
    }
}

/// Why a size or a duration as written could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuantityError {
    /// No number where a size should start.
    #[error("`{text}` is not a size; write e.g. `64MiB`, `512KiB` or `4096`")]
    NotASize {
        /// The text as written.
        text: String,
    },
    /// A size unit not in the list.
    #[error("unknown size unit `{unit}` in `{text}`; use B, KiB, MiB, GiB, KB, MB or GB")]
    SizeUnit {
        /// The unit as written.
        unit: String,
        /// The text as written.
        text: String,
    },
    /// A size over `u64::MAX` bytes.
    #[error("size `{text}` is too large")]
    TooLarge {
        /// The text as written.
        text: String,
    },
    /// No number where a duration should start.
    #[error("`{text}` is not a duration; write e.g. `500ms`, `5s` or `2m`")]
    NotADuration {
        /// The text as written.
        text: String,
    },
    /// A bare number where a duration needs its unit.
    #[error("duration `{text}` needs a unit: ms, s, m, h or d")]
    NoUnit {
        /// The text as written.
        text: String,
    },
    /// A duration unit not in the list.
    #[error("unknown duration unit `{unit}` in `{text}`; use ms, s, m, h or d")]
    DurationUnit {
        /// The unit as written.
        unit: String,
        /// The text as written.
        text: String,
    },
}

/// Parse a size such as `64MiB`, `512 KiB`, `1GB` or `4096` (bytes).
///
/// Binary units (`KiB`, `MiB`, `GiB`) are powers of 1024; decimal ones (`KB`, `MB`, `GB`)
/// powers of 1000.
pub fn parse_size(text: &str) -> Result<u64, QuantityError> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let value: u64 = digits.parse().map_err(|_| QuantityError::NotASize { text: text.to_owned() })?;
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        other => return Err(QuantityError::SizeUnit { unit: other.to_owned(), text: text.to_owned() }),
    };
    value.checked_mul(scale).ok_or_else(|| QuantityError::TooLarge { text: text.to_owned() })
}

/// Parse a duration such as `500ms`, `2s`, `1m`, `3h` or `7d`.
pub fn parse_duration(text: &str) -> Result<Duration, QuantityError> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let value: u64 = digits.parse().map_err(|_| QuantityError::NotADuration { text: text.to_owned() })?;
    match unit.trim() {
        "ms" => Ok(Duration::from_millis(value)),
        "s" => Ok(Duration::from_secs(value)),
        "m" | "min" => Ok(Duration::from_secs(value.saturating_mul(60))),
        "h" => Ok(Duration::from_secs(value.saturating_mul(3600))),
        "d" => Ok(Duration::from_secs(value.saturating_mul(86400))),
        "" => Err(QuantityError::NoUnit { text: text.to_owned() }),
        other => Err(QuantityError::DurationUnit { unit: other.to_owned(), text: text.to_owned() }),
    }
}

/// Formats a duration the way limits are written: `2s`, `1500ms`.
pub fn fmt_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 { format!("{}s", d.as_secs()) } else { format!("{}ms", d.as_millis()) }
}

/// The limits one call of a skill runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time for one call, from its start to its output.
    pub timeout: Duration,
    /// Linear memory the skill's instance may hold, summed over its memories.
    pub memory: u64,
    /// Bytes of output (the JSON text a tool returns).
    pub output: u64,
    /// Calls of this skill that may run at once; more wait (within their deadline).
    pub concurrency: u32,
    /// Bytes a call may write to its log (stdout, stderr and `log`); the rest is dropped.
    pub log: u64,
}

impl Limits {
    /// Limits a skill gets when its manifest asks for nothing.
    pub const DEFAULT: Limits =
        Limits { timeout: Duration::from_secs(10), memory: 64 << 20, output: 1 << 20, concurrency: 4, log: 64 << 10 };

    /// The largest limits a manifest may ask for, unless the host configures others.
    pub const MAX: Limits = Limits { timeout: Duration::from_secs(120), memory: 1 << 30, output: 64 << 20, concurrency: 64, log: 1 << 20 };
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Limit overrides a manifest asks for (`[limits]` in skill.toml). Each must stay within
/// the host's maxima.
///
/// ```toml
/// [limits]
/// timeout = "5s"
/// memory = "128MiB"
/// output = "4MiB"
/// concurrency = 8
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsRequest {
    /// Wall-clock time per call, e.g. `"5s"`.
    #[serde(default, deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub timeout: Option<Duration>,
    /// Memory cap, e.g. `"128MiB"`.
    #[serde(default, deserialize_with = "de_size", serialize_with = "ser_size")]
    pub memory: Option<u64>,
    /// Output cap, e.g. `"4MiB"`.
    #[serde(default, deserialize_with = "de_size", serialize_with = "ser_size")]
    pub output: Option<u64>,
    /// Concurrent calls.
    #[serde(default)]
    pub concurrency: Option<u32>,
}

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    parse_duration(&text).map(Some).map_err(serde::de::Error::custom)
}

fn de_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Int(u64),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::Int(n) => Ok(Some(n)),
        Raw::Text(text) => parse_size(&text).map(Some).map_err(serde::de::Error::custom),
    }
}

fn ser_duration<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_str(&fmt_duration(*d)),
        None => s.serialize_none(),
    }
}

fn ser_size<S: serde::Serializer>(n: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match n {
        Some(n) => s.serialize_u64(*n),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_size_that_is_not_whole_never_reads_as_a_whole_number() {
        assert_eq!(ByteSize(1 << 20).to_string(), "1 MiB");
        assert_eq!(ByteSize((1 << 20) + 1).to_string(), "1048577 bytes");
        assert_eq!(ByteSize((2 << 20) - 1).to_string(), "2097151 bytes", "not \"2.0 MiB\"");
        assert_eq!(ByteSize((3 << 19) + 1).to_string(), "1.5 MiB");
        assert_eq!(ByteSize(1536).to_string(), "1.5 KiB");
        assert_eq!(ByteSize(1025).to_string(), "1025 bytes");
        let error = crate::CallError::new(
            crate::SkillName::new("sk").unwrap(),
            "t",
            crate::CallFailure::OutputLimit { size: (1 << 20) + 1, limit: 1 << 20 },
        );
        assert!(error.to_string().contains("output of 1048577 bytes exceeds the output limit of 1 MiB;"), "{error}");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("64 MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1KB"), Ok(1000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("64mb").unwrap_err().to_string().contains("unknown size unit"));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999GiB").unwrap_err().to_string().contains("too large"));
        assert_eq!(ByteSize(64 << 20).to_string(), "64 MiB");
        assert_eq!(ByteSize(1536).to_string(), "1.5 KiB");
        assert_eq!(ByteSize(10).to_string(), "10 bytes");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_duration("5").unwrap_err().to_string().contains("needs a unit"));
        assert!(parse_duration("5y").unwrap_err().to_string().contains("unknown duration unit"));
        assert_eq!(fmt_duration(Duration::from_secs(2)), "2s");
        assert_eq!(fmt_duration(Duration::from_millis(1500)), "1500ms");
    }
}
