//! Secrets over HTTPS for sandboxed code (issue 44): a run of a skill's scripts, in the
//! real jail, reaches an HTTPS server on 127.0.0.1 (a test CA the host's upstream TLS
//! trusts, names from a test resolver) with Python `requests`, `httpx`, `urllib` and
//! `curl`, and the proxy adds the secret the run's policy binds, terminating TLS with the
//! host's egress CA; the secret is in no variable or file of the sandbox, and an echo of
//! it comes back redacted. A host with no secret is tunnelled (the client sees the
//! server's own certificate). Attacks: a `Host` header or an absolute-form URI naming
//! another host inside the terminated connection, an SNI naming another host, a
//! `CONNECT` to the host's address, a redirect to another host, an HTTP/2 request for
//! another name on the connection opened for this one (coalescing): each refused (and
//! audited) or given no secret. HTTP/2 is negotiated by ALPN (curl's and a hand-framed
//! client's requests).

use std::path::Path;
use std::sync::Arc;

use skillhost::net::{EgressOutcome, NetConfig};
use skillhost::run::{RunOutput, RunPolicy};
use skillhost::runtime::WasmConfig;

use crate::network::{TestCa, TestResolver, TlsServer};
use crate::{HANG_GUARD, ok, shared_cache};

pub(crate) const SECRET: &str = "s3cr3t-https-4417";

/// An HTTPS server on 127.0.0.1 with one certificate: records each request head, and
/// answers `/echo` with the head it got (body and an `x-echo` header), `/gzip` with a
/// gzip-encoded body, `/redirect` with a 302 to `redirect`, anything else with
/// `hello over tls`.
pub(crate) struct Upstream {
    pub(crate) port: u16,
    server: TlsServer,
    /// Its certificate.
    pub(crate) cert: rustls::pki_types::CertificateDer<'static>,
}

impl Upstream {
    pub(crate) async fn start(
        identity: (rustls::pki_types::CertificateDer<'static>, rustls::pki_types::PrivateKeyDer<'static>),
        redirect: String,
    ) -> Self {
        let cert = identity.0.clone();
        let reply = move |head: &str| {
            let path = head.split(' ').nth(1).unwrap_or("/");
            let auth = head
                .lines()
                .find_map(|l| l.strip_prefix("authorization: ").or_else(|| l.strip_prefix("Authorization: ")))
                .unwrap_or("none");
            let reply = match path {
                "/echo" => {
                    format!("HTTP/1.1 200 OK\r\nx-echo: {auth}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{head}", head.len())
                }
                "/gzip" => "HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: 4\r\nconnection: close\r\n\r\nzzzz".to_owned(),
                "/redirect" => format!("HTTP/1.1 302 Found\r\nlocation: {redirect}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"),
                _ => "HTTP/1.1 200 OK\r\ncontent-length: 14\r\nconnection: close\r\n\r\nhello over tls".to_owned(),
            };
            vec![reply.into_bytes()]
        };
        let server = TlsServer::answering(identity, Arc::new(reply)).await;
        Self { port: server.port, server, cert }
    }

    pub(crate) fn heads(&self) -> Vec<String> {
        self.server.heads()
    }
}

/// The value of the stdout line `KEY …` a run's script printed; a missing one panics
/// showing the run's whole output.
pub(crate) fn printed_line(out: &RunOutput, key: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key} ")))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no `{key}` line\nstdout: {stdout}\nstderr: {}", String::from_utf8_lossy(&out.stderr)))
}

/// A host whose upstream TLS trusts `ca` only and whose resolver points `secure.test`
/// and `other.test` at 127.0.0.1, with the sandbox runtime and the toolchains of
/// scripts/setup.sh (node's fetch preload); its egress CA is made in `data` on first need.
pub(crate) fn host_trusting(data: &Path, ca: &TestCa) -> skillhost::Host {
    let resolver = TestResolver::with(&[("secure.test", &["127.0.0.1"]), ("other.test", &["127.0.0.1"])]);
    let net = NetConfig { resolver, tls: ca.client_config(), ..NetConfig::default() };
    skillhost::Host::builder()
        .data_dir(data)
        .toolchains(fixtures::toolchains())
        .wasm_config(WasmConfig { cache_dir: Some(shared_cache().join("compiled")), net, ..WasmConfig::default() })
        .sandbox_config({
            let mut config = fixtures::python::sandbox_config(data);
            config.shim = Some(vec![env!("CARGO_BIN_EXE_skillhost-shim").into()]);
            config.init = Some(vec![env!("CARGO_BIN_EXE_skillhost-run-init").into()]);
            config
        })
        .build()
        .unwrap()
}

