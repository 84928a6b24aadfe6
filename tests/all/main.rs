//! The workspace integration tests: one binary (link time on two cores), one module per
//! concern. Guests are built from source by `tests/build.rs`.

mod bundled;
mod cache;
mod contract;
mod escape;
mod fetch_server;
mod generic;
mod hostile_files;
mod hostile_listing;
mod hostile_text;
mod https_attacks;
mod https_node;
mod https_secrets;
mod life_approval;
mod life_forge;
mod life_limits;
mod life_mcp;
mod life_proxy;
mod limits;
mod listing;
mod load_errors;
mod mcp_front;
mod mcp_limits;
mod mcp_run;
mod mcp_skills;
mod network;
mod sandbox;
mod scripts;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use fixtures::TestHost;
use serde_json::Value;
use skillhost::{CallContext, CallError, DirectSkill, HostError, ToolOutput};

/// The compiled cache shared by tests that do not test the cache itself.
fn shared_cache() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// A host over fresh directories with the shared compiled cache.
fn test_host() -> TestHost {
    TestHost::new(&shared_cache().join("compiled"))
}

/// A host over `data` with the sandbox runtime (the test venv, the egress shim) and the
/// shared compiled cache; fails the test if bubblewrap or the venv is missing.
fn sandbox_host(data: &Path) -> skillhost::Host {
    sandbox_host_with(data, |_| {})
}

/// [`sandbox_host`], its sandbox's configuration changed by `adjust` first.
fn sandbox_host_with(data: &Path, adjust: impl FnOnce(&mut skillhost::runtime::BwrapConfig)) -> skillhost::Host {
    let host = skillhost::Host::builder()
        .data_dir(data)
        .cache_dir(shared_cache().join("compiled"))
        .sandbox_config({
            let mut config = fixtures::python::sandbox_config(data);
            config.shim = Some(vec![env!("CARGO_BIN_EXE_skillhost-shim").into()]);
            config.init = Some(vec![env!("CARGO_BIN_EXE_skillhost-run-init").into()]);
            adjust(&mut config);
            config
        })
        .build()
        .unwrap();
    assert!(host.sandbox().is_ok(), "no sandbox runtime: {:?}; run scripts/setup.sh", host.sandbox().err());
    host
}

/// One raw HTTP/1.1 request to `addr`; the status line of the answer.
async fn status_of(addr: std::net::SocketAddr, request: String) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_owned()
    };
    tokio::time::timeout(HANG_GUARD, exchange).await.expect("the HTTP front hung")
}

/// A guard against a hung host: a call that has not returned after this is a failure.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// The pids of the processes whose command line (arguments joined by spaces) contains
/// `needle`.
fn processes_with(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok().map(|pid| (pid, e.path())))
        .filter(|(_, path)| {
            std::fs::read(path.join("cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(needle))
        })
        .map(|(pid, _)| pid)
        .collect()
}

/// Wait (up to 20 s) until no process's command line contains `needle`; those left.
async fn wait_gone(needle: &str) -> Vec<u32> {
    for _ in 0..200 {
        if processes_with(needle).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    processes_with(needle)
}

/// Call `tool` of `skill` and return the result, failing the test if it hangs.
async fn call(skill: &DirectSkill, tool: &str, input: Value) -> Result<ToolOutput, CallError> {
    call_with(skill, tool, input, CallContext::default()).await
}

async fn call_with(skill: &DirectSkill, tool: &str, input: Value, cx: CallContext) -> Result<ToolOutput, CallError> {
    tokio::time::timeout(HANG_GUARD, skill.skill.call(tool, input, cx))
        .await
        .unwrap_or_else(|_| panic!("{tool} did not return within {HANG_GUARD:?}: the host hung"))
}

/// A call context whose progress reports are kept, and the list they are kept in.
fn recording_progress() -> (Arc<std::sync::Mutex<Vec<skillhost::skill::Progress>>>, CallContext) {
    let seen: Arc<std::sync::Mutex<Vec<skillhost::skill::Progress>>> = Arc::default();
    let sink = seen.clone();
    let cx = CallContext { progress: Some(Arc::new(move |p| sink.lock().unwrap().push(p))), ..CallContext::default() };
    (seen, cx)
}

/// Call and expect success; returns the output value.
async fn ok(skill: &DirectSkill, tool: &str, input: Value) -> Value {
    match call(skill, tool, input).await {
        Ok(out) => out.value,
        Err(e) => panic!("{tool} failed: {e}"),
    }
}

/// The message of a load error, checked to be one line.
fn load_error(result: Result<DirectSkill, HostError>) -> String {
    let err = match result {
        Ok(loaded) => panic!("expected a load error, loaded `{}`", loaded.source.manifest.name),
        Err(e) => e.to_string(),
    };
    assert!(!err.contains('\n'), "a load error is one line: {err:?}");
    err
}

/// A thread that keeps exchanging pairs of names in `dir` until stopped, to race a
/// reader's checks (TOCTOU): each exchange is one `renameat2(RENAME_EXCHANGE)`, so the
/// folder always holds one side of a pair or the other (a file and a symlink to a
/// secret, say), never neither.
struct Swapper {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Swapper {
    fn start(dir: &Path, pairs: &'static [(&'static str, &'static str)]) -> Self {
        use std::sync::atomic::Ordering;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (dir, flag) = (dir.to_owned(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut rounds = 0u64;
            while !flag.load(Ordering::Relaxed) {
                for (a, b) in pairs {
                    rustix::fs::renameat_with(
                        rustix::fs::CWD,
                        dir.join(a),
                        rustix::fs::CWD,
                        dir.join(b),
                        rustix::fs::RenameFlags::EXCHANGE,
                    )
                    .unwrap();
                }
                rounds += 1;
            }
            rounds
        });
        Self { stop, thread: Some(thread) }
    }

    /// Stop swapping; the number of rounds made.
    fn stop(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().map(|t| t.join().expect("the swapper thread panicked")).unwrap_or_default()
    }
}

/// A test that fails mid-race stops its swapper too.
impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Keep `Arc` in scope for modules that share loaded skills across tasks.
#[allow(dead_code)]
type Shared<T> = Arc<T>;
