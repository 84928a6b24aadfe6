//! Node's `fetch` in the jail (node 20 ignores `HTTPS_PROXY`): a run of a SKILL.md
//! skill's `.mjs` script, in the real jail, reaches a secret-bound HTTPS server on
//! 127.0.0.1 through the egress proxy, which adds the secret (terminating TLS with the
//! host's egress CA) and redacts its echo; and a host without a secret through the plain
//! tunnel, from a child node with the test CA added. Node starts with the preload of
//! `skillhost setup` (scripts/setup.sh installs it under `SKILLHOST_TOOLCHAINS`), which
//! the jail binds at `/run/skillhost/node`.

use crate::https_secrets::{SECRET, Upstream, approve_and_run, host_trusting, printed_line, secret_policy};
use crate::network::TestCa;

/// The script: fetch from the secret-bound host (`/hello`, `/echo`), then from the other
/// host in a child node that trusts the test CA too.
const FETCH: &str = r#"
import { readFileSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
const conf = JSON.parse(readFileSync("/skill/scripts/conf.json", "utf8"));
const out = (...a) => console.log(...a);
out("node", process.version, process.env.NODE_OPTIONS);
const hello = await fetch(`https://${conf.secure}/hello`);
out("fetch", hello.status, await hello.text());
const echo = await fetch(`https://${conf.secure}/echo`);
out("echo header", echo.headers.get("x-echo"));
writeFileSync("echo.txt", await echo.text());
const pem = new X509Certificate(Buffer.from(conf.test_ca, "hex")).toString();
writeFileSync("/tmp/all.pem", readFileSync(process.env.NODE_EXTRA_CA_CERTS, "utf8") + "\n" + pem);
const env = { ...process.env, NODE_EXTRA_CA_CERTS: "/tmp/all.pem" };
out("tunnelled", execFileSync(process.execPath, ["/skill/scripts/other.mjs", conf.other], { env, encoding: "utf8" }).trim());
"#;

/// The child: one fetch from the host with no secret.
const OTHER: &str = r#"
const response = await fetch(`https://${process.argv[2]}/hello`);
console.log(response.status, await response.text());
"#;

/// A run's node script fetches from a secret-bound host through the proxy, which adds
/// the secret and redacts its echo, and from a host without one through the tunnel.
#[tokio::test(flavor = "multi_thread")]
async fn a_node_script_fetches_through_the_proxy_with_the_secret_added_and_through_the_tunnel() {
    let preload = fixtures::toolchains().join(skillhost_sandbox::node_fetch::DIR_NAME);
    assert!(
        skillhost_sandbox::node_fetch::installed(&preload),
        "node's fetch preload is not installed in {}; run `source scripts/setup.sh` (it runs `skillhost setup toolchains`)",
        preload.display()
    );
    let test_ca = TestCa::new();
    let other = Upstream::start(test_ca.issue("other.test"), String::new()).await;
    let other_origin = format!("https://other.test:{}", other.port);
    let secure = Upstream::start(test_ca.issue("secure.test"), String::new()).await;
    let secure_origin = format!("https://secure.test:{}", secure.port);

    let data = tempfile::tempdir().unwrap();
    let skills = tempfile::tempdir().unwrap();
    let host = host_trusting(data.path(), &test_ca);
    host.secrets().set("api-token", SECRET).unwrap();
    let dir = skills.path().join("node-fetcher");
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: node-fetcher\ndescription: Calls an HTTPS API from node in tests. Use it in tests.\n---\nRun it.\n",
    )
    .unwrap();
    std::fs::write(dir.join("scripts/fetch.mjs"), FETCH).unwrap();
    std::fs::write(dir.join("scripts/other.mjs"), OTHER).unwrap();
    let conf = serde_json::json!({
        "secure": format!("secure.test:{}", secure.port),
        "other": format!("other.test:{}", other.port),
        "test_ca": hex::encode(test_ca.cert()),
    });
    std::fs::write(dir.join("scripts/conf.json"), conf.to_string()).unwrap();
    let policy = format!(
        "[network]\nallow = [\"{secure_origin}\", \"{other_origin}\"]\nprivate = [\"{secure_origin}\", \"{other_origin}\"]\n{}",
        secret_policy(&secure_origin)
    );

    let out = approve_and_run(&host, data.path(), skills.path(), "node-fetcher", &policy, &["node", "scripts/fetch.mjs"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let line = |key: &str| printed_line(&out, key);

    assert_eq!(line("fetch"), "200 hello over tls", "node's fetch through the terminating proxy; stderr: {stderr}");
    let hello: Vec<String> = secure.heads().into_iter().filter(|h| h.starts_with("GET /hello ")).collect();
    assert_eq!(hello.len(), 1, "{hello:?}");
    assert!(hello[0].to_lowercase().contains(&format!("authorization: bearer {SECRET}")), "the proxy added the secret: {hello:?}");
    assert!(line("node").ends_with(" --require=/run/skillhost/node/preload.cjs"), "{}", line("node"));

    // The echo of the secret is redacted in the header and the body.
    let redacted = format!("Bearer {}", "*".repeat(SECRET.len()));
    assert_eq!(line("echo header"), redacted);
    let echo = out.files.iter().find(|f| f.path == "echo.txt").expect("echo.txt");
    let echo = String::from_utf8_lossy(&echo.bytes);
    assert!(echo.contains(&redacted) && !echo.contains(SECRET), "{echo}");
    assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET));

    // The host without a secret, through the tunnel: the request as node sent it.
    assert_eq!(line("tunnelled"), "200 hello over tls", "stderr: {stderr}");
    let heads = other.heads();
    assert!(heads.iter().any(|h| h.starts_with("GET /hello ")), "{heads:?}");
    assert!(heads.iter().all(|h| !h.to_lowercase().contains("authorization")), "no secret for it: {heads:?}");
}
