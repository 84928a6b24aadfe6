//! Dense embeddings behind a trait, so the index runs without a model (BM25 only) and
//! with any model that maps text to vectors.

/// Maps texts to vectors; cosine similarity between them ranks documents.
///
/// Implementations must be deterministic for a given model and return one vector of
/// the same dimension per input text.
pub trait Embedder: Send + Sync {
    /// The model's name, reported with results (e.g. `all-MiniLM-L6-v2-int8`).
    fn model(&self) -> &str;
    /// One vector per text, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
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

/// Cosine similarity; 0 when either vector is zero or the dimensions differ.
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 { 0.0 } else { dot / (na.sqrt() * nb.sqrt()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_of_parallel_orthogonal_and_mismatched_vectors() {
        assert!((cosine(&[1.0, 2.0], &[2.0, 4.0]) - 1.0).abs() < 1e-6);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), 0.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
    }
}
