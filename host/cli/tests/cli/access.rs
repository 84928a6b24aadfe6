//! Callers and the org policy over `serve --http`: two callers with tokens of their own
//! (`skillhost caller add`) and a policy in Cedar. The reader may call the skill's `echo`
//! but not its `sleep`, nor create skills; the writer may; a `forbid` keeps `fail` from
//! both though the writer's permit covers the whole skill. Each sees only its tools in
//! `tools/list` and `tool_search`, every decision is audited with the policy that made it,
//! a policy that does not validate is refused at reload while the set in force keeps
//! serving, and a token unknown, removed or expired gets a 401.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::ops::request;
use crate::{Env, Served};

const POLICY: &str = r#"@id("readers-echo")
permit(principal in Group::"readers", action == Action::"call", resource == Tool::"limits__echo");

@id("writers-limits")
permit(principal in Group::"writers", action == Action::"call", resource in Skill::"limits");

@id("writers-forge")
permit(principal in Group::"writers", action in [Action::"create", Action::"update"], resource);

@id("everyone-reads")
permit(principal, action in [Action::"list", Action::"read"], resource);

@id("nobody-fails")
forbid(principal, action == Action::"call", resource == Tool::"limits__fail");
"#;

/// One stateless (2026-07-28) request with `token` (a client without elicitation, unless
/// `params` has its own `_meta`).
fn rpc(addr: &str, token: &str, method: &str, name: &str, params: Value) -> crate::ops::Response {
    let mut params = params;
    if params.get("_meta").is_none() {
        params["_meta"] =
            json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let auth = format!("Bearer {token}");
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
        ("Mcp-Name", name),
    ];
    request(addr, "POST", "/mcp", &headers, &body)
}

fn tools(addr: &str, token: &str) -> Vec<String> {
    let listed = rpc(addr, token, "tools/list", "", json!({})).message();
    let tools = listed["result"]["tools"].as_array().unwrap_or_else(|| panic!("no tools: {listed}"));
    tools.iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

fn call(addr: &str, token: &str, tool: &str, arguments: Value) -> Value {
    rpc(addr, token, "tools/call", tool, json!({"name": tool, "arguments": arguments})).message()
}

/// The text of a call's answer, and whether it is an error.
fn answer(reply: &Value) -> (String, bool) {
    let text = reply["result"]["content"].as_array().into_iter().flatten().filter_map(|b| b["text"].as_str()).collect();
    (text, reply["result"]["isError"] == true)
}

fn searched(addr: &str, token: &str) -> Vec<String> {
    let found = call(addr, token, "tool_search", json!({"query": "limits", "search_type": "regex"}));
    let tools = found["result"]["structuredContent"]["tools"].as_array().unwrap_or_else(|| panic!("{found}"));
    tools.iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

/// `serve --http LISTEN` over `env` with the operator's token `operator-token-0123456789`:
/// the address it serves at, its stderr's lines as they come, and the process.
fn serve(env: &Env, listen: &str) -> (String, std::sync::mpsc::Receiver<String>, Served) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .arg("--skills")
        .arg(env.skills.path())
        .arg("--data-dir")
        .arg(env.data.path())
        .args(["serve", "--http", listen])
        .env("SKILLHOST_MCP_TOKEN", "operator-token-0123456789")
        .env("SKILLHOST_LOG", "warn")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut said = Vec::new();
    let addr = loop {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "serve exited before listening: {}", said.join(""));
        if let Some(rest) = line.trim().strip_prefix("skillhost: serving MCP at http://") {
            break rest.split('/').next().unwrap().to_owned();
        }
        said.push(line);
    };
    let (lines, reading) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    (addr, reading, Served(child))
}

/// `limits` in `env`'s skills, and the org policy [`POLICY`] in its config.
fn limits_under_policy(env: &Env, config: &str) -> std::path::PathBuf {
    let dir = env.skills.path().join("limits");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixtures::LIMITS.wasm, dir.join("skill.wasm")).unwrap();
    std::fs::write(dir.join("skill.toml"), fixtures::LIMITS.manifest()).unwrap();
    let policy = env.data.path().join("policy");
    std::fs::create_dir_all(&policy).unwrap();
    std::fs::write(policy.join("team.cedar"), POLICY).unwrap();
    std::fs::write(env.data.path().join("config.toml"), format!("[org]\npolicies = \"policy\"\n{config}")).unwrap();
    policy
}