/// The policy's `[[secrets]]` binding `api-token` as a bearer token to `origin`.
pub(crate) fn secret_policy(origin: &str) -> String {
    format!("[[secrets]]\nname = \"api-token\"\nheader = \"Authorization\"\nformat = \"Bearer {{}}\"\nhosts = [\"{origin}\"]\n")
}

/// Open a registry of `host` over `data` with `skills` as its workspace, give the skill
/// `name` the run policy `policy`, approve it as a human would, and run `command`.
pub(crate) async fn approve_and_run(
    host: &skillhost::Host,
    data: &Path,
    skills: &Path,
    name: &str,
    policy: &str,
    command: &[&str],
) -> RunOutput {
    let mut config = skillhost::RegistryConfig::new(data);
    config.workspace = Some(skills.to_owned());
    config.watch = false;
    let registry = tokio::time::timeout(HANG_GUARD, host.open_registry(config)).await.unwrap().unwrap();
    registry.set_policy(name, &RunPolicy::parse(policy, Path::new("policy")).unwrap()).await.unwrap();
    let request = registry.approval_request(name).unwrap();
    registry.approve(name, &request.content_hash, &request.capability_digest, skillhost::ApprovalChannel::Cli).await.unwrap();
    let command = command.iter().map(|word| (*word).to_owned()).collect();
    tokio::time::timeout(HANG_GUARD, registry.run(name, command, Vec::new(), Default::default())).await.expect("the run hung").unwrap()
}

/// The script: each client against the secret-bound host, the tunnelled host's
/// certificate, the attacks, and a scan of what the sandbox can read.
const PROBE: &str = r#"
import hashlib, json, os, socket, ssl, subprocess, sys, urllib.request
conf = json.load(open("/skill/scripts/conf.json"))
secure, other = conf["secure"], conf["other"]
def out(*a): print(*a, flush=True)
import requests, httpx
out("requests", requests.get(f"https://{secure}/hello").text)
out("httpx", httpx.get(f"https://{secure}/hello").text)
out("urllib", urllib.request.urlopen(f"https://{secure}/hello").read().decode())
curl = subprocess.run(["curl", "-sS", f"https://{secure}/hello"], capture_output=True, text=True)
out("curl", curl.stdout, curl.stderr.strip())
echo = requests.get(f"https://{secure}/echo")
out("echo header", echo.headers.get("x-echo"))
out("echo body has bearer", "bearer" in echo.text.lower())
open("echo.txt", "w").write(echo.text)
out("gzip", requests.get(f"https://{secure}/gzip").status_code)

proxy = os.environ["HTTPS_PROXY"].rsplit(":", 1)
def connect(authority):
    s = socket.create_connection((proxy[0].split("//")[1], int(proxy[1])))
    s.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = s.recv(1)
        if not chunk:
            break
        answer += chunk
    return s, answer.split(b"\r\n")[0].decode()
def peer(authority, name):
    s, status = connect(authority)
    ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
    t = ctx.wrap_socket(s, server_hostname=name)
    return hashlib.sha256(t.getpeercert(binary_form=True)).hexdigest()
out("tunnelled cert", peer(other, "other.test"))
out("terminated cert", peer(secure, "secure.test"))
def inside(request):
    s, status = connect(secure)
    t = ssl.create_default_context().wrap_socket(s, server_hostname="secure.test")
    t.sendall(request.encode())
    return t.recv(65536).split(b"\r\n")[0].decode()
