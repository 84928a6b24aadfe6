//! `skill_run`: a command of an approved SKILL.md skill's scripts, run in the jail
//! through the registry (`Registry::run`), as the skill's instructions write it. Inputs
//! come by content (text or base64, capped); the answer is structured (exit code, capped
//! stdout and stderr, every file the run left with its size and SHA-256, small text files
//! inline) and carries images as image content; every file that is not inlined is kept
//! by the server as a resource (`skillhost-run://RUN/PATH`, linked from the answer, `RUN`
//! an unguessable id, readable only by the caller whose run it was) until the run is collected ([`RunFiles`]: the oldest runs go first
//! past a cap), and with a shared state store kept there too, so the link reads on every
//! replica. An agent runs what a human approved under the policy the human
//! approved; it can grant nothing (no path, no host, no secret).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use base64::Engine;
use parking_lot::Mutex;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Resource};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use skillhost_core::{CallContext, RunInput, RunOutput};
use skillhost_registry::{Registry, RegistryError, RunFile, RunFileStore};

/// Text files up to this size are inlined in the structured answer.
const INLINE_TEXT: usize = 16 << 10;
/// Images returned as content blocks in one answer, all together.
const CONTENT_CAP: usize = 8 << 20;
/// Runs whose files a session keeps readable.
const KEPT_RUNS: usize = 16;
/// Bytes of run files a session keeps readable, all runs together.
const KEPT_BYTES: usize = 64 << 20;
/// The URI scheme of a run's files.
pub(crate) const SCHEME: &str = "skillhost-run://";

/// The files of the server's runs, readable as resources until collected: past
/// [`KEPT_RUNS`] runs or [`KEPT_BYTES`] bytes the oldest run is dropped. Kept by the
/// server, not a session (over streamable HTTP a client's next request may be a session
/// of its own), each run under a random id no other client can guess; with a shared
/// store, written there too (within its own budget) and read from there when this
/// server does not hold the run (another replica ran it).
pub(crate) struct RunFiles {
    random: ring::rand::SystemRandom,
    inner: Mutex<Kept>,
    shared: Option<Arc<dyn RunFileStore>>,
}

impl RunFiles {
    /// Runs' files kept in memory, and in `shared` when given.
    pub(crate) fn new(shared: Option<Arc<dyn RunFileStore>>) -> Self {
        Self { random: ring::rand::SystemRandom::new(), inner: Mutex::default(), shared }
    }
}

#[derive(Default)]
struct Kept {
    runs: VecDeque<(String, BTreeMap<String, Vec<u8>>)>,
    bytes: usize,
}

impl RunFiles {
    /// Keep `files` (each under the cap alone) of a run of `owner` (the caller); the run's
    /// id, or `None` when the OS random source failed (the files are then not kept). A
    /// shared store that fails leaves the files readable on this server only, and says so
    /// in the log.
    async fn keep(&self, owner: &str, files: BTreeMap<String, Vec<u8>>) -> Option<String> {
        use ring::rand::SecureRandom;
        let mut id = [0u8; 16];
        self.random.fill(&mut id).ok()?;
        let id: String = id.iter().map(|b| format!("{b:02x}")).collect();
        // Kept under its owner and id: a link another caller learns reads nothing.
        let key = owned(owner, &id);
        if let Some(shared) = self.shared.clone() {
            let (run, copy) = (key.clone(), files.clone());
            let stored = tokio::task::spawn_blocking(move || shared.keep(&run, &copy)).await;
            if let Some(error) = stored.map_or_else(|e| Some(e.to_string()), |r| r.err().map(|e| e.to_string())) {
                tracing::warn!(%error, run = %id, "a run's files are not in the shared store: its links read on this replica only");
            }
        }
        self.keep_here(key, files).map(|_| id)
    }

    /// Keep `files` in this server's memory as run `id`'s.
    fn keep_here(&self, id: String, files: BTreeMap<String, Vec<u8>>) -> Option<String> {
        let mut kept = self.inner.lock();
        kept.bytes += files.values().map(Vec::len).sum::<usize>();
        kept.runs.push_back((id.clone(), files));
        while kept.runs.len() > KEPT_RUNS || (kept.bytes > KEPT_BYTES && kept.runs.len() > 1) {
            if let Some((_, dropped)) = kept.runs.pop_front() {
                kept.bytes -= dropped.values().map(Vec::len).sum::<usize>();
            }
        }
        Some(id)
    }

