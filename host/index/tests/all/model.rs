//! The embedding model as the host runs it: its graph rewritten so that the int8 weights
//! stay int8, a session made at the first embedding and dropped when idle, and a model
//! file changed under a running host refused. Skipped (with a line saying so) when the
//! model is not installed.

use std::time::{Duration, Instant};

use fastembed::{InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel};
use skillhost_index::{Embedder, MiniLm, ModelFiles, Rewritten};

fn files(test: &str) -> Option<ModelFiles> {
    let files = crate::eval::site_packages().map(|dir| ModelFiles::in_site_packages(&dir)).filter(|f| f.onnx.is_file());
    if files.is_none() {
        println!("{test}: model not installed; not run");
    }
    files
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

/// The graph as the file has it, through fastembed directly (what the host ran before).
fn float_graph(files: &ModelFiles) -> TextEmbedding {
    let read = |name: &str| std::fs::read(files.tokenizer_dir.join(name)).unwrap();
    let tokenizer = TokenizerFiles {
        tokenizer_file: read("tokenizer.json"),
        config_file: read("config.json"),
        special_tokens_map_file: read("special_tokens_map.json"),
        tokenizer_config_file: read("tokenizer_config.json"),
    };
    let model = UserDefinedEmbeddingModel::new(std::fs::read(&files.onnx).unwrap(), tokenizer).with_pooling(Pooling::Mean);
    TextEmbedding::try_new_from_user_defined(model, InitOptionsUserDefined::new().with_max_length(256).with_intra_threads(1)).unwrap()
}

#[test]
fn the_int8_graph_embeds_like_the_float_one() {
    let Some(files) = files("int8 graph") else { return };
    let model = MiniLm::load(&files).unwrap();
    assert_eq!(model.rewritten(), Some(Rewritten { matmuls: 36, gathers: 2 }), "every weight of the pinned model is kept int8");
    assert!(model.identity().ends_with("+int8-matmul.1"), "{}", model.identity());
    let mut float = float_graph(&files);
    let texts: Vec<String> = crate::eval::catalogue()
        .iter()
        .flat_map(|s| std::iter::once(s.description.clone()).chain(s.tools.iter().map(|t| t.description.clone())))
        .take(120)
        .collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ours = model.embed(&texts).unwrap();
    let theirs = float.embed(&texts, Some(1)).unwrap();
    let cosines: Vec<f32> = ours.iter().zip(&theirs).map(|(a, b)| cosine(a, b)).collect();
    let least = cosines.iter().copied().fold(1.0f32, f32::min);
    let mean = cosines.iter().sum::<f32>() / cosines.len() as f32;
    println!("int8 graph against the float graph over {} texts: cosine mean {mean:.4}, least {least:.4}", texts.len());
    assert!(least >= 0.97 && mean >= 0.99, "cosine mean {mean}, least {least}");
}

#[test]
fn the_session_is_made_by_the_first_embedding_and_released_when_idle() {
    let Some(files) = files("idle release") else { return };
    let model = MiniLm::open(&files, Duration::from_millis(300)).unwrap();
    assert!(!model.is_loaded(), "opening makes no session");
    let first = model.embed(&["is my site down?"]).unwrap();
    assert!(model.is_loaded());
    let deadline = Instant::now() + Duration::from_secs(20);
    while model.is_loaded() {
        assert!(Instant::now() < deadline, "the session was not released after 20 s idle");
        std::thread::sleep(Duration::from_millis(50));
    }
    let again = model.embed(&["is my site down?"]).unwrap();
    assert_eq!(first, again, "a session made again embeds the same");
}

#[test]
fn a_model_file_changed_under_the_host_is_refused() {
    let Some(files) = files("changed model") else { return };
    let dir = tempfile::tempdir().unwrap();
    let onnx = dir.path().join("model.onnx");
    std::fs::copy(&files.onnx, &onnx).unwrap();
    let copied = ModelFiles { onnx: onnx.clone(), ..files };
    let model = MiniLm::open(&copied, Duration::from_millis(200)).unwrap();
    model.embed(&["hello"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while model.is_loaded() {
        assert!(Instant::now() < deadline, "the session was not released after 20 s idle");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut bytes = std::fs::read(&onnx).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&onnx, bytes).unwrap();
    let err = model.embed(&["hello"]).unwrap_err();
    assert!(err.to_string().contains("changed since the host opened it"), "{err}");
}
