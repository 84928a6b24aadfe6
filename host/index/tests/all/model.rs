//! The embedding model as the host runs it: a session made at the first embedding and
//! dropped when idle, made again from the optimised graph in the cache (and from the
//! model file when that graph is damaged), and a model file changed under a running host
//! refused. Skipped (with a line saying so) when the model is not installed. (The
//! pipeline against fastembed, and the int8 graph against the float one, are unit tests
//! of `minilm.rs`.)

use std::time::{Duration, Instant};

use skillhost_index::{Embedder, MiniLm, ModelFiles};

fn files(test: &str) -> Option<ModelFiles> {
    let files = crate::eval::site_packages().map(|dir| ModelFiles::in_site_packages(&dir)).filter(|f| f.onnx.is_file());
    if files.is_none() {
        println!("{test}: model not installed; not run");
    }
    files
}

#[test]
fn the_session_is_made_by_the_first_embedding_and_released_when_idle() {
    let Some(files) = files("idle release") else { return };
    let model = MiniLm::open(&files, None, Duration::from_millis(300)).unwrap();
    assert!(!model.is_loaded(), "opening makes no session");
    let first = model.embed(&["is my site down?"]).unwrap();
    assert!(model.is_loaded());
    released(&model);
    let again = model.embed(&["is my site down?"]).unwrap();
    assert_eq!(first, again, "a session made again embeds the same");
}

/// A catalogue indexed lets the session go (the pages of weights its texts touched and
/// the heap that ran them), one skill re-indexed keeps it for the searches around it, and
/// a search makes it again.
#[test]
fn a_catalogue_indexed_lets_the_session_go_and_a_search_makes_it_again() {
    use skillhost_index::{Query, SearchIndex, SkillDoc, Target};
    let Some(files) = files("released after a batch") else { return };
    let model = std::sync::Arc::new(MiniLm::open(&files, None, MiniLm::DEFAULT_IDLE).unwrap());
    let index = SearchIndex::with_embedder(model.clone()).unwrap();
    let catalogue = [SkillDoc::new("uptime", "check whether web sites are up"), SkillDoc::new("csv", "summarise a CSV file")];
    assert_eq!(index.upsert(catalogue).unwrap().indexed, 2);
    assert!(!model.is_loaded(), "the catalogue's session went once it was indexed");

    let found = index.search(&Query::new("is my site down?", Target::Skills)).unwrap();
    assert_eq!(found.hits.first().map(|hit| hit.skill.as_str()), Some("uptime"));
    assert!(model.is_loaded(), "the search made it again");
    assert_eq!(index.upsert([SkillDoc::new("weather", "the forecast for a city")]).unwrap().indexed, 1);
    assert!(model.is_loaded(), "one skill re-indexed keeps it");
}

#[test]
fn a_model_file_changed_under_the_host_is_refused() {
    let Some(files) = files("changed model") else { return };
    let dir = tempfile::tempdir().unwrap();
    let onnx = dir.path().join("model.onnx");
    std::fs::copy(&files.onnx, &onnx).unwrap();
    let copied = ModelFiles { onnx: onnx.clone(), ..files };
    // With the optimised graph in a cache, which the session would be made from.
    let model = MiniLm::open(&copied, Some(&dir.path().join("cache")), Duration::from_millis(200)).unwrap();
    model.embed(&["hello"]).unwrap();
    assert!(model.is_prepared());
    released(&model);
    let mut bytes = std::fs::read(&onnx).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&onnx, bytes).unwrap();
    let err = model.embed(&["hello"]).unwrap_err();
    assert!(err.to_string().contains("changed since the host opened it"), "{err}");
}

/// `got` is `expected` to within 1e-5 in every component (ONNX Runtime's optimisation
/// levels may order float operations differently).
fn assert_close(got: &[Vec<f32>], expected: &[Vec<f32>], what: &str) {
    assert_eq!(got.len(), expected.len());
    for (a, b) in got.iter().zip(expected) {
        let worst = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
        assert!(worst <= 1e-5, "{what} embeds differently: largest difference {worst}");
    }
}