    /// The bytes of `uri` (`skillhost-run://RUN/PATH`) for `reader` (a caller): from this
    /// server's memory, else from the shared store; another caller's run is not kept, as
    /// far as `reader` can tell.
    pub(crate) async fn read(&self, reader: &str, uri: &str) -> Result<Vec<u8>, RunFileError> {
        let rest = uri.strip_prefix(SCHEME).ok_or_else(|| RunFileError::NotARunFile(uri.to_owned()))?;
        let (run, path) = rest.split_once('/').ok_or_else(|| RunFileError::NoPath(uri.to_owned()))?;
        let key = owned(reader, run);
        let here = {
            let kept = self.inner.lock();
            kept.runs.iter().find(|(id, _)| *id == key).map(|(_, files)| files.get(path).cloned().ok_or(()))
        };
        let found = match (here, self.shared.clone()) {
            (Some(found), _) => found.map_or(RunFile::NoFile, RunFile::Bytes),
            (None, None) => RunFile::NotKept,
            (None, Some(shared)) => {
                let (id, file) = (key, path.to_owned());
                match tokio::task::spawn_blocking(move || shared.read(&id, &file)).await {
                    Ok(Ok(found)) => found,
                    Ok(Err(e)) => return Err(RunFileError::Store(e.to_string())),
                    Err(e) => return Err(RunFileError::Store(e.to_string())),
                }
            }
        };
        match found {
            RunFile::Bytes(bytes) => Ok(bytes),
            RunFile::NoFile => Err(RunFileError::NoFile { run: run.to_owned(), path: path.to_owned() }),
            RunFile::NotKept => Err(RunFileError::NotKept(run.to_owned())),
        }
    }
}

/// The key a run's files are kept under: its owner's name and its id.
fn owned(owner: &str, run: &str) -> String {
    format!("{owner}\u{1f}{run}")
}

/// Why a run's file cannot be read (a `resources/read` of a `skillhost-run://` URI).
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunFileError {
    #[error("`{0}` is not a run's file ({SCHEME}RUN/PATH)")]
    NotARunFile(String),
    #[error("`{0}` names no file of the run")]
    NoPath(String),
    #[error(
        "run {0} is not kept (a server keeps the files of its last {KEPT_RUNS} runs, {mib} MiB in all; the replicas of a team the last {runs} runs, {team_mib} MiB); run it again",
        runs = skillhost_registry::SHARED_RUNS,
        team_mib = skillhost_registry::SHARED_BYTES >> 20,
        mib = KEPT_BYTES >> 20
    )]
    NotKept(String),
    #[error("run {run} left no file `{path}`")]
    NoFile { run: String, path: String },
    #[error("the shared state store cannot be read: {0}")]
    Store(String),
}

/// Why `skill_run` gave no answer: its inputs, or the registry's refusal of the run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SkillRunError {
    /// An input's `base64` does not decode.
    #[error("skill_run: input `{path}` is not valid base64: {source}")]
    Base64 { path: String, source: base64::DecodeError },
    /// An input with both or neither of `text` and `base64`.
    #[error("skill_run: input `{0}`: give exactly one of text or base64")]
    Content(String),
    /// The registry refused the run, or it failed.
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

impl crate::failure::AgentFailure for SkillRunError {
    fn kind(&self) -> &'static str {
        match self {
            SkillRunError::Base64 { .. } | SkillRunError::Content(_) => "invalid_arguments",
            SkillRunError::Registry(e) => crate::failure::registry_failure(e).0,
        }
    }

    fn fix(&self) -> Option<String> {
        match self {
            SkillRunError::Base64 { .. } | SkillRunError::Content(_) => Some(crate::failure::FIX_ARGUMENTS.into()),
            SkillRunError::Registry(e) => crate::failure::registry_failure(e).1,
        }
    }
}

/// The arguments of `skill_run`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunArgs {
    /// The skill (runtime `scripts` in skill_list).
    skill: String,
    /// The command as the skill's SKILL.md writes it, one word per item, e.g.
    /// ["python", "scripts/fill.py", "in.pdf", "out.pdf"]. Paths of the skill's own files
    /// work as written; other relative paths are the run's workspace.
    #[schemars(length(min = 1, max = 256))]
    command: Vec<String>,
    /// Files put into the workspace before the command starts (16 MiB in all).
    #[serde(default)]
    #[schemars(length(max = 64))]
    inputs: Vec<InputFile>,
}

/// One input file, by content.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct InputFile {
    /// Its path in the workspace, relative (e.g. `in.csv`, `data/a.json`).
    path: String,
    /// Its content as text.
    #[serde(default)]
    text: Option<String>,
    /// Its content as base64 (for binary files).
    #[serde(default)]
    base64: Option<String>,
    /// Make it executable (a script the command runs). Default: false.
    #[serde(default)]
    executable: bool,
}

