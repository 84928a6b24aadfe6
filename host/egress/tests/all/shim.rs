//! The shim: its argument format round-trips; the bridge carries a proxied request from
//! TCP to the proxy's Unix socket; run as a real process (this test binary re-executed,
//! see [`helper`]), it passes on the command's exit status, reaps orphans, forwards
//! SIGTERM and points the command at the proxy.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::ffi::OsStringExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use skillhost_egress::ShimArgs;
use skillhost_egress::shim::{self, ShimArgsError};
use tokio::net::TcpListener;

use crate::{TableResolver, TestProxy, http_server};

/// The environment variable carrying the helper's shim arguments, separated by 0x1f.
const HELPER_ARGS: &str = "SKILLHOST_EGRESS_SHIM_HELPER";

/// Not a test of its own: when [`HELPER_ARGS`] is set, this process is a shim started by
/// one of the tests below, and it runs the shim and exits with its status.
#[test]
fn helper() {
    let Some(args) = std::env::var_os(HELPER_ARGS) else { return };
    let args = args.into_vec().split(|b| *b == 0x1f).map(|a| OsString::from_vec(a.to_vec())).collect::<Vec<_>>();
    let args = ShimArgs::parse_from(args).expect("helper args parse");
    std::process::exit(i32::from(shim::run_status(args)));
}

/// Start the shim with `args` in a child process (this binary, running only [`helper`]).
fn spawn_shim(args: &ShimArgs, stdout: Stdio) -> Child {
    let joined = args.to_args().into_iter().map(OsString::into_vec).collect::<Vec<_>>().join(&0x1f);
    Command::new(std::env::current_exe().unwrap())
        .args(["shim::helper", "--exact", "--nocapture", "--test-threads=1", "-q"])
        .env(HELPER_ARGS, OsString::from_vec(joined))
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Its exit code, or a panic after 10 s (the shim is killed first).
fn exit_code(mut child: Child) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().expect("the shim exits, it is not killed");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the shim did not exit");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn sh(script: &str) -> ShimArgs {
    ShimArgs::new(["/bin/sh", "-c", script])
}

#[test]
fn arguments_round_trip_and_bad_ones_are_refused() {
    let args = ShimArgs::new(["python3", "-m", "server", "--", "--port"]).with_proxy("/run/egress.sock", 3128);
    let written = args.to_args();
    assert_eq!(
        written,
        ["--socket", "/run/egress.sock", "--port", "3128", "--", "python3", "-m", "server", "--", "--port"].map(OsString::from)
    );
    assert_eq!(ShimArgs::parse_from(written).unwrap(), args);
    let plain = ShimArgs::new(["true"]);
    assert_eq!(plain.to_args(), ["--", "true"].map(OsString::from));
    assert_eq!(ShimArgs::parse_from(plain.to_args()).unwrap(), plain);

    let bad = |args: &[&str]| ShimArgs::parse_from(args.iter().copied()).unwrap_err();
    for (args, why) in [
        (&["true"][..], "no `--`"),
        (&["--"][..], "no command"),
        (&["--socket"][..], "needs a value"),
        (&["--socket", "/s", "--port", "http", "--", "true"][..], "not a port number"),
        (&["--port", "1", "--", "true"][..], "without `--socket`"),
        (&["--verbose", "--", "true"][..], "unknown argument `--verbose`"),
    ] {
        let ShimArgsError { reason } = bad(args);
        assert!(reason.contains(why), "{args:?}: {reason}");
    }
}

#[tokio::test]
async fn the_bridge_carries_a_proxied_request_from_tcp_to_the_unix_socket() {
    let server = http_server().await;
    let t = TestProxy::start(&[format!("http://127.0.0.1:{}", server.port())], &[], TableResolver::with(&[]), |_, _| {});
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let bridge = tokio::spawn(shim::bridge(listener, t.path()));

    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let request = format!("GET http://127.0.0.1:{}/hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", server.port());
    tokio::io::AsyncWriteExt::write_all(&mut tcp, request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut tcp, &mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with(&format!("hello from upstream; host=127.0.0.1:{}", server.port())), "{answer}");
    assert_eq!(t.audit.wait_for(1).await.len(), 1, "the request went through the proxy");
    bridge.abort();
}

#[test]
fn the_command_exit_status_is_the_shim_exit_status() {
    assert_eq!(exit_code(spawn_shim(&sh("exit 3"), Stdio::null())), 3);
    assert_eq!(exit_code(spawn_shim(&sh("exit 0"), Stdio::null())), 0);
    assert_eq!(exit_code(spawn_shim(&sh("kill -KILL $$"), Stdio::null())), 128 + 9, "a signal is 128 + N");
    let missing = ShimArgs::new(["/nonexistent/skill-server"]);
    assert_eq!(exit_code(spawn_shim(&missing, Stdio::null())), 127);
}

#[test]
fn orphans_are_reparented_to_the_shim_and_reaped() {
    // The inner shell leaves a `sleep` behind and exits; the orphan must get the shim
    // (the command's parent) as its parent, and be gone, not a zombie, once it exits.
    let script = r#"
        orphan=$(sh -c 'sleep 0.3 >/dev/null 2>&1 & echo $!')
        while read key value; do [ "$key" = "PPid:" ] && ppid=$value; done < /proc/$orphan/status
        [ "$ppid" = "$PPID" ] || exit 10
        sleep 0.8
        [ -e /proc/$orphan ] && exit 11
        exit 0
    "#;
    assert_eq!(exit_code(spawn_shim(&sh(script), Stdio::null())), 0, "10: not reparented to the shim; 11: not reaped");
}

#[test]
fn sigterm_is_forwarded_to_the_command() {
    let script = r#"trap 'exit 7' TERM; echo ready; while :; do sleep 0.05; done"#;
    let mut child = spawn_shim(&sh(script), Stdio::piped());
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while line.trim() != "ready" {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "the command did not start");
    }
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    assert_eq!(exit_code(child), 7, "the command got SIGTERM and its status came back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_in_the_shim_reaches_the_proxy_through_http_proxy() {
    let server = http_server().await;
    let t = TestProxy::start(&[format!("http://127.0.0.1:{}", server.port())], &[], TableResolver::with(&[]), |_, _| {});
    // Port 0: the shim picks one and tells the command through HTTP_PROXY. bash's
    // /dev/tcp speaks to it like any HTTP client would.
    let script = format!(
        r#"hostport=${{HTTP_PROXY#http://}}; [ "$HTTPS_PROXY" = "$HTTP_PROXY" ] || exit 9
        exec 3<>/dev/tcp/${{hostport%:*}}/${{hostport#*:}}
        printf 'GET http://127.0.0.1:{}/hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' >&3
        cat <&3"#,
        server.port()
    );
    let args = ShimArgs::new(["/bin/bash", "-c", &script]).with_proxy(t.path(), 0);
    let output = tokio::task::spawn_blocking(move || {
        let mut child = spawn_shim(&args, Stdio::piped());
        let mut out = String::new();
        child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        (exit_code(child), out)
    })
    .await
    .unwrap();
    assert_eq!(output.0, 0, "{}", output.1);
    assert!(output.1.contains("HTTP/1.1 200"), "{}", output.1);
    assert!(output.1.contains(&format!("hello from upstream; host=127.0.0.1:{}", server.port())), "{}", output.1);
    let rows = t.audit.wait_for(1).await;
    assert_eq!(rows[0].url, format!("http://127.0.0.1:{}/hello", server.port()));
}
