//! The optional generator, for hosts used without an agent: a model behind an
//! OpenAI-compatible chat-completions endpoint (`[forge.llm]` in the host's config, its
//! key a host secret) drives the forge's whole loop — requirements → generate → build and
//! test in the forge → regenerate with the forge's diagnostics → … → a human approves.
//!
//! The model is treated like any agent: what it writes goes through the same forge
//! (stage rules, sandboxed build, `[[tests]]`, attempt count) and is installed for
//! review, never approved here. Its answer must be one JSON object,
//! `{"files": {"PATH": "CONTENT", ...}}`; an answer that is not is sent back with the
//! reason, as a failed build would be.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{Failure, Forge, ForgeError, Forged, Language, Submission};

/// `[forge.llm]`: where the model is.
///
/// ```toml
/// [forge.llm]
/// endpoint = "https://api.openai.com/v1"   # `/chat/completions` is appended
/// model = "gpt-4.1-mini"
/// secret = "openai"                         # `skillhost secret set openai`; none for a local server
/// timeout = "120s"                          # one completion
/// rounds = 3                                # generate → test rounds before giving up
/// ```
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmConfig {
    /// Base URL of the API (`http` or `https`).
    pub endpoint: String,
    /// The model to ask.
    pub model: String,
    /// The host secret holding the API key, sent as `Authorization: Bearer KEY`.
    #[serde(default)]
    pub secret: Option<String>,
    /// How long one completion may take. Default: 120 s.
    #[serde(default = "default_timeout", with = "duration_text")]
    pub timeout: Duration,
    /// Generate → test rounds before giving up; the forge's attempt count (default 3)
    /// still applies. Default: 3.
    #[serde(default = "default_rounds")]
    pub rounds: u32,
}

fn default_timeout() -> Duration {
    Duration::from_secs(120)
}

fn default_rounds() -> u32 {
    3
}

mod duration_text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        skillhost_core::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct Request {
    /// The skill's name.
    pub name: String,
    /// Its language.
    pub language: Language,
    /// What it should do, in the user's words.
    pub requirements: String,
}

/// Where the loop is, for progress reports.
#[derive(Clone, Debug)]
pub enum Step {
    /// Waiting for the model's answer of round `round`.
    Asking {
        /// The round, from 1.
        round: u32,
    },
    /// The forge is at `stage` with round `round`'s files.
    Forging {
        /// The round.
        round: u32,
        /// The forge's stage.
        stage: String,
    },
    /// Round `round` failed; the reason goes back to the model.
    Rejected {
        /// The round.
        round: u32,
        /// Why, one line.
        reason: String,
    },
}

/// A skill the model wrote and the forge built, tested and installed.
#[derive(Clone, Debug, Serialize)]
pub struct Generated {
    /// What the forge installed (its `state` says whether it waits for approval).
    pub forged: Forged,
    /// The round that succeeded, from 1.
    pub rounds: u32,
}

/// Why the generator produced no skill.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenerateError {
    /// The endpoint could not be used (unreachable, an HTTP error, no answer in time).
    #[error("the model at {endpoint} failed: {reason}; check `[forge.llm]` in the host's config and the key in `skillhost secret list`")]
    Endpoint {
        /// The URL asked.
        endpoint: String,
        /// What went wrong.
        reason: String,
    },
    /// Every round failed.
    #[error("skill `{skill}`: the model's {rounds} round(s) all failed; the last: {last}")]
    GaveUp {
        /// The skill.
        skill: String,
        /// Rounds tried.
        rounds: u32,
        /// The last round's failure.
        last: String,
    },
    /// The forge could not run, or refused for a reason no new answer fixes.
    #[error(transparent)]
    Forge(ForgeError),
}

/// Drives the loop against one endpoint.
pub struct Generator {
    config: LlmConfig,
    api_key: Option<String>,
    agent: ureq::Agent,
}

impl Generator {
    /// A generator for `config`, authenticating with `api_key` (the value of
    /// `config.secret`, read by the caller from the host's secret store).
    pub fn new(config: LlmConfig, api_key: Option<String>) -> Self {
        let agent = ureq::Agent::config_builder().timeout_global(Some(config.timeout)).http_status_as_error(false).build().new_agent();
        Self { config, api_key, agent }
    }

