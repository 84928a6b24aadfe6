//! Brute-force nearest neighbours over the document vectors: one contiguous matrix of
//! unit-length rows quantised to `i8` (each row scaled so its largest component is
//! ±127), so cosine similarity is an integer dot product the compiler vectorises over a
//! quarter of the bytes of `f32` rows (at 10,000 tools a query reads 4.6 MB instead of
//! 18 MB); a query allocates only its top-k list. The quantisation error on a cosine is
//! about ±0.003, well under the gaps that order results.
//!
//! The matrix is rebuilt from the documents after a change, at the first search that
//! needs it (a change costs one copy of the vectors, a query none).

use std::collections::HashMap;

/// Scale `v` to unit length in place (a zero vector stays zero).
pub(crate) fn normalise(v: &mut [f32]) {
    let norm = dot(v, v).sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// The dot product, eight lanes at a time (independent accumulators let the compiler
/// use SIMD without reassociating a single sum).
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut lanes = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    let mut sum: f32 = lanes.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        sum += x * y;
    }
    sum
}

/// Quantise `v` to `i8` with the scale that maps its largest component to ±127;
/// returns the scale (0 for a zero vector).
fn quantise(v: &[f32], out: &mut Vec<i8>) -> f32 {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 { 127.0 / max } else { 0.0 };
    out.extend(v.iter().map(|x| (x * scale).round().clamp(-127.0, 127.0) as i8));
    scale
}

/// The integer dot product, sixteen lanes at a time.
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let (ca, ra) = a.as_chunks::<16>();
    let (cb, rb) = b.as_chunks::<16>();
    let mut lanes = [0i32; 16];
    for (x, y) in ca.iter().zip(cb) {
        for i in 0..16 {
            lanes[i] += i32::from(x[i]) * i32::from(y[i]);
        }
    }
    lanes.iter().sum::<i32>() + ra.iter().zip(rb).map(|(x, y)| i32::from(*x) * i32::from(*y)).sum::<i32>()
}

/// The vectors of every embedded document, rows in key order.
pub(crate) struct Dense {
    dim: usize,
    rows: Vec<i8>,
    /// Per row: the quantisation scale.
    scales: Vec<f32>,
    /// Per row: the document's key, whether it is a tool, whether it is approved.
    docs: Vec<(String, bool, bool)>,
}

impl Dense {
    /// The matrix of `vectors` (key -> (unit vector, is a tool, approved)); rows whose
    /// dimension differs from the most common one are left out.
    pub fn build<'a>(vectors: impl Iterator<Item = (&'a String, &'a [f32], bool, bool)>) -> Self {
        let mut all: Vec<_> = vectors.collect();
        all.sort_by(|a, b| a.0.cmp(b.0));
        let mut dims: HashMap<usize, usize> = HashMap::new();
        for (_, v, _, _) in &all {
            *dims.entry(v.len()).or_default() += 1;
        }
        let dim = dims.into_iter().max_by_key(|&(d, n)| (n, d)).map_or(0, |(d, _)| d);
        let mut rows = Vec::with_capacity(all.len() * dim);
        let mut scales = Vec::with_capacity(all.len());
        let mut docs = Vec::with_capacity(all.len());
        for (key, v, tool, approved) in all {
            if v.len() == dim && dim > 0 {
                scales.push(quantise(v, &mut rows));
                docs.push((key.clone(), tool, approved));
            }
        }
        Self { dim, rows, scales, docs }
    }

    /// Bytes held by the vectors.
    pub fn bytes(&self) -> usize {
        self.rows.len() + self.scales.len() * std::mem::size_of::<f32>()
    }

    /// The `depth` rows most similar to the unit vector `query` among those `wanted`
    /// (is a tool, approved) accepts: (key, cosine), best first, ties by key.
    pub fn top(&self, query: &[f32], depth: usize, wanted: impl Fn(bool, bool) -> bool) -> Vec<(&str, f32)> {
        if query.len() != self.dim || self.dim == 0 || depth == 0 {
            return Vec::new();
        }
        let mut q = Vec::with_capacity(self.dim);
        let q_scale = quantise(query, &mut q);
        if q_scale == 0.0 {
            return Vec::new();
        }
        // Sorted best first; rows are in key order, so an equal score keeps the earlier row.
        let mut best: Vec<(f32, usize)> = Vec::with_capacity(depth + 1);
        for (i, row) in self.rows.chunks_exact(self.dim).enumerate() {
            let (_, tool, approved) = self.docs[i];
            if !wanted(tool, approved) || self.scales[i] == 0.0 {
                continue;
            }
            let score = dot_i8(&q, row) as f32 / (q_scale * self.scales[i]);
            if best.len() == depth && best.last().is_some_and(|&(s, _)| score <= s) {
                continue;
            }
            let at = best.partition_point(|&(s, _)| s >= score);
            best.insert(at, (score, i));
            best.truncate(depth);
        }
        best.into_iter().map(|(s, i)| (self.docs[i].0.as_str(), s)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_and_normalise() {
        let mut v: Vec<f32> = (0..19).map(|i| i as f32).collect();
        let plain: f32 = v.iter().map(|x| x * x).sum();
        assert!((dot(&v, &v) - plain).abs() < 1e-3);
        normalise(&mut v);
        assert!((dot(&v, &v) - 1.0).abs() < 1e-5);
        let mut zero = [0.0f32; 3];
        normalise(&mut zero);
        assert_eq!(zero, [0.0; 3]);
    }

    #[test]
    fn top_is_ordered_filtered_and_bounded() {
        let keys: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| (*s).to_owned()).collect();
        let vecs = [[1.0f32, 0.0], [0.6, 0.8], [0.0, 1.0], [0.6, 0.8]];
        let approved = [true, true, true, false];
        let dense = Dense::build(keys.iter().zip(&vecs).zip(approved).map(|((k, v), a)| (k, &v[..], true, a)));
        let top = dense.top(&[0.0, 1.0], 2, |_, a| a);
        assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), ["c", "b"]);
        let all = dense.top(&[0.6, 0.8], 10, |_, _| true);
        assert_eq!(all.iter().map(|t| t.0).collect::<Vec<_>>(), ["b", "d", "c", "a"]);
        assert!(dense.top(&[1.0], 3, |_, _| true).is_empty(), "wrong dimension");
        let cosines: Vec<f32> = all.iter().map(|t| t.1).collect();
        for (got, want) in cosines.iter().zip([1.0, 1.0, 0.8, 0.6]) {
            assert!((got - want).abs() < 0.01, "{cosines:?}");
        }
    }

    #[test]
    fn quantised_cosines_stay_close_to_exact_ones() {
        let mut rng = 7u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let keys: Vec<String> = (0..50).map(|i| format!("k{i:02}")).collect();
        let vecs: Vec<Vec<f32>> = (0..50)
            .map(|_| {
                let mut v: Vec<f32> = (0..384).map(|_| next()).collect();
                normalise(&mut v);
                v
            })
            .collect();
        let dense = Dense::build(keys.iter().zip(&vecs).map(|(k, v)| (k, v.as_slice(), true, true)));
        let query = &vecs[3];
        for (key, cosine) in dense.top(query, 50, |_, _| true) {
            let exact = dot(query, &vecs[key[1..].parse::<usize>().unwrap()]);
            assert!((cosine - exact).abs() < 0.01, "{key}: {cosine} vs {exact}");
        }
    }
}