out("host header", inside(f"GET /hello HTTP/1.1\r\nHost: {other}\r\n\r\n"))
out("absolute form", inside(f"GET https://{other}/hello HTTP/1.1\r\nHost: {secure}\r\n\r\n"))
h2 = subprocess.run(["curl", "-sS", "--http2", "-o", "/dev/null", "-w", "%{http_version} %{http_code}", f"https://{secure}/hello-h2"], capture_output=True, text=True)
out("curl h2", h2.stdout, h2.stderr.strip())
def h2_get(authority, path):
    # A client of its own, frames written by hand, so that it can put any `:authority`
    # on the connection the proxy opened for `secure` (what a coalescing client does).
    s, status = connect(secure)
    ctx = ssl.create_default_context(); ctx.set_alpn_protocols(["h2"])
    t = ctx.wrap_socket(s, server_hostname="secure.test")
    if t.selected_alpn_protocol() != "h2":
        return "no h2", b""
    def lit(n, v):
        n, v = n.encode(), v.encode()
        return bytes([0, len(n)]) + n + bytes([len(v)]) + v
    def frame(kind, flags, stream, payload):
        return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload
    block = lit(":method", "GET") + lit(":scheme", "https") + lit(":authority", authority) + lit(":path", path)
    t.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"") + frame(1, 5, 1, block))
    buf, status, body = b"", None, b""
    while True:
        while len(buf) < 9 or len(buf) < 9 + int.from_bytes(buf[:3], "big"):
            chunk = t.recv(65536)
            if not chunk:
                return status, body
            buf += chunk
        n = int.from_bytes(buf[:3], "big")
        kind, flags, stream, payload, buf = buf[3], buf[4], int.from_bytes(buf[5:9], "big"), buf[9:9 + n], buf[9 + n:]
        if kind == 4 and not flags & 1:
            t.sendall(frame(4, 1, 0, b""))
        if stream == 1 and kind == 1:
            # `:status 200` is entry 8 of HPACK's static table.
            status = "200" if payload[:1] == b"\x88" else "not 200"
        if stream == 1 and kind == 0:
            body += payload
        if (stream == 1 and kind in (0, 1) and flags & 1) or kind == 7:
            return status, body
status, body = h2_get(secure, "/hello-raw-h2")
out("h2 same host", status, body.decode(errors="replace"))
status, body = h2_get(other, "/coalesced")
out("h2 coalesced", status, "another origin" in body.decode(errors="replace"))
try:
    s, status = connect(secure)
    ssl.create_default_context().wrap_socket(s, server_hostname="other.test")
    out("sni", "accepted")
except (ssl.SSLError, OSError) as e:
    out("sni", "refused")
s, status = connect(conf["secure_ip"])
out("ip", status)
pinned = subprocess.run(["curl", "-sS", "--pinnedpubkey", "sha256//" + "A" * 43 + "=", f"https://{secure}/pinned"], capture_output=True, text=True)
out("pinned key", pinned.returncode)
try:
    s, status = connect(secure)
    ssl.create_default_context(cadata=bytes.fromhex(conf["test_ca"])).wrap_socket(s, server_hostname="secure.test")
    out("pinned ca", "accepted")
except ssl.SSLCertVerificationError:
    out("pinned ca", "refused")
bundle = open(os.environ["SSL_CERT_FILE"]).read() + ssl.DER_cert_to_PEM_cert(bytes.fromhex(conf["test_ca"]))
open("/tmp/all.pem", "w").write(bundle)
r = requests.get(f"https://{secure}/redirect", verify="/tmp/all.pem")
out("redirect", r.status_code, r.text)

scan = ["\n".join(f"{k}={v}" for k, v in os.environ.items())]
for top in ["/etc", "/tmp", "/skill", "/run", "/proc/self/environ", os.getcwd()]:
    paths = [top] if os.path.isfile(top) else [os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs]
    for path in paths:
        try:
            scan.append(open(path, "rb").read(1 << 20).decode("latin-1"))
        except OSError:
            pass
open("scan.txt", "w").write("\n".join(scan))
"#;

