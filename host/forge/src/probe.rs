//! What a submission's code runs with before a human approved it: the probe grant, the
//! runtimes that hold no secret and reach no network, which `[[tests]]` must wait for
//! approval, and the scrubbing of secret values from everything reported back.
//!
//! Everything the forge runs (a Python skill's pytest and handshake, listing a skill's
//! tools, its `[[tests]]` cases) runs under [`Grant::probe`]: one fresh, empty scratch dir
//! at `/data` instead of its data dirs, no network, no secrets, a short deadline. It runs
//! on the probe runtime [`Forge::new`](crate::Forge::new) is given, not the registry's:
//! the facade makes one for the forge alone, whose WebAssembly side has no secret source
//! and whose sandbox side has no secret source and no egress shim, so not even a mistake in
//! a grant could hand a submission the host's secrets.
//!
//! A skill that asks for network or secrets cannot be tested meaningfully without them:
//! its `[[tests]]` are not run by the forge but reported as `runs_after_approval`; once a
//! human approved the skill, `skillhost test NAME` ([`Forge::test_approved`](crate::Forge::test_approved))
//! runs them through the registry, with its real grant.

use std::path::Path;
use std::sync::Arc;

use skillhost_core::text::SecretRedactor;
use skillhost_core::{DataKey, Grant, GrantError, Policy, SkillCode, SkillManifest};

use crate::error::Failure;

/// The grant `manifest`'s `code` runs with before approval, over the empty dir `scratch`
/// ([`Grant::probe_for`]).
pub(crate) fn grant(manifest: &SkillManifest, code: &SkillCode, scratch: &Path) -> Result<Grant, GrantError> {
    Ok(Grant::new(manifest, &Policy::new(scratch), &DataKey::named(&manifest.name))?.probe_for(code, scratch))
}

/// The values of the host's secrets, read when a report is made.
pub type SecretValues = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// Replaces secret values in what the forge reports (text, JSON, failures), with
/// [`SecretRedactor`].
pub(crate) struct Redactor {
    secrets: SecretRedactor,
}

/// What a secret's value is replaced with.
pub use skillhost_core::text::REDACTED;

impl Redactor {
    pub fn new(source: Option<&SecretValues>) -> Self {
        Self { secrets: SecretRedactor::new(source.map(|s| s()).unwrap_or_default()) }
    }

    pub fn text(&self, text: &mut String) {
        self.secrets.text(text);
    }

    pub fn json(&self, value: &mut serde_json::Value) {
        match value {
            serde_json::Value::String(s) => self.text(s),
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| self.json(v)),
            serde_json::Value::Object(map) => {
                let keys: Vec<String> = map.keys().cloned().collect();
                for key in keys {
                    let mut entry = map.remove(&key).unwrap_or_default();
                    self.json(&mut entry);
                    let mut key = key;
                    self.text(&mut key);
                    map.insert(key, entry);
                }
            }
            _ => {}
        }
    }

    pub fn failure(&self, failure: &mut Failure) {
        if self.secrets.is_empty() {
            return;
        }
        match failure {
            Failure::Stage { refused } => {
                for r in refused {
                    self.text(&mut r.file);
                    self.text(&mut r.rule);
                }
            }
            Failure::Manifest { error } | Failure::Load { error } => self.text(error),
            Failure::Build(build) => {
                for d in &mut build.diagnostics {
                    self.diagnostic(d);
                }
                self.text(&mut build.output_tail);
                if let Some(reason) = &mut build.reason {
                    self.text(reason);
                }
            }
            Failure::Tests { failures } => {
                for f in failures {
                    self.text(&mut f.tool);
                    self.json(&mut f.input);
                    self.json(&mut f.expected);
                    self.json(&mut f.actual);
                }
            }
            Failure::Python { tests, error } => {
                self.text(error);
                if let Some(run) = tests {
                    self.text(&mut run.output);
                }
            }
        }
    }

    pub fn diagnostic(&self, d: &mut crate::Diagnostic) {
        self.text(&mut d.message);
        if let Some(rendered) = &mut d.rendered {
            self.text(rendered);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_values_are_replaced_everywhere() {
        let source: SecretValues = Arc::new(|| vec!["s3cr3t-value".into(), "abc".into(), "s3cr3t".into()]);
        let redactor = Redactor::new(Some(&source));
        let mut text = "got s3cr3t-value and s3cr3t and abc".to_owned();
        redactor.text(&mut text);
        assert_eq!(text, format!("got {REDACTED} and {REDACTED} and abc"));
        let mut value = serde_json::json!({"error": "key=s3cr3t-value", "list": ["s3cr3t"], "s3cr3t": 1});
        redactor.json(&mut value);
        assert!(!value.to_string().contains("s3cr3t"), "{value}");
    }
}
