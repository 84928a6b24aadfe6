//! Symlink, oversize and traversal submissions are refused before anything is built:
//! no build directory, no staging directory, nothing installed.

use skillhost_forge::{Failure, ForgeError, StageLimits, stage};

use crate::{Env, rust};

fn assert_nothing_built(env: &Env) {
    let forge = env.forge_dir();
    assert!(!forge.join("builds").exists(), "a build dir was created");
    assert!(!forge.join("stage").exists(), "a staging dir was created");
    assert!(env.registry.catalog().is_empty(), "something was installed");
}

fn refused(err: &ForgeError) -> Vec<(String, String)> {
    let Some(Failure::Stage { refused }) = err.failure() else { panic!("not a stage refusal: {err}") };
    refused.iter().map(|r| (r.file.clone(), r.rule.clone())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traversal_and_oversize_are_refused_before_any_build() {
    let env = Env::new(10).await;
    let toml = "name = \"evil\"\nversion = \"1\"\ndescription = \"d\"\n";
    for path in ["../escape.rs", "src/../../escape.rs", "/etc/cron.d/x", ".cargo/config.toml", "src/lib.rs/../x.rs"] {
        let err = env.create(rust("evil", &[("skill.toml", toml), ("src/lib.rs", ""), (path, "x")])).await.unwrap_err();
        let refused = refused(&err);
        assert!(refused.iter().any(|(file, _)| file == path), "{path}: {err}");
        assert!(err.to_string().contains(path), "the refusal names the file: {err}");
    }
    let big = "x".repeat((1 << 20) + 1);
    let err = env.create(rust("evil", &[("skill.toml", toml), ("src/lib.rs", &big)])).await.unwrap_err();
    assert_eq!(refused(&err), vec![("src/lib.rs".to_owned(), format!("{} bytes, more than the 1048576 allowed per file", big.len()))]);
    assert_nothing_built(&env);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_with_a_symlink_is_refused() {
    let env = Env::new(10).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("skill.toml"), "name = \"linked\"\nversion = \"1\"\ndescription = \"d\"\n").unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("src/lib.rs")).unwrap();
    let refused = stage::read_dir(dir.path(), &StageLimits::default()).unwrap_err();
    assert_eq!(refused[0].file, "src/lib.rs");
    assert!(refused[0].rule.contains("symlink"), "{}", refused[0]);
    assert_nothing_built(&env);
}