/// A run of a skill's scripts reaches a secret-bound HTTPS host with every client, the
/// secret added by the proxy and never in the sandbox; the attacks are refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_script_reaches_a_secret_bound_https_host_with_every_client_and_never_holds_the_secret() {
    let test_ca = TestCa::new();
    let other = Upstream::start(test_ca.issue("other.test"), String::new()).await;
    let other_origin = format!("https://other.test:{}", other.port);
    let secure = Upstream::start(test_ca.issue("secure.test"), format!("{other_origin}/landing")).await;
    let secure_origin = format!("https://secure.test:{}", secure.port);

    let data = tempfile::tempdir().unwrap();
    let skills = tempfile::tempdir().unwrap();
    let host = host_trusting(data.path(), &test_ca);
    host.secrets().set("api-token", SECRET).unwrap();

    let dir = skills.path().join("fetcher");
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(dir.join("SKILL.md"), "---\nname: fetcher\ndescription: Calls an HTTPS API in tests. Use it in tests.\n---\nRun it.\n")
        .unwrap();
    std::fs::write(dir.join("scripts/probe.py"), PROBE).unwrap();
    let conf = serde_json::json!({
        "secure": format!("secure.test:{}", secure.port),
        "other": format!("other.test:{}", other.port),
        "secure_ip": format!("127.0.0.1:{}", secure.port),
        "test_ca": hex::encode(test_ca.cert()),
    });
    std::fs::write(dir.join("scripts/conf.json"), conf.to_string()).unwrap();

    let policy = format!(
        "[network]\nallow = [\"{secure_origin}\", \"{other_origin}\"]\nprivate = [\"{secure_origin}\", \"{other_origin}\"]\n{}",
        secret_policy(&secure_origin)
    );
    let out = approve_and_run(&host, data.path(), skills.path(), "fetcher", &policy, &["python", "scripts/probe.py"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let line = |key: &str| printed_line(&out, key);

    for client in ["requests", "httpx", "urllib"] {
        assert_eq!(line(client), "hello over tls", "{client} through the terminating proxy; stderr: {stderr}");
    }
    assert!(line("curl").starts_with("hello over tls"), "curl: {}", line("curl"));
    let bearer = format!("authorization: bearer {SECRET}");
    let hello = secure.heads().into_iter().filter(|h| h.starts_with("GET /hello ")).collect::<Vec<_>>();
    assert_eq!(hello.len(), 4, "one request per client reached the server: {hello:?}");
    assert!(hello.iter().all(|h| h.to_lowercase().contains(&bearer)), "the proxy added the secret to each: {hello:?}");

    // The echo of the secret is redacted in the header and the body, lengths kept.
    assert_eq!(line("echo header"), format!("Bearer {}", "*".repeat(SECRET.len())));
    assert_eq!(line("echo body has bearer"), "True");
    let echo = out.files.iter().find(|f| f.path == "echo.txt").expect("echo.txt");
    assert!(String::from_utf8_lossy(&echo.bytes).contains(&format!("Bearer {}", "*".repeat(SECRET.len()))));

    // A body the proxy cannot check for the secret is not passed on.
    assert_eq!(line("gzip"), "502");

    // The egress CA was made on first need, its key the host's alone.
    use std::os::unix::fs::PermissionsExt;
    let key = std::fs::metadata(data.path().join("egress-ca/ca.key")).unwrap();
    assert_eq!(key.permissions().mode() & 0o777, 0o600);

    // No secret anywhere the sandbox could read.
    assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET));
    let scan = out.files.iter().find(|f| f.path == "scan.txt");
    let scan = scan.unwrap_or_else(|| panic!("no scan.txt: {:?}\nstdout: {stdout}\nstderr: {stderr}", out.skipped));
    assert!(scan.bytes.len() > 1000, "the scan read files");
    assert!(!String::from_utf8_lossy(&scan.bytes).contains(SECRET), "the secret is in no variable or file of the sandbox");
    assert!(String::from_utf8_lossy(&scan.bytes).contains("SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"));

    // A host without a secret is tunnelled: the client sees the server's own certificate.
    let sha = |der: &[u8]| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(der));
    assert_eq!(line("tunnelled cert"), sha(&other.cert), "the upstream's certificate");
    assert_ne!(line("terminated cert"), line("tunnelled cert"));

    // HTTP/2, negotiated by ALPN: curl's request and a client's own frames reach the
    // server with the secret added.
    assert_eq!(line("curl h2").trim_end(), "2 200", "curl --http2 through the terminating proxy");
    assert_eq!(line("h2 same host"), "200 hello over tls");
    for path in ["/hello-h2", "/hello-raw-h2"] {
        let heads = secure.heads().into_iter().filter(|h| h.starts_with(&format!("GET {path} "))).collect::<Vec<_>>();
        assert!(heads.len() == 1 && heads[0].to_lowercase().contains(&bearer), "{path} sent once with the secret: {heads:?}");
    }

    // The attacks.
    assert_eq!(line("h2 coalesced"), "not 200 True", "a request for another name on the HTTP/2 connection is refused");
    assert!(other.heads().iter().all(|h| !h.starts_with("GET /coalesced")), "nothing coalesced reached the other host");
    assert!(line("host header").starts_with("HTTP/1.1 403"), "{}", line("host header"));
    assert!(line("absolute form").starts_with("HTTP/1.1 403"), "{}", line("absolute form"));
    assert_eq!(line("sni"), "refused");
    // Pinning clients fail (curl's exit 90: the pinned key did not match).
    assert_eq!(line("pinned key"), "90");
    assert_eq!(line("pinned ca"), "refused");
    assert!(line("ip").starts_with("HTTP/1.1 403"), "{}", line("ip"));
    assert_eq!(line("redirect"), "200 hello over tls", "the client followed the redirect itself");
    let landing = other.heads();
    assert!(landing.iter().any(|h| h.starts_with("GET /landing ")), "{landing:?}");
    assert!(landing.iter().all(|h| !h.contains(SECRET)), "the secret did not follow the redirect: {landing:?}");
    assert!(secure.heads().iter().all(|h| !h.contains("Host: other.test")), "nothing for another host was sent");

    // Each refusal is audited, naming what was refused; no row holds the secret.
    let audited = async {
        loop {
            let rows = host.audit().query(&Default::default()).unwrap();
            // Five refusals, and the three clients that took no certificate of the proxy's
            // (the certificate probe, the pinned key, the pinned CA).
            let refused = rows.iter().filter(|r| matches!(r.outcome, EgressOutcome::Refused(_))).count();
            let failed = rows.iter().filter(|r| matches!(r.outcome, EgressOutcome::Failed(_))).count();
            if refused >= 5 && failed >= 3 {
                break rows;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    let rows = tokio::time::timeout(HANG_GUARD, audited).await.expect("the refusals reach the audit log");
    let refused: Vec<String> = rows
        .iter()
        .filter_map(|r| match &r.outcome {
            EgressOutcome::Refused(reason) => Some(reason.clone()),
            _ => None,
        })
        .collect();
    let coalesced = refused.iter().filter(|r| r.contains("names another origin")).count();
    assert_eq!(coalesced, 2, "the absolute-form request and the coalesced HTTP/2 one: {refused:#?}");
    for what in ["carries `Host: other.test", "names another origin", "the TLS handshake asked for server name `other.test`", "127.0.0.1"] {
        assert!(refused.iter().any(|r| r.contains(what)), "`{what}` audited: {refused:#?}");
    }
    assert!(rows.iter().any(|r| r.url.contains("secure.test") && r.url.ends_with("/hello")), "decrypted requests audited");
    // A client that would not take the proxy's certificate is audited naming the skill,
    // the host and why (its own error cannot say).
    let failed: Vec<&str> = rows
        .iter()
        .filter_map(|r| match &r.outcome {
            EgressOutcome::Failed(reason) => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    for what in ["refused the certificate the proxy presented for `secure.test`", "without sending a request"] {
        let found = failed.iter().find(|r| r.contains(what)).unwrap_or_else(|| panic!("`{what}` audited: {failed:#?}"));
        assert!(found.starts_with("skill `fetcher`:") && found.contains("must not pin"), "{found}");
    }
    assert!(rows.iter().all(|r| !format!("{r:?}").contains(SECRET)), "no audit row holds the secret");
}

/// A server skill (`[[secrets]]` beside `[server]`) reaches a secret-bound HTTPS host with
/// httpx; the proxy adds the secret, the variable the server declared for it holds a
/// placeholder, and the server's echo comes back redacted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_skill_gets_its_secret_added_over_https_and_holds_only_a_placeholder() {
    let test_ca = TestCa::new();
    let secure = Upstream::start(test_ca.issue("secure.test"), String::new()).await;
    let origin = format!("https://secure.test:{}", secure.port);
    let data = tempfile::tempdir().unwrap();
    let skills = tempfile::tempdir().unwrap();
    let host = host_trusting(data.path(), &test_ca);
    host.secrets().set("api-token", SECRET).unwrap();
    let dir = fixtures::python::install(
        "sandbox-probe",
        skills.path(),
        &format!(
            "[network]\nallow = [\"{origin}\"]\nprivate = [\"{origin}\"]\n{}[[server.secrets]]\nname = \"api-token\"\nenv = \"API_TOKEN\"\n",
            secret_policy(&origin)
        ),
    );
    let skill = tokio::time::timeout(HANG_GUARD, host.load_path_granted(&dir)).await.expect("load hung").unwrap();

    let out = ok(&skill, "fetch", serde_json::json!({ "url": format!("{origin}/echo") })).await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["value"]["status"], 200, "{out}");
    let body = out["value"]["body"].as_str().unwrap().to_owned();
    assert!(body.contains(&format!("Bearer {}", "*".repeat(SECRET.len()))), "the echo is redacted: {body}");
    assert!(!body.contains(SECRET));
    let heads = secure.heads();
    assert!(heads.iter().any(|h| h.contains(&format!("authorization: Bearer {SECRET}"))), "the proxy added it: {heads:?}");

    let env = ok(&skill, "environment", serde_json::json!({})).await;
    let env = &env["env"];
    assert_eq!(env["API_TOKEN"], "skillhost-proxy-adds-api-token", "a placeholder, not the value");
    assert!(env.as_object().unwrap().values().all(|v| !v.as_str().unwrap_or_default().contains(SECRET)), "{env}");
    assert_eq!(env["SSL_CERT_FILE"], "/etc/ssl/certs/ca-certificates.crt");
}