    /// Ask the model for the skill, forge each answer, and send every failure back,
    /// for at most `rounds` rounds. The skill is installed by the forge (waiting for
    /// approval unless its tier is auto); nothing here approves it.
    pub async fn generate(
        &self,
        forge: &Forge,
        request: &Request,
        progress: Arc<dyn Fn(Step) + Send + Sync>,
    ) -> Result<Generated, GenerateError> {
        let mut messages = vec![
            json!({"role": "system", "content": system_prompt(request.language)}),
            json!({"role": "user", "content": format!("Write the skill `{}`. What it must do:\n\n{}", request.name, request.requirements)}),
        ];
        let mut last = String::new();
        let rounds = self.config.rounds.max(1);
        for round in 1..=rounds {
            progress(Step::Asking { round });
            let answer = self.complete(&messages).await?;
            messages.push(json!({"role": "assistant", "content": answer}));
            let reject = |reason: String, messages: &mut Vec<Value>, last: &mut String, feedback: String| {
                progress(Step::Rejected { round, reason: reason.clone() });
                messages.push(json!({"role": "user", "content": feedback}));
                *last = reason;
            };
            let files = match files_of(&answer) {
                Ok(files) => files,
                Err(reason) => {
                    let feedback =
                        format!("Your answer could not be used: {reason}. Answer with only the JSON object {{\"files\": {{...}}}}.");
                    reject(reason.to_string(), &mut messages, &mut last, feedback);
                    continue;
                }
            };
            let reporter = progress.clone();
            let stage: crate::Progress = Arc::new(move |stage: &str| reporter(Step::Forging { round, stage: stage.to_owned() }));
            let submission = Submission { name: request.name.clone(), language: request.language, files };
            match forge.submit(submission, stage).await {
                Ok(forged) => return Ok(Generated { forged, rounds: round }),
                Err(error @ ForgeError::Failed { .. }) => {
                    let feedback = feedback(error.failure().expect("a failed submission has a failure"), &error);
                    reject(error.to_string(), &mut messages, &mut last, feedback);
                }
                Err(error) => return Err(GenerateError::Forge(error)),
            }
        }
        Err(GenerateError::GaveUp { skill: request.name.clone(), rounds, last })
    }

    /// One chat completion: the text of the first choice.
    async fn complete(&self, messages: &[Value]) -> Result<String, GenerateError> {
        let endpoint = format!("{}/chat/completions", self.config.endpoint.trim_end_matches('/'));
        let body = json!({
            "model": self.config.model,
            "messages": messages,
            "temperature": 0,
            "response_format": {"type": "json_object"},
        });
        let (agent, key, url) = (self.agent.clone(), self.api_key.clone(), endpoint.clone());
        let sent = tokio::task::spawn_blocking(move || -> Result<(u16, String), ureq::Error> {
            let mut request = agent.post(&url).header("content-type", "application/json");
            if let Some(key) = &key {
                request = request.header("authorization", &format!("Bearer {key}"));
            }
            let mut response = request.send(body.to_string())?;
            let status = response.status().as_u16();
            let text = response.body_mut().with_config().limit(4 << 20).read_to_string()?;
            Ok((status, text))
        })
        .await
        .map_err(|e| GenerateError::Endpoint { endpoint: endpoint.clone(), reason: e.to_string() })?;
        let fail = |reason: String| GenerateError::Endpoint { endpoint: endpoint.clone(), reason };
        let (status, text) = sent.map_err(|e| fail(e.to_string()))?;
        if !(200..300).contains(&status) {
            let excerpt: String = text.trim().chars().take(300).collect();
            return Err(fail(format!("HTTP {status}: {excerpt}")));
        }
        let reply: Value = serde_json::from_str(&text).map_err(|e| fail(format!("the reply is not JSON: {e}")))?;
        reply["choices"][0]["message"]["content"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| fail("the reply has no choices[0].message.content".into()))
    }
}

/// The files of an answer: one JSON object `{"files": {PATH: CONTENT}}`, possibly in a
/// Markdown code fence.
fn files_of(answer: &str) -> Result<BTreeMap<String, String>, AnswerError> {
    let text = answer.trim();
    let text =
        text.strip_prefix("```json").or_else(|| text.strip_prefix("```")).and_then(|t| t.trim_end().strip_suffix("```")).unwrap_or(text);
    let value: Value = serde_json::from_str(text.trim()).map_err(AnswerError::NotJson)?;
    let files = value.get("files").and_then(Value::as_object).ok_or(AnswerError::NoFiles)?;
    if files.is_empty() {
        return Err(AnswerError::Empty);
    }
    files
        .iter()
        .map(|(path, content)| match content.as_str() {
            Some(text) => Ok((path.clone(), text.to_owned())),
            None => Err(AnswerError::NotAString(path.clone())),
        })
        .collect()
}

