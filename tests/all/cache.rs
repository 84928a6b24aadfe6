//! The compiled-component cache: the second load of a component does not compile (seen
//! in the load outcome, the counters and on disk), a restart reuses it, and a changed
//! engine configuration does not load stale code.

use fixtures::{LIMITS, TestHost};
use serde_json::json;
use skillhost::{runtime::CacheOutcome, runtime::WasmConfig};

use crate::ok;

fn cwasm_files(dir: &std::path::Path) -> usize {
    let mut count = 0;
    for entry in walk(dir) {
        if entry.extension().is_some_and(|e| e == "cwasm") {
            count += 1;
        }
    }
    count
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.filter_map(Result::ok).flat_map(|e| if e.path().is_dir() { walk(&e.path()) } else { vec![e.path()] }).collect()
}

#[tokio::test]
async fn second_load_comes_from_the_cache_and_engine_changes_invalidate_it() {
    let cache = tempfile::tempdir().unwrap();
    let config = WasmConfig { cache_dir: Some(cache.path().to_owned()), ..WasmConfig::default() };

    let first = TestHost::with_config(config.clone());
    let dir = LIMITS.folder(first.skills.path());
    let loaded = first.host.load_path_granted(&dir).await.unwrap();
    assert_eq!(loaded.cache_outcome(), Some(CacheOutcome::Compiled));
    assert_eq!((first.host.cache_stats().compiled, first.host.cache_stats().hits), (1, 0));
    assert_eq!(cwasm_files(cache.path()), 1, "one entry on disk");

    // Same runtime, second load: from the cache.
    let again = first.host.load_path_granted(&dir).await.unwrap();
    assert_eq!(again.cache_outcome(), Some(CacheOutcome::Hit));

    // A restarted host (new engine, same settings) loads from the cache and runs it.
    let restarted = TestHost::with_config(config.clone());
    let loaded = restarted.host.load_path_granted(&LIMITS.folder(restarted.skills.path())).await.unwrap();
    assert_eq!(loaded.cache_outcome(), Some(CacheOutcome::Hit));
    assert_eq!((restarted.host.cache_stats().compiled, restarted.host.cache_stats().hits), (0, 1));
    assert_eq!(ok(&loaded, "echo", json!({"value": 7})).await, json!(7));

    // A different engine configuration compiles again, beside the old entry.
    let changed = TestHost::with_config(WasmConfig { optimize: false, ..config.clone() });
    let loaded = changed.host.load_path_granted(&LIMITS.folder(changed.skills.path())).await.unwrap();
    assert_eq!(loaded.cache_outcome(), Some(CacheOutcome::Compiled));
    assert_eq!(cwasm_files(cache.path()), 2);
    assert_eq!(ok(&loaded, "echo", json!({"value": 8})).await, json!(8));
}