/// Wait until `token`'s caller sees `tool` (the skills load in the background).
/// `skillhost audit ARGS --json`, read again (for up to a minute) until `done` says its
/// rows are all there: `serve` writes them from a thread of its own.
fn audit_until(env: &Env, args: &[&str], done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = env.run(&[&["audit"], args, &["--json"]].concat());
        let rows: Vec<Value> =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        if done(&rows) || Instant::now() > deadline {
            return rows;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn wait_for_tool(addr: &str, token: &str, tool: &str) {
    let started = Instant::now();
    while !tools(addr, token).iter().any(|t| t == tool) {
        assert!(started.elapsed() < Duration::from_secs(60), "{tool} never loaded");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn two_callers_see_and_do_what_the_org_policy_permits_and_every_decision_is_audited() {
    let env = Env::new();
    let policy = limits_under_policy(&env, "");
    let add = |name: &str, group: &str, extra: &[&str]| {
        let out = env.run(&[&["caller", "add", name, "--group", group, "--json"][..], extra].concat());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let added: Value = serde_json::from_slice(&out.stdout).unwrap();
        added["token"].as_str().unwrap().to_owned()
    };
    let reader = add("reader", "readers", &[]);
    let writer = add("writer", "writers", &[]);
    let brief = add("brief", "writers", &["--expires", "1s"]);
    let brief_expires = Instant::now() + Duration::from_secs(1);
    let gone = add("gone", "writers", &[]);
    assert!(env.run(&["caller", "remove", "gone"]).status.success());
    let listed = String::from_utf8_lossy(&env.run(&["caller", "list"]).stdout).into_owned();
    assert!(listed.contains("reader") && listed.contains("readers") && !listed.contains(&reader), "tokens are never listed: {listed}");

    let (addr, reading, _served) = serve(&env, "127.0.0.1:0");

    // What each sees: its tools, and the forge only for the writer.
    wait_for_tool(&addr, &reader, "limits__echo");
    let (reader_tools, writer_tools) = (tools(&addr, &reader), tools(&addr, &writer));
    let skill_tools = |all: &[String]| all.iter().filter(|t| t.starts_with("limits__")).cloned().collect::<Vec<_>>();
    assert_eq!(skill_tools(&reader_tools), ["limits__echo"], "{reader_tools:?}");
    assert!(!skill_tools(&writer_tools).contains(&"limits__fail".to_owned()), "a forbid hides it: {writer_tools:?}");
    assert!(skill_tools(&writer_tools).contains(&"limits__sleep".to_owned()), "{writer_tools:?}");
    assert!(!reader_tools.contains(&"skill_create".to_owned()) && writer_tools.contains(&"skill_create".to_owned()));
    assert_eq!(searched(&addr, &reader), ["limits__echo"], "tool_search is filtered the same way");
    assert!(!searched(&addr, &writer).contains(&"limits__fail".to_owned()));

    // What each may do, and why not.
    let (text, error) = answer(&call(&addr, &reader, "limits__echo", json!({"value": 1})));
    assert!(!error, "{text}");
    let (text, error) = answer(&call(&addr, &reader, "limits__sleep", json!({"ms": 1})));
    assert!(error && text.contains("caller `reader` may not call Tool::\"limits__sleep\": no policy permits it"), "{text}");
    let (text, error) = answer(&call(&addr, &writer, "limits__fail", json!({"kind": "failed"})));
    assert!(error && text.contains("forbidden by `nobody-fails`"), "a forbid beats the writer's permit: {text}");
    let (text, error) = answer(&call(&addr, &reader, "skill_create", json!({"name": "evil", "language": "rust", "source": "x"})));
    assert!(error && text.contains("caller `reader` may not create Skill::\"evil\""), "{text}");
    let (text, error) = answer(&call(&addr, &writer, "limits__sleep", json!({"ms": 1})));
    assert!(!error, "{text}");
    let operator = tools(&addr, "operator-token-0123456789");
    assert!(skill_tools(&operator).is_empty(), "no policy names the operator: default deny: {operator:?}");

    // Tokens nobody holds any more.
    std::thread::sleep(brief_expires.saturating_duration_since(Instant::now()) + Duration::from_millis(100));
    for (token, why) in
        [(gone.as_str(), "unknown bearer token"), ("skh_made-up", "unknown bearer token"), (brief.as_str(), "expired bearer token")]
    {
        let refused = rpc(&addr, token, "tools/list", "", json!({}));
        assert_eq!(refused.status, 401, "{why}: {}", refused.body);
        assert!(refused.body.contains(why), "{}", refused.body);
        assert!(refused.header("www-authenticate").unwrap_or_default().contains("invalid_token"), "{:?}", refused.headers);
    }

    // A policy that does not validate is refused; the set in force keeps serving.
    std::fs::write(policy.join("typo.cedar"), "permit(principal in Group::\"readers\", action == Action::\"cal\", resource);").unwrap();
    let refused = reading.iter().find(|line| line.contains("org policy change is refused")).expect("the refusal is said");
    assert!(refused.contains("cal"), "{refused}");
    assert!(!answer(&call(&addr, &reader, "limits__echo", json!({"value": 2}))).1, "the old set serves");
    std::fs::write(
        policy.join("typo.cedar"),
        "@id(\"quiet\")\nforbid(principal in Group::\"readers\", action, resource == Tool::\"limits__echo\");",
    )
    .unwrap();
    let started = Instant::now();
    while !answer(&call(&addr, &reader, "limits__echo", json!({"value": 3}))).1 {
        assert!(started.elapsed() < Duration::from_secs(20), "the valid change never took effect");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (text, _) = answer(&call(&addr, &reader, "limits__echo", json!({"value": 4})));
    assert!(text.contains("forbidden by `quiet`"), "{text}");

    // `show` prints both layers: what the skill may touch, and who may use it.
    let shown = env.run(&["show", "limits"]);
    let text = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(text.contains("org policy (") && text.contains("who may use it"), "{text}");
    for line in ["permit readers-echo:", "permit writers-limits:", "forbid nobody-fails:", "forbid quiet:"] {
        assert!(text.lines().any(|l| l.trim_start().starts_with(line)), "{line}: {text}");
    }
    let shown: Value = serde_json::from_slice(&env.run(&["show", "limits", "--json"]).stdout).unwrap();
    let ids: Vec<&str> = shown["org_policy"]["policies"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["everyone-reads", "nobody-fails", "quiet", "readers-echo", "writers-forge", "writers-limits"]);

    // Every decision, with its caller and the policies that made it.
    let rows = audit_until(&env, &["--caller", "reader"], |rows| rows.iter().any(|r| r["resource"] == "Skill::\"evil\""));
    let find = |resource: &str, allowed: bool| rows.iter().find(|r| r["resource"] == resource && r["allowed"] == allowed);
    let allowed = find("Tool::\"limits__echo\"", true).unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(allowed["policies"], json!(["readers-echo"]));
    let denied = find("Tool::\"limits__sleep\"", false).unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!((&denied["action"], &denied["policies"]), (&json!("call"), &json!([])), "the default deny names no policy");
    assert!(find("Skill::\"evil\"", false).is_some(), "{rows:?}");
    assert!(rows.iter().all(|r| r["caller"] == "reader"), "only the reader's: {rows:?}");
    let text = String::from_utf8_lossy(&env.run(&["audit", "--caller", "writer"]).stdout).into_owned();
    assert!(text.lines().any(|l| l.contains("limits__fail") && l.contains("refused") && l.contains("nobody-fails")), "{text}");
}

/// Unix seconds now.
fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

#[test]
fn oauth_access_tokens_from_the_configured_issuer_name_callers_and_anything_else_gets_401_naming_the_metadata() {
    use fixtures::issuer::{Issuer, SigningKey};

    let env = Env::new();
    let key = SigningKey::new("k1");
    let issuer = Issuer::start(&key);
    // The resource is this server's URL as clients reach it: its port is chosen first.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let oauth = format!(
        "[oauth]\nissuer = \"{}\"\nresource = \"{resource}\"\njwks_url = \"{}\"\nscopes_supported = [\"skills\"]\n",
        issuer.id(),
        issuer.jwks_url()
    );
    limits_under_policy(&env, &oauth);
    let (addr, _reading, _served) = serve(&env, &format!("127.0.0.1:{port}"));
    let started = Instant::now();
    assert_eq!(issuer.fetches(), 1, "the keys are fetched at start");

    // The metadata, without a token, at the resource's path and the bare well-known one.
    let metadata_url = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp");
    for path in ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"] {
        let got = request(&addr, "GET", path, &[], "");
        assert_eq!(got.status, 200, "{path}: {}", got.body);
        let metadata: Value = serde_json::from_str(&got.body).unwrap();
        assert_eq!(metadata["resource"], resource.as_str());
        assert_eq!(metadata["authorization_servers"], json!([issuer.id()]));
        assert_eq!(metadata["scopes_supported"], json!(["skills"]));
    }

    let claims = |sub: &str, aud: &str, exp: u64| json!({"iss": issuer.id(), "aud": aud, "sub": sub, "exp": exp, "iat": unix_now(), "groups": ["readers"], "scope": "skills"});
    let later = unix_now() + 600;

    // A valid token names its caller; its groups reach the org policy.
    let alice = key.sign(&claims("alice@example.com", &resource, later));
    wait_for_tool(&addr, &alice, "limits__echo");
    let seen: Vec<String> = tools(&addr, &alice).into_iter().filter(|t| t.starts_with("limits__")).collect();
    assert_eq!(seen, ["limits__echo"], "a reader by its token's groups claim");
    let (text, error) = answer(&call(&addr, &alice, "limits__echo", json!({"value": 7})));
    assert!(!error, "{text}");
    let (text, error) = answer(&call(&addr, &alice, "limits__sleep", json!({"ms": 1})));
    assert!(error && text.contains("caller `alice@example.com` may not call"), "{text}");

    // Anything else: 401, naming the metadata.
    let other = SigningKey::new("k1");
    let refused = [
        ("an expired token", key.sign(&claims("alice@example.com", &resource, unix_now() - 120)), "expired"),
        (
            "a token for another audience",
            key.sign(&claims("alice@example.com", "http://elsewhere.example/mcp", later)),
            "not meant for this server",
        ),
        ("a token signed by another key under the same kid", other.sign(&claims("alice@example.com", &resource, later)), "signature"),
        ("a token naming the operator", key.sign(&claims("operator", &resource, later)), "keeps for itself"),
    ];
    for (what, token, why) in &refused {
        let got = rpc(&addr, token, "tools/list", "", json!({}));
        assert_eq!(got.status, 401, "{what}: {}", got.body);
        assert!(got.body.contains(why), "{what}: {}", got.body);
        let challenge = got.header("www-authenticate").unwrap_or_default();
        assert!(challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")), "{what}: {challenge}");
        assert!(challenge.contains("error=\"invalid_token\""), "{what}: {challenge}");
    }
    let bare = request(&addr, "POST", "/mcp", &[("Content-Type", "application/json")], "{}");
    assert_eq!(bare.status, 401);
    let challenge = bare.header("www-authenticate").unwrap_or_default();
    assert_eq!(challenge, format!("Bearer resource_metadata=\"{metadata_url}\""), "no token: where to get one, no error");

    // Names and groups the issuer's users may shape: look-alikes of the host's own names
    // refused, a string of groups one group, groups left out of the token refused.
    for sub in ["Operator", "\u{43e}perator", "local\u{202e}"] {
        let got = rpc(&addr, &key.sign(&claims(sub, &resource, later)), "tools/list", "", json!({}));
        assert_eq!(got.status, 401, "{sub:?}: {}", got.body);
    }
    let mut spaced = claims("carol", &resource, later);
    spaced["groups"] = json!("readers admins");
    let (text, error) = answer(&call(&addr, &key.sign(&spaced), "limits__echo", json!({"value": 1})));
    assert!(error && text.contains("caller `carol` may not call"), "`readers admins` is one group, not `readers`: {text}");
    let mut elsewhere = claims("dave", &resource, later);
    elsewhere.as_object_mut().unwrap().remove("groups");
    elsewhere["_claim_names"] = json!({"groups": "src1"});
    let got = rpc(&addr, &key.sign(&elsewhere), "tools/list", "", json!({}));
    assert!(got.status == 401 && got.body.contains("_claim_names"), "groups the token left out are not \"no groups\": {}", got.body);

    // Tokens naming keys nobody published cost no fetch while the keys are fresh.
    let stranger = SigningKey::new("made-up");
    for n in 0..5 {
        let got = rpc(&addr, &stranger.sign(&claims(&format!("x{n}"), &resource, later)), "tools/list", "", json!({}));
        assert_eq!(got.status, 401, "{}", got.body);
    }
    assert_eq!(issuer.fetches(), 1, "no refetch within 10 s of the last fetch");

    // The issuer rotates its keys: a token under the new kid has them fetched again (once
    // the keys in force are 10 s old).
    std::thread::sleep(Duration::from_secs(10).saturating_sub(started.elapsed()));
    let next = SigningKey::new("k2");
    issuer.rotate(&next);
    let bob = next.sign(&claims("bob", &resource, later));
    let (text, error) = answer(&call(&addr, &bob, "limits__echo", json!({"value": 8})));
    assert!(!error, "{text}");
    assert_eq!(issuer.fetches(), 2, "fetched again once");

    // The decisions name the OAuth callers.
    let rows = audit_until(&env, &["--caller", "alice@example.com"], |rows| rows.iter().any(|r| r["resource"] == "Tool::\"limits__echo\""));
    assert!(
        rows.iter().any(|r| r["resource"] == "Tool::\"limits__echo\"" && r["allowed"] == true && r["policies"] == json!(["readers-echo"])),
        "{rows:?}"
    );
    assert!(rows.iter().any(|r| r["resource"] == "Tool::\"limits__sleep\"" && r["allowed"] == false), "{rows:?}");
}

#[test]
fn a_caller_over_its_quota_gets_429_with_retry_after_and_nothing_runs_while_others_are_served() {
    let env = Env::new();
    let quotas = "[quotas]\ncalls_per_minute = 3\n\n[quotas.callers.writer]\ncalls_per_minute = 100\nconcurrent_calls = 1\n";
    limits_under_policy(&env, quotas);
    let add = |name: &str, group: &str| {
        let out = env.run(&["caller", "add", name, "--group", group, "--json"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["token"].as_str().unwrap().to_owned()
    };
    let (reader, writer) = (add("reader", "readers"), add("writer", "writers"));
    let (addr, _reading, _served) = serve(&env, "127.0.0.1:0");
    wait_for_tool(&addr, &reader, "limits__echo");

    // The rate: three calls, then 429 until the bucket refills; listings are not counted.
    for value in 0..3 {
        let (text, error) = answer(&call(&addr, &reader, "limits__echo", json!({"value": value})));
        assert!(!error, "{text}");
    }
    let refused = rpc(&addr, &reader, "tools/call", "limits__echo", json!({"name": "limits__echo", "arguments": {"value": 3}}));
    assert_eq!(refused.status, 429, "{}", refused.body);
    let retry: u64 = refused.header("retry-after").expect("Retry-After").parse().unwrap();
    assert!((1..=20).contains(&retry), "one call comes back every 20 s: {retry}");
    let error = &refused.message()["error"];
    assert_eq!(error["data"]["retriable"], true, "{error}");
    assert_eq!(error["data"]["retry_after_seconds"], retry);
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("caller `reader` is over its quota of 3 tool calls per minute") && message.contains("nothing of this call ran"),
        "{message}"
    );
    assert!(tools(&addr, &reader).contains(&"limits__echo".to_owned()), "listing is not a call");
    let (text, error) = answer(&call(&addr, &writer, "limits__echo", json!({"value": 9})));
    assert!(!error, "another caller has its own quota: {text}");
    // The decisions reach the audit log from `serve`'s writer thread: read until the three
    // allowed calls are there, then no fourth.
    let echoes = |rows: &[Value]| rows.iter().filter(|r| r["resource"] == "Tool::\"limits__echo\"").count();
    let rows = audit_until(&env, &["--caller", "reader"], |rows| echoes(rows) >= 3);
    assert_eq!(echoes(&rows), 3, "the refused call never reached the server: {rows:?}");

    // The concurrency: the writer's one call in flight holds its only place until it ends.
    let slow = {
        let (addr, writer) = (addr.clone(), writer.clone());
        std::thread::spawn(move || {
            rpc(&addr, &writer, "tools/call", "limits__sleep", json!({"name": "limits__sleep", "arguments": {"ms": 1500}}))
        })
    };
    // The slow call goes first.
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let refused = loop {
        let got = rpc(&addr, &writer, "tools/call", "limits__echo", json!({"name": "limits__echo", "arguments": {"value": 1}}));
        if got.status == 429 {
            break got;
        }
        assert!(started.elapsed() < Duration::from_secs(1), "a second call while one is in flight was served: {}", got.body);
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(refused.body.contains("already has 1 tool calls in flight"), "{}", refused.body);
    let slow = slow.join().unwrap();
    assert_eq!(slow.status, 200, "{}", slow.body);
    let (text, error) = answer(&slow.message());
    assert!(!error && text == "1500", "{text}");
    let (text, error) = answer(&call(&addr, &writer, "limits__echo", json!({"value": 2})));
    assert!(!error, "its place came back when the call ended: {text}");
}

#[test]
fn a_call_the_policy_permits_only_with_a_humans_yes_is_asked_bound_to_its_arguments_and_audited() {
    let env = Env::new();
    let policy = limits_under_policy(&env, "");
    std::fs::write(
        policy.join("careful.cedar"),
        r#"@id("careful-sleeps")
@require_approval
permit(principal in Group::"careful", action == Action::"call", resource == Tool::"limits__sleep");

@id("careful-approves")
permit(principal == Caller::"vouched", action == Action::"approve", resource == Skill::"limits");
"#,
    )
    .unwrap();
    let add = |name: &str| {
        let out = env.run(&["caller", "add", name, "--group", "careful", "--json"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["token"].as_str().unwrap().to_owned()
    };
    let (vouched, unvouched) = (add("vouched"), add("unvouched"));
    let (addr, _reading, _served) = serve(&env, "127.0.0.1:0");
    wait_for_tool(&addr, &vouched, "limits__sleep");

    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    });
    let params = |ms: u64| json!({"name": "limits__sleep", "arguments": {"ms": ms}, "_meta": meta});
    let send = |token: &str, params: &Value| rpc(&addr, token, "tools/call", "limits__sleep", params.clone()).message();
    let answered = |asked: &Value, params: Value, yes: bool| {
        let mut params = params;
        params["requestState"] = asked["result"]["requestState"].clone();
        params["inputResponses"] = json!({"approve": {"action": "accept", "content": {"approve": yes}}});
        params
    };

    // Asked, with the agent's arguments shown after the host's words; yes runs it once.
    let asked = send(&vouched, &params(5));
    let question = asked["result"]["inputRequests"]["approve"].to_string();
    assert!(question.contains("skillhost: allow caller `vouched` to call `limits__sleep` once?"), "{asked}");
    assert!(question.contains("careful-sleeps") && question.contains(r#"{\"ms\":5}"#), "{question}");
    let yes = answered(&asked, params(5), true);
    let (text, error) = answer(&send(&vouched, &yes));
    assert!(!error && text == "5", "the approved call ran: {text}");
    // The same answer again is used; an answer about other arguments answers nothing.
    let replayed = send(&vouched, &yes);
    assert!(replayed["error"]["message"].as_str().unwrap_or_default().contains("already"), "{replayed}");
    let asked = send(&vouched, &params(5));
    let other = send(&vouched, &answered(&asked, params(1500), true));
    assert!(other["error"]["message"].as_str().unwrap_or_default().contains("another question"), "{other}");
    // No is no.
    let asked = send(&vouched, &params(6));
    let (text, error) = answer(&send(&vouched, &answered(&asked, params(6), false)));
    assert!(error && text.contains("the user did not allow this call"), "{text}");

    // A caller whose client the policy does not vouch for is not asked.
    let refused = send(&unvouched, &params(7));
    assert!(refused["result"]["requestState"].is_null(), "{refused}");
    let (text, error) = answer(&refused);
    assert!(error && text.contains("only a caller the org policy gives `approve` on skill `limits` may answer"), "{text}");

    // The audit: the human's yes and no, and the refusal, each naming the permit.
    let sleeps = |rows: &[Value], caller: &str, allowed: bool| {
        rows.iter()
            .filter(|r| r["caller"] == caller && r["resource"] == "Tool::\"limits__sleep\"" && r["allowed"] == allowed)
            .inspect(|r| assert_eq!(r["policies"], json!(["careful-sleeps"]), "{r}"))
            .count()
    };
    let all = |rows: &[Value]| (sleeps(rows, "vouched", true), sleeps(rows, "vouched", false), sleeps(rows, "unvouched", false));
    let rows = audit_until(&env, &["--decisions"], |rows| {
        let (yes, no, refused) = all(rows);
        yes >= 1 && no >= 1 && refused >= 1
    });
    assert_eq!(all(&rows), (1, 1, 1), "{rows:?}");
}