/// Why a model's answer holds no files (told to the model in the next round).
#[derive(Debug, thiserror::Error)]
enum AnswerError {
    #[error("it is not a JSON object ({0})")]
    NotJson(#[source] serde_json::Error),
    #[error("it has no \"files\" object")]
    NoFiles,
    #[error("\"files\" is empty")]
    Empty,
    #[error("the content of {0:?} is not a string")]
    NotAString(String),
}

/// What the model is told after a failed round: the failure in one line and as the
/// JSON an agent gets from `skill_create`.
fn feedback(failure: &Failure, error: &ForgeError) -> String {
    format!(
        "The forge rejected it: {failure}.\nDetails:\n{}\nFix the files and answer with the complete JSON object again (every file, not only the changed ones).",
        serde_json::to_string_pretty(&error.to_json()).unwrap_or_default()
    )
}

/// The instructions for `language`: the answer format, the skill's files and a complete
/// example.
fn system_prompt(language: Language) -> String {
    let common = "You write skills for skillhost, a host that runs each skill in a sandbox holding only what its skill.toml asks for. \
Answer with one JSON object and nothing else: {\"files\": {\"PATH\": \"CONTENT\", ...}} with every file of the skill. \
skill.toml: name (lowercase letters, digits, hyphens; exactly the name asked for), version, description; \
optionally [[tests]] cases (tool, input as an inline table, expect as the expected JSON output) that the host runs before installing. \
Ask for no network, files or secrets unless the requirements need them. Write a short SKILL.md telling an agent when to use the tools.";
    let example = match language {
        Language::Rust => {
            r#"Language: Rust, compiled to a WebAssembly component. Files: skill.toml, src/lib.rs, SKILL.md. Do not write Cargo.toml: the host provides one depending on skillhost-sdk only (it re-exports serde and schemars through its prelude; no other crates are available).
Example src/lib.rs:
use skillhost_sdk::prelude::*;

#[derive(Deserialize, JsonSchema)]
struct CountInput {
    /// The text to count words in.
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct CountOutput {
    words: usize,
}

/// Count the words in a text.
#[tool(read_only, idempotent)]
fn word_count(input: CountInput) -> Result<CountOutput, ToolError> {
    Ok(CountOutput { words: input.text.split_whitespace().count() })
}

skillhost_sdk::skill!(word_count);"#
        }
        Language::Python => {
            r#"Language: Python, a FastMCP server run in bubblewrap. Files: skill.toml, server.py, SKILL.md, optionally test_server.py (pytest).
skill.toml must contain:
[server]
command = "python"
args = ["server.py"]
Example server.py:
from fastmcp import FastMCP

mcp = FastMCP("word-tools")


@mcp.tool()
def word_count(text: str) -> dict:
    """Count the words in a text."""
    return {"words": len(text.split())}


if __name__ == "__main__":
    mcp.run()"#
        }
        Language::Scripts => {
            r#"Language: scripts, an Agent Skills folder run in skillhost's sandbox once the user approves it. Files: SKILL.md (YAML frontmatter with name and description, then instructions that say which script to run, e.g. `python scripts/count.py INPUT`), scripts/*.py or scripts/*.sh, optionally references/*.md. No skill.toml: the user decides what the scripts may reach. Scripts read their inputs from the working directory and write their results there; they have no network.
Example scripts/count.py:
import sys

words = open(sys.argv[1], encoding="utf-8").read().split()
print(len(words))"#
        }
    };
    format!("{common}\n\n{example}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_plain_or_fenced_and_refused_with_a_reason() {
        let files = files_of(r#"{"files": {"skill.toml": "name = \"a\"", "src/lib.rs": "fn x() {}"}}"#).unwrap();
        assert_eq!(files.len(), 2);
        let fenced = files_of("```json\n{\"files\": {\"server.py\": \"print(1)\"}}\n```").unwrap();
        assert_eq!(fenced["server.py"], "print(1)");
        for (answer, reason) in [
            ("Here is your skill!", "not a JSON object"),
            (r#"{"code": "x"}"#, "no \"files\" object"),
            (r#"{"files": {}}"#, "empty"),
            (r#"{"files": {"a.py": 3}}"#, "not a string"),
        ] {
            let err = files_of(answer).unwrap_err().to_string();
            assert!(err.contains(reason), "{answer}: {err}");
        }
    }

    #[test]
    fn the_config_is_strict_and_has_defaults() {
        let config: LlmConfig = toml::from_str("endpoint = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n").unwrap();
        assert_eq!((config.timeout, config.rounds, config.secret), (Duration::from_secs(120), 3, None));
        let config: LlmConfig = toml::from_str("endpoint = \"e\"\nmodel = \"m\"\ntimeout = \"5s\"\nsecret = \"openai\"\n").unwrap();
        assert_eq!((config.timeout, config.secret.as_deref()), (Duration::from_secs(5), Some("openai")));
        assert!(
            toml::from_str::<LlmConfig>("endpoint = \"e\"\nmodel = \"m\"\nkey = \"sk-...\"\n").is_err(),
            "keys live in the secret store"
        );
    }
}