/// What `skill_run` answers.
#[derive(Serialize, JsonSchema)]
pub(crate) struct RunAnswer {
    /// The command's exit code, when it exited.
    exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    signal: Option<i32>,
    /// What it printed on stdout (lossy UTF-8), cut at `output_cap` bytes.
    stdout: String,
    /// What it printed on stderr (lossy UTF-8), cut at `output_cap` bytes.
    stderr: String,
    /// Bytes it printed on stdout, kept or not.
    stdout_bytes: u64,
    /// Bytes it printed on stderr, kept or not.
    stderr_bytes: u64,
    /// The cap on each of stdout and stderr.
    output_cap: u64,
    /// The files it wrote or changed in its workspace.
    files: Vec<FileAnswer>,
    /// The inputs it left as they came (not repeated in `files`).
    unchanged_inputs: Vec<String>,
    /// Entries of the workspace left out (links are never followed or returned).
    skipped: Vec<String>,
    /// How long it ran, in milliseconds.
    duration_ms: u64,
}

/// A file the run left.
#[derive(Serialize, JsonSchema)]
pub(crate) struct FileAnswer {
    /// Its path in the workspace.
    path: String,
    /// Its size in bytes.
    size: u64,
    /// SHA-256 of its bytes, lowercase hex.
    sha256: String,
    /// Whether the run left it executable.
    executable: bool,
    /// Its content, for a small text file.
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    /// How its bytes are returned: `inline` (in `text`), `image` (an image block of this
    /// answer, also readable at `uri`), `resource` (read it at `uri` with resources/read),
    /// or `omitted` (larger than a session keeps).
    returned: &'static str,
    /// Where its bytes can be read until the run is collected.
    #[serde(skip_serializing_if = "Option::is_none")]
    uri: Option<String>,
}

/// The input schema of `skill_run`.
pub(crate) fn input_schema() -> std::sync::Arc<JsonObject> {
    rmcp::handler::server::common::schema_for_type::<RunArgs>()
}

/// Run it and build the answer; `Err` is the tool's failure.
pub(crate) async fn skill_run(
    registry: &Registry,
    runs: &RunFiles,
    args: RunArgs,
    cx: CallContext,
) -> Result<CallToolResult, SkillRunError> {
    let mut inputs = Vec::with_capacity(args.inputs.len());
    for input in args.inputs {
        let bytes = match (input.text, input.base64) {
            (Some(text), None) => text.into_bytes(),
            (None, Some(b64)) => base64::engine::general_purpose::STANDARD
                .decode(b64.as_bytes())
                .map_err(|source| SkillRunError::Base64 { path: skillhost_core::text::quote(&input.path, 80), source })?,
            _ => return Err(SkillRunError::Content(skillhost_core::text::quote(&input.path, 80))),
        };
        inputs.push(RunInput { path: input.path, bytes, executable: input.executable });
    }
    let owner = cx.caller.clone();
    let output = registry.run(&args.skill, args.command, inputs, cx).await?;
    Ok(answer(output, runs, &owner).await)
}

/// A file's text when it is returned inline: UTF-8, no NUL, at most [`INLINE_TEXT`].
fn inline(bytes: &[u8]) -> Option<String> {
    std::str::from_utf8(bytes).ok().filter(|t| t.len() <= INLINE_TEXT && !t.contains('\0')).map(str::to_owned)
}

/// The structured answer and its content blocks; the files not inlined are kept in `runs`,
/// readable by `owner`.
async fn answer(output: RunOutput, runs: &RunFiles, owner: &str) -> CallToolResult {
    let mut blocks = Vec::new();
    let mut budget = CONTENT_CAP;
    let kept: BTreeMap<String, Vec<u8>> = output
        .files
        .iter()
        .filter(|f| inline(&f.bytes).is_none() && f.bytes.len() <= KEPT_BYTES)
        .map(|f| (f.path.clone(), f.bytes.clone()))
        .collect();
    let run = if kept.is_empty() { None } else { runs.keep(owner, kept).await };
    let mut files = Vec::with_capacity(output.files.len());
    for file in &output.files {
        let text = inline(&file.bytes);
        let uri = run.as_ref().filter(|_| text.is_none() && file.bytes.len() <= KEPT_BYTES).map(|id| format!("{SCHEME}{id}/{}", file.path));
        let returned = match (&text, &uri, image_type(&file.bytes)) {
            (Some(_), _, _) => "inline",
            (None, None, _) => "omitted",
            (None, Some(_), Some(mime)) if file.bytes.len() <= budget => {
                budget -= file.bytes.len();
                blocks.push(ContentBlock::image(base64::engine::general_purpose::STANDARD.encode(&file.bytes), mime));
                "image"
            }
            (None, Some(uri), _) => {
                let link = Resource::new(uri.clone(), file.path.clone()).with_size(file.size);
                blocks.push(ContentBlock::resource_link(link));
                "resource"
            }
        };
        files.push(FileAnswer {
            path: file.path.clone(),
            size: file.size,
            sha256: file.sha256.clone(),
            executable: file.executable,
            text,
            returned,
            uri,
        });
    }
    let value = RunAnswer {
        exit_code: output.exit_code,
        signal: output.signal,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        stdout_bytes: output.stdout_bytes,
        stderr_bytes: output.stderr_bytes,
        output_cap: output.output_cap,
        files,
        unchanged_inputs: output.unchanged_inputs,
        skipped: output.skipped,
        duration_ms: output.duration.as_millis() as u64,
    };
    let value = serde_json::to_value(value).unwrap_or_default();
    let mut result = CallToolResult::structured(value);
    result.content.extend(blocks);
    result
}