/// With a compile worker, Cranelift compiles in a process of its own: the entry it made
/// is stored, mapped by the host (wasmtime checks it was compiled for the host's engine)
/// and runs; a restarted host finds it. A worker that cannot be started leaves the compile
/// to the host; one that fails fails the compile, saying so, and caches nothing.
#[tokio::test]
async fn a_compile_worker_compiles_for_the_cache_and_its_failures_are_not_cached() {
    let worker = |program: &str| Some(vec![std::ffi::OsString::from(program), skillhost_wasm::worker::SUBCOMMAND.into()]);
    let cache = tempfile::tempdir().unwrap();
    let config = WasmConfig {
        cache_dir: Some(cache.path().to_owned()),
        compile_worker: worker(env!("CARGO_BIN_EXE_skillhost-compile")),
        ..WasmConfig::default()
    };
    let first = TestHost::with_config(config.clone());
    let loaded = first.host.load_path_granted(&LIMITS.folder(first.skills.path())).await.unwrap();
    assert_eq!(loaded.cache_outcome(), Some(CacheOutcome::Compiled));
    assert_eq!((first.host.cache_stats().compiled, cwasm_files(cache.path())), (1, 1), "the worker's code is in the cache");
    assert_eq!(ok(&loaded, "echo", json!({"value": 7})).await, json!(7));
    let restarted = TestHost::with_config(WasmConfig { compile_worker: None, ..config.clone() });
    let loaded = restarted.host.load_path_granted(&LIMITS.folder(restarted.skills.path())).await.unwrap();
    assert_eq!(loaded.cache_outcome(), Some(CacheOutcome::Hit), "a host without a worker maps what one compiled");

    let missing = tempfile::tempdir().unwrap();
    let absent = missing.path().join("no-such-worker");
    let host = TestHost::with_config(WasmConfig {
        cache_dir: Some(missing.path().join("cache")),
        compile_worker: worker(absent.to_str().unwrap()),
        ..WasmConfig::default()
    });
    let loaded = host.host.load_path_granted(&LIMITS.folder(host.skills.path())).await.unwrap();
    assert_eq!(ok(&loaded, "echo", json!({"value": 8})).await, json!(8), "compiled by the host itself");

    let failing = tempfile::tempdir().unwrap();
    let host = TestHost::with_config(WasmConfig {
        cache_dir: Some(failing.path().join("cache")),
        compile_worker: worker("/bin/false"),
        ..WasmConfig::default()
    });
    let refused = host.host.load_path_granted(&LIMITS.folder(host.skills.path())).await.unwrap_err();
    assert!(refused.to_string().contains("compile worker failed"), "{refused}");
    assert_eq!(cwasm_files(failing.path()), 0, "nothing cached");

    // What a worker starts with: no environment (nothing the host's could steer, such as
    // a compiler's or a loader's settings), `/` for its directory, the settings alone.
    let seen = failing.path().join("seen");
    let spy = failing.path().join("spy.sh");
    std::fs::write(&spy, format!("#!/bin/sh\n{{ env; pwd; echo \"$@\"; }} > '{}'\nexit 3\n", seen.display())).unwrap();
    std::fs::set_permissions(&spy, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let host = TestHost::with_config(WasmConfig {
        cache_dir: Some(failing.path().join("cache")),
        compile_worker: worker(spy.to_str().unwrap()),
        ..WasmConfig::default()
    });
    host.host.load_path_granted(&LIMITS.folder(host.skills.path())).await.unwrap_err();
    let seen = std::fs::read_to_string(&seen).unwrap();
    let lines: Vec<&str> = seen.lines().filter(|l| !l.starts_with("PWD=") && !l.starts_with("SHLVL=") && !l.starts_with("_=")).collect();
    assert_eq!(
        lines,
        ["/", "__compile max-instances=64 max-memory=1073741824 optimize=true baseline-compile=false compiler=cranelift"],
        "{seen}"
    );
}

/// With a baseline tier, Winch's compiles (of the code a listing runs, bytes no human may
/// have approved, and of first calls) run in the compile worker too, under its limits:
/// the host takes the code from memory and caches none of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn winchs_compiles_run_in_the_worker_and_are_not_cached() {
    let worker = |program: &std::path::Path| Some(vec![program.as_os_str().to_owned(), skillhost_wasm::worker::SUBCOMMAND.into()]);
    let cache = tempfile::tempdir().unwrap();
    let config = WasmConfig {
        cache_dir: Some(cache.path().join("cache")),
        compile_worker: worker(env!("CARGO_BIN_EXE_skillhost-compile").as_ref()),
        baseline_compile: true,
        ..WasmConfig::default()
    };
    let host = TestHost::with_config(config.clone());
    let loaded = host.host.load_path_granted(&LIMITS.folder(host.skills.path())).await.unwrap();
    assert_eq!(loaded.cache_outcome(), Some(CacheOutcome::Baseline), "listed with Winch's code");
    assert_eq!((host.host.cache_stats().compiled, cwasm_files(cache.path())), (0, 0), "none of it cached");
    assert_eq!(ok(&loaded, "echo", json!({"value": 9})).await, json!(9), "the worker's Winch code runs");

    // Each compile the host asked for, in order: Winch's first, then Cranelift's after it failed.
    let seen = cache.path().join("seen");
    let spy = cache.path().join("spy.sh");
    std::fs::write(&spy, format!("#!/bin/sh\necho \"$@\" >> '{}'\nexit 3\n", seen.display())).unwrap();
    std::fs::set_permissions(&spy, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let host = TestHost::with_config(WasmConfig { compile_worker: worker(&spy), ..config });
    let refused = host.host.load_path_granted(&LIMITS.folder(host.skills.path())).await.unwrap_err();
    assert!(refused.to_string().contains("compile worker failed"), "{refused}");
    let seen = std::fs::read_to_string(&seen).unwrap();
    let compilers: Vec<&str> = seen.lines().filter_map(|l| l.split(' ').find(|a| a.starts_with("compiler="))).collect();
    assert_eq!(compilers, ["compiler=winch", "compiler=cranelift"], "{seen}");
}

#[tokio::test]
async fn a_corrupt_cache_entry_is_recompiled() {
    let cache = tempfile::tempdir().unwrap();
    let config = WasmConfig { cache_dir: Some(cache.path().to_owned()), ..WasmConfig::default() };
    let first = TestHost::with_config(config.clone());
    first.host.load_path_granted(&LIMITS.folder(first.skills.path())).await.unwrap();
    let entry = walk(cache.path()).into_iter().find(|p| p.extension().is_some_and(|e| e == "cwasm")).unwrap();
    std::fs::write(&entry, b"not compiled code").unwrap();

    let second = TestHost::with_config(config);
    let loaded = second.host.load_path_granted(&LIMITS.folder(second.skills.path())).await.unwrap();
    assert_eq!(loaded.cache_outcome(), Some(CacheOutcome::Compiled));
    assert_eq!(ok(&loaded, "echo", json!({"value": "fine"})).await, json!("fine"));
}

/// A component's bytes stay in memory only until the compiled cache holds its code; a
/// compile that needs them later reads the file again and takes exactly the bytes that
/// were loaded, never others put there since (the next reload picks those up, and asks
/// a human as any change does).
#[tokio::test]
async fn a_cached_components_bytes_are_let_go_and_read_again_only_as_they_were() {
    use skillhost_core::{Skill, SkillRuntime};
    let data = tempfile::tempdir().unwrap();
    let skills = tempfile::tempdir().unwrap();
    let dir = LIMITS.folder(skills.path());
    let runtime = || {
        let config = WasmConfig { cache_dir: Some(data.path().join("cache")), ..WasmConfig::default() };
        skillhost_wasm::WasmRuntime::new(config).unwrap()
    };
    let source = || skillhost_package::read_source(&dir, &Default::default()).unwrap();
    let policy = skillhost::skill::Policy::new(data.path().join("skills"));
    let grant = || {
        let source = source();
        skillhost::skill::Grant::new(&source.manifest, &policy, &skillhost::skill::DataKey::named(&source.manifest.name)).unwrap()
    };
    let call = async |skill: &dyn Skill, value: i64| {
        tokio::time::timeout(crate::HANG_GUARD, skill.call("echo", json!({"value": value}), Default::default()))
            .await
            .expect("the call hung")
    };

    // Loading asked the component for its tools: compiled, stored, and let go.
    let first = runtime().load_wasm(&source(), grant()).await.unwrap();
    assert_eq!(first.cache_outcome(), Some(CacheOutcome::Compiled));
    assert!(!first.holds_component_bytes(), "the cache holds its code");
    let listing = first.listing().unwrap();

    // A restart with the kept listing compiles nothing and holds no bytes; the first call
    // reads the code from the cache.
    let restarted = runtime();
    let skill = restarted.load_wasm_listed(&source(), grant(), &listing).await.unwrap();
    assert_eq!(skill.cache_outcome(), Some(CacheOutcome::Deferred));
    assert!(!skill.holds_component_bytes());
    assert_eq!(call(&*skill, 1).await.unwrap().value, json!(1));
    assert_eq!(skill.cache_outcome(), Some(CacheOutcome::Hit));

    // The cache entry gone, the file unchanged: read again, checked, compiled.
    let entry = || walk(data.path()).into_iter().find(|p| p.extension().is_some_and(|e| e == "cwasm")).unwrap();
    let again = runtime();
    let skill = again.load_listed(&source(), grant(), &listing).await.unwrap();
    std::fs::remove_file(entry()).unwrap();
    assert_eq!(call(&*skill, 2).await.unwrap().value, json!(2));
    assert_eq!(skill.cache_outcome(), Some(CacheOutcome::Compiled));

    // The cache entry gone and the file now another component: refused, nothing runs.
    let swapped = runtime();
    let skill = swapped.load_listed(&source(), grant(), &listing).await.unwrap();
    std::fs::remove_file(entry()).unwrap();
    std::fs::copy(fixtures::ESCAPE.wasm, dir.join("skill.wasm")).unwrap();
    let err = call(&*skill, 3).await.unwrap_err();
    assert!(err.to_string().contains("holds other bytes than the ones loaded"), "{err}");
    assert_eq!(swapped.cache_stats().compiled, 0, "the other component was not compiled");
}

/// A component whose compile costs the host gigabytes: the real `limits` guest with one
/// more core module, a single function of 7.5 MB (2.5 million `i32.const` left on the
/// stack, then added up), which Cranelift needs about 2.4 GB to compile (300 times its
/// size; a skill may be 64 MiB). The compile worker is held to
/// `MAX_COMPILE_MEMORY` (2 GiB of heap): it is stopped there, the load is refused saying
/// so, and nothing is cached. Unbounded, the worker took what it wanted (and, compiling
/// functions in parallel, that much per core).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_costly_to_compile_is_stopped_at_the_workers_memory_limit() {
    let data = tempfile::tempdir().unwrap();
    let host = TestHost::with_config(WasmConfig {
        cache_dir: Some(data.path().join("cache")),
        compile_worker: Some(vec![env!("CARGO_BIN_EXE_skillhost-compile").into(), skillhost_wasm::worker::SUBCOMMAND.into()]),
        ..WasmConfig::default()
    });
    let dir = LIMITS.folder(host.skills.path());
    let mut hostile = std::fs::read(dir.join("skill.wasm")).unwrap();
    let mut body = vec![0]; // no locals
    for _ in 0..2_500_000 {
        body.extend_from_slice(&[0x41, 0x01]); // i32.const 1
    }
    body.extend(std::iter::repeat_n(0x6a, 2_499_999)); // i32.add
    body.extend_from_slice(&[0x1a, 0x0b]); // drop, end
    let mut code = vec![1];
    leb128(&mut code, body.len());
    code.extend_from_slice(&body);
    let mut module = b"\0asm\x01\0\0\0".to_vec();
    section(&mut module, 1, &[1, 0x60, 0, 0]); // one type: [] -> []
    section(&mut module, 3, &[1, 0]); // one function of it
    section(&mut module, 10, &code);
    section(&mut hostile, 1, &module); // a core module the component never instantiates
    std::fs::write(dir.join("skill.wasm"), hostile).unwrap();

    let refused = host.host.load_path_granted(&dir).await.expect_err("a compile past the worker's memory limit was not stopped");
    let refused = refused.to_string();
    assert!(refused.contains("memory") && refused.contains("compile worker"), "{refused}");
    assert_eq!(cwasm_files(data.path()), 0, "nothing cached");
}

