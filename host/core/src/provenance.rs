//! [`Provenance`]: where an installed skill's bytes came from, pinned, and whether a
//! signature over them was verified. The registry keeps it beside the content hash it
//! describes; `show` and the approval request display it. It moves no trust: an approval
//! stays bound to the content hash and capability digest.

use serde::{Deserialize, Serialize};

use crate::text::one_line;

/// Longest field of a provenance line, in characters.
const FIELD_CAP: usize = 200;

/// Where a skill's bytes came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// The source as asked for (`oci://…:TAG`, `git+URL#…&rev=BRANCH`, `https://…#skill=NAME`).
    pub source: String,
    /// The address that fetches exactly these bytes (`oci://…@sha256:…`, `git+URL#…&rev=COMMIT`).
    pub pinned: String,
    /// What the bytes were checked against: the OCI manifest's or the index artifact's
    /// `sha256:…`, or the git commit.
    pub digest: String,
    /// Whether a signature was verified.
    pub signature: SignatureStatus,
}

/// Whether a signature over a fetched skill was verified.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum SignatureStatus {
    /// A cosign-format signature verified with the public key of this fingerprint
    /// (`sha256:` of the key's DER encoding).
    Verified {
        /// The key's fingerprint.
        key: String,
    },
    /// No key was asked for, so no signature was checked.
    NotChecked,
}

impl Provenance {
    /// The lines `show` and an approval request display, the source's text escaped.
    pub fn lines(&self) -> Vec<String> {
        let signature = match &self.signature {
            SignatureStatus::Verified { key } => format!("verified with key {}", one_line(key, FIELD_CAP)),
            SignatureStatus::NotChecked => "not checked (no key asked for)".to_owned(),
        };
        vec![
            format!("source: {}", one_line(&self.source, FIELD_CAP)),
            format!("pinned: {}", one_line(&self.pinned, FIELD_CAP)),
            format!("digest: {}", one_line(&self.digest, FIELD_CAP)),
            format!("signature: {signature}"),
        ]
    }
}