/// The MIME type of an image, from its first bytes.
fn image_type(bytes: &[u8]) -> Option<&'static str> {
    const SIGNATURES: [(&[u8], &str); 3] = [(b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif")];
    if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        return Some("image/webp");
    }
    SIGNATURES.iter().find(|(magic, _)| bytes.starts_with(magic)).map(|(_, mime)| *mime)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(files: &[(&str, Vec<u8>)]) -> RunOutput {
        let files = files
            .iter()
            .map(|(path, bytes)| skillhost_core::RunFile {
                path: (*path).to_owned(),
                size: bytes.len() as u64,
                sha256: String::new(),
                executable: false,
                bytes: bytes.clone(),
            })
            .collect();
        RunOutput {
            exit_code: Some(0),
            signal: None,
            stdout: b"ok\n".to_vec(),
            stderr: Vec::new(),
            stdout_bytes: 3,
            stderr_bytes: 0,
            output_cap: 1 << 20,
            files,
            unchanged_inputs: Vec::new(),
            skipped: Vec::new(),
            workspace: (0, 0),
            duration: std::time::Duration::from_millis(5),
        }
    }

    #[tokio::test]
    async fn text_is_inlined_images_are_image_content_and_the_rest_stays_readable() {
        let runs = RunFiles::new(None);
        let png = b"\x89PNG\r\n\x1a\nrest".to_vec();
        let blob = vec![0u8, 159, 146, 150];
        let result =
            answer(output(&[("a.txt", b"hello".to_vec()), ("dot.png", png.clone()), ("data.bin", blob.clone())]), &runs, "alice").await;
        let value = result.structured_content.clone().unwrap();
        let files = value["files"].as_array().unwrap();
        assert_eq!(files[0]["returned"], "inline");
        assert_eq!(files[0]["text"], "hello");
        assert_eq!(files[1]["returned"], "image");
        assert_eq!(files[2]["returned"], "resource");
        assert!(matches!(&result.content[1], ContentBlock::Image(image) if image.mime_type == "image/png"));
        assert!(matches!(&result.content[2], ContentBlock::ResourceLink(link) if link.uri == files[2]["uri"]));
        assert_eq!(runs.read("alice", files[2]["uri"].as_str().unwrap()).await.unwrap(), blob);
        assert_eq!(runs.read("alice", files[1]["uri"].as_str().unwrap()).await.unwrap(), png);
        let uri = files[2]["uri"].as_str().unwrap();
        assert!(runs.read("alice", &uri.replace("data.bin", "none")).await.unwrap_err().to_string().contains("no file"));
        assert!(
            runs.read("alice", "skillhost-run://1/data.bin").await.unwrap_err().to_string().contains("not kept"),
            "ids are not guessable"
        );
        assert!(runs.read("bob", uri).await.unwrap_err().to_string().contains("not kept"), "another caller's link reads nothing");
    }

    #[tokio::test]
    async fn the_oldest_runs_are_collected_first() {
        let runs = RunFiles::new(None);
        let first = runs.keep("alice", BTreeMap::from([("x".to_owned(), vec![1])])).await.unwrap();
        let second = runs.keep("alice", BTreeMap::from([("x".to_owned(), vec![2])])).await.unwrap();
        for _ in 1..KEPT_RUNS {
            runs.keep("alice", BTreeMap::from([("x".to_owned(), vec![3])])).await.unwrap();
        }
        assert!(runs.read("alice", &format!("{SCHEME}{first}/x")).await.unwrap_err().to_string().contains("not kept"));
        assert_eq!(runs.read("alice", &format!("{SCHEME}{second}/x")).await.unwrap(), vec![2]);
    }
}