/// `n` as unsigned LEB128, appended to `out`.
fn leb128(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A section `id` holding `content`, appended to `out`.
fn section(out: &mut Vec<u8>, id: u8, content: &[u8]) {
    out.push(id);
    leb128(out, content.len());
    out.extend_from_slice(content);
}

/// A host killed (SIGKILL, the OOM killer) while its worker compiles takes the worker
/// with it: nothing is left to stop it at the compile limit, and its code can never be
/// stored. Here the "host" is a shell whose worker waits on a pipe that stays open (as
/// one compiling for minutes would run on): killed, its worker must be gone.
#[test]
fn a_compile_worker_dies_with_the_host_that_started_it() {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let worker = env!("CARGO_BIN_EXE_skillhost-compile");
    let script = format!(
        "sleep 1000 | '{worker}' {} max-instances=64 max-memory=1073741824 optimize=true baseline-compile=false >/dev/null & echo $!; wait",
        skillhost_wasm::worker::SUBCOMMAND
    );
    let mut host =
        std::process::Command::new("/bin/sh").args(["-c", &script]).stdout(std::process::Stdio::piped()).process_group(0).spawn().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(host.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let pid: i32 = line.trim().parse().unwrap();
    let alive = || std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty());
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(alive(), "the worker started");
    host.kill().unwrap();
    host.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while alive() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let orphaned = alive();
    // The rest of the shell's group (the sleep, and the worker if it outlived its host).
    let _ = rustix::process::kill_process_group(rustix::process::Pid::from_raw(host.id() as i32).unwrap(), rustix::process::Signal::KILL);
    assert!(!orphaned, "the compile worker outlived its host");
}
