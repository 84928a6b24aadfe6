//! Dense embeddings behind a trait, so the index runs without a model (BM25 only) and
//! with any model that maps text to vectors.

/// Maps texts to vectors; cosine similarity between them ranks documents.
///
/// Implementations must be deterministic for a given model and return one vector of
/// the same dimension per input text.
pub trait Embedder: Send + Sync {
    /// The model's name, reported with results (e.g. `all-MiniLM-L6-v2-int8`).
    fn model(&self) -> &str;
    /// What identifies the model's vectors exactly (e.g. its name and a hash of its
    /// weights). A persisted index stores it with each document: when it changes,
    /// everything is embedded again. Default: [`Embedder::model`].
    fn identity(&self) -> String {
        self.model().to_owned()
    }
    /// One vector per text, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// A batch of embeddings is done (the index was synced): let go of what embedding it
    /// held and will not need for the next text, made again by the next
    /// [`embed`](Self::embed). Default: nothing.
    fn release(&self) {}
}

/// An embedder failed: the document or query falls back to BM25 alone.
#[derive(Clone, Debug, thiserror::Error)]
#[error("embedding with `{model}` failed: {reason}")]
pub struct EmbedError {
    /// The model.
    pub model: String,
    /// What went wrong.
    pub reason: String,
}