/// Waits (up to 20 s) for `model` to drop its session.
fn released(model: &MiniLm) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while model.is_loaded() {
        assert!(Instant::now() < deadline, "the session was not released after 20 s idle");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sessions_are_made_from_the_optimised_graph_in_the_cache_and_embed_the_same() {
    let Some(files) = files("optimised graph") else { return };
    let texts = ["is my site down?", "convert a CSV file to JSON", "when does the TLS certificate of example.com expire"];
    let from_file = MiniLm::load(&files).unwrap().embed(&texts).unwrap();
    let same = |got: &[Vec<f32>], what: &str| assert_close(got, &from_file, what);
    let cache = tempfile::tempdir().unwrap();
    let saved = || std::fs::read_dir(cache.path()).unwrap().map(|e| e.unwrap().path()).collect::<Vec<_>>();
    let model = MiniLm::open(&files, Some(cache.path()), Duration::from_millis(200)).unwrap();
    assert!(!model.is_loaded() && !model.is_prepared() && saved().is_empty(), "opening makes no session and saves nothing");

    // The first session saves the optimised graph; the next one is made from it, its
    // weights mapped from their own file (most of them never read: the pages resident
    // are the few the texts touched).
    same(&model.embed(&texts).unwrap(), "the session that saved the graph");
    let folder = saved();
    assert_eq!(folder.len(), 1, "one optimised graph's folder, nothing partial left: {folder:?}");
    let (graph, weights) = kept_files(&folder[0]);
    assert!(std::fs::metadata(&graph).unwrap().len() < 1 << 20, "the weights are not in the graph");
    assert!(std::fs::metadata(&weights).unwrap().len() > 16 << 20, "they are in a file of their own");
    assert!(model.is_prepared());
    released(&model);
    same(&model.embed(&texts).unwrap(), "a session made from the saved graph");
    let resident = mapped_kib(&weights);
    assert!(resident > 0 && resident < 16 << 10, "the weights are mapped, a few MB of them read: {resident} KiB");

    // A second host finds the graph at once and does not save it again.
    let modified = std::fs::metadata(&graph).unwrap().modified().unwrap();
    let again = MiniLm::open(&files, Some(cache.path()), Duration::from_millis(200)).unwrap();
    assert!(again.is_prepared());
    same(&again.embed(&texts).unwrap(), "a second host's session");
    assert_eq!(std::fs::metadata(&graph).unwrap().modified().unwrap(), modified);
}

/// The graph and the weights in the kept graph's `folder`, told apart by their extension.
fn kept_files(folder: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let files: Vec<_> = std::fs::read_dir(folder).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 2, "a graph and its weights: {files:?}");
    let graph = files.iter().find(|f| f.extension().is_some_and(|x| x == "onnx")).unwrap().clone();
    let weights = files.iter().find(|f| **f != graph).unwrap().clone();
    (graph, weights)
}

/// The KiB of `file` resident in this process's mappings of it (0 when it is not mapped).
fn mapped_kib(file: &std::path::Path) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let name = file.canonicalize().unwrap().to_string_lossy().into_owned();
    let mut ours = false;
    let mut total = 0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if !first.ends_with(':') {
            ours = line.ends_with(&name);
        } else if ours && first == "Rss:" {
            total += line.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    total
}

#[test]
fn a_damaged_or_changed_optimised_graph_is_not_used() {
    let Some(files) = files("damaged optimised graph") else { return };
    let cache = tempfile::tempdir().unwrap();
    let expected = MiniLm::open(&files, Some(cache.path()), Duration::from_millis(200)).unwrap().embed(&["hello"]).unwrap();
    let folder = std::fs::read_dir(cache.path()).unwrap().next().unwrap().unwrap().path();
    let (graph, _) = kept_files(&folder);

    // Damaged before a host finds it: ONNX Runtime refuses it; the model file is used.
    std::fs::write(&graph, b"not a graph").unwrap();
    let model = MiniLm::open(&files, Some(cache.path()), Duration::from_millis(200)).unwrap();
    assert_close(&model.embed(&["hello"]).unwrap(), &expected, "the session made from the model file");

    // Changed after the host saved it, to a graph that loads but embeds differently
    // (the model file as it is, without the int8 rewrite): not loaded.
    std::fs::remove_file(&graph).unwrap();
    let model = MiniLm::open(&files, Some(cache.path()), Duration::from_millis(200)).unwrap();
    assert_close(&model.embed(&["hello"]).unwrap(), &expected, "the session that saved the graph again");
    assert!(model.is_prepared(), "saved again");
    released(&model);
    std::fs::remove_file(&graph).unwrap();
    std::fs::copy(&files.onnx, &graph).unwrap();
    assert!(!model.is_prepared());
    assert_close(&model.embed(&["hello"]).unwrap(), &expected, "the session made from the model file, not the changed graph,");

    // Its weights changed after a host saved them (the graph as it was saved): not loaded.
    std::fs::remove_dir_all(&folder).unwrap();
    let model = MiniLm::open(&files, Some(cache.path()), Duration::from_millis(200)).unwrap();
    assert_close(&model.embed(&["hello"]).unwrap(), &expected, "the session that saved the graph once more");
    assert!(model.is_prepared());
    released(&model);
    let (_, weights) = kept_files(&folder);
    std::fs::write(&weights, vec![0u8; usize::try_from(std::fs::metadata(&weights).unwrap().len()).unwrap()]).unwrap();
    assert!(!model.is_prepared());
    assert_close(&model.embed(&["hello"]).unwrap(), &expected, "the session made from the model file, not the changed weights,");
}
