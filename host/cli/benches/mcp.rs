//! A trivial wasm tool called over stdio MCP against the same call in process
//! (`Registry::call`), in one run. Two clients of the `skillhost serve` child: a raw
//! JSON-RPC line client on blocking pipes (what the server itself costs) and rmcp's
//! client (what a Rust agent would see).

#![allow(missing_docs, reason = "criterion's macros generate undocumented items")]

use std::io::{BufRead, BufReader, Write};

use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::json;
use skillhost::{CallContext, Host};

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let skills = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    fixtures::LIMITS.folder(skills.path());

    let registry = rt.block_on(async {
        let host = Host::builder().data_dir(data.path()).build().unwrap();
        let mut config = host.registry_config();
        config.workspace = Some(skills.path().to_owned());
        config.watch = false;
        host.open_registry(config).await.unwrap()
    });
    let input = json!({"value": 1});
    c.bench_function("mcp/in_process", |b| {
        b.iter(|| rt.block_on(registry.call("limits", "echo", input.clone(), CallContext::default())).unwrap())
    });

    let client = rt.block_on(async {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_skillhost"));
        cmd.arg("--skills").arg(skills.path()).arg("--data-dir").arg(data.path()).arg("serve");
        ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap()
    });
    let args = input.as_object().unwrap().clone();
    c.bench_function("mcp/stdio_round_trip_rmcp", |b| {
        b.iter(|| {
            let params = CallToolRequestParams::new("limits__echo").with_arguments(args.clone());
            let result = rt.block_on(client.call_tool(params)).unwrap();
            assert_eq!(result.is_error, Some(false));
        })
    });
    rt.block_on(client.cancel()).unwrap();

    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .arg("--skills")
        .arg(skills.path())
        .arg("--data-dir")
        .arg(data.path())
        .arg("serve")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut exchange = |line: &str| {
        stdin.write_all(line.as_bytes()).unwrap();
        let mut reply = String::new();
        stdout.read_line(&mut reply).unwrap();
        reply
    };
    exchange(concat!(
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","#,
        r#""capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#,
        "\n"
    ));
    // A notification gets no reply: send it with the first call.
    let initialized = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
    let call =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"limits__echo\",\"arguments\":{\"value\":1}}}\n";
    let first = exchange(&format!("{initialized}{call}"));
    assert!(first.contains("\"isError\":false"), "{first}");
    c.bench_function("mcp/stdio_round_trip_raw", |b| {
        b.iter(|| {
            let reply = exchange(call);
            assert!(reply.contains("\"isError\":false"), "{reply}");
        })
    });
    let _ = child.kill();
    let _ = child.wait();
}

criterion_group!(benches, bench);
criterion_main!(benches);
