//! Attacks on secrets over HTTPS (issue 44) from both ends of the terminating proxy, a
//! script of a SKILL.md skill run in the real jail against a hostile HTTPS server on
//! 127.0.0.1 that the secret is bound to.
//!
//! - The server echoes the secret back in forms the redactor must catch or refuse: a
//!   second `Content-Encoding` header after `identity`, a gzip `Transfer-Encoding`, a
//!   `Content-Encoding` value the proxy's error would quote, the status line's reason
//!   phrase, a header's name, a trailer, a 1xx informational response, a `Location`, the
//!   value split across chunks written apart, and a resource showing the value served in
//!   two ranges that each hold half of it, or cut short at each length through it; and a server of the secret's whose certificate
//!   names the value (quoted by the proxy's TLS error).
//! - The script attacks the terminated connection: a request smuggled behind
//!   `Content-Length` and `Transfer-Encoding` together, HTTP/2 requests whose `host`
//!   header or `:authority` name another host, a header value with a line break (an
//!   HTTP/2 → HTTP/1.1 injection), a flood of streams opened and reset at once, an HPACK
//!   header block that decodes to megabytes, a TLS hello that never finishes, and a
//!   `CONNECT` naming the host in capitals with a trailing dot; and it looks for the
//!   egress CA's key.

use std::io::Read;
use std::sync::Arc;

use skillhost::net::NetConfig;

use crate::https_secrets::{SECRET, approve_and_run, printed_line, secret_policy};
use crate::network::{TestCa, TestResolver, TlsServer};

/// An HTTPS server for `secure.test` answering each path with a hostile response built
/// from the request's bearer token; it records each request head.
struct Hostile {
    port: u16,
    server: TlsServer,
}

/// `bytes` gzip-compressed.
fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut encoder, bytes).unwrap();
    encoder.finish().unwrap()
}

/// The response the hostile server sends for `path`, in the pieces it writes apart.
fn hostile_reply(path: &str, head: &str, token: &str) -> Vec<Vec<u8>> {
    let auth = format!("Bearer {token}");
    let close = "connection: close\r\n";
    let ok = |headers: String| format!("HTTP/1.1 200 OK\r\n{headers}content-length: 2\r\n{close}\r\nok").into_bytes();
    match path {
        "/two-ce" => {
            let body = gzip(format!("token={token}").as_bytes());
            let mut reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-encoding: identity\r\ncontent-encoding: gzip\r\ncontent-length: {}\r\n{close}\r\n",
                body.len()
            )
            .into_bytes();
            reply.extend_from_slice(&body);
            vec![reply]
        }
        "/te-gzip" => {
            let body = gzip(format!("token={token}").as_bytes());
            let mut reply = format!("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n{close}\r\n{:x}\r\n", body.len()).into_bytes();
            reply.extend_from_slice(&body);
            reply.extend_from_slice(b"\r\n0\r\n\r\n");
            vec![reply]
        }
        "/ce-echo" => vec![ok(format!("content-encoding: {auth}\r\n"))],
        "/reason" => vec![format!("HTTP/1.1 200 {auth}\r\ncontent-length: 2\r\n{close}\r\nok").into_bytes()],
        "/name" => vec![ok(format!("{token}: 1\r\n"))],
        "/trailer" => vec![
            format!("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntrailer: x-t\r\n{close}\r\n2\r\nok\r\n0\r\nx-t: {auth}\r\n\r\n")
                .into_bytes(),
        ],
        "/early" => {
            vec![
                format!("HTTP/1.1 103 Early Hints\r\nlink: </{token}>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n{close}\r\nok")
                    .into_bytes(),
            ]
        }
        "/split" => {
            let (a, b) = token.split_at(token.len() / 2);
            vec![
                format!("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n{close}\r\n{:x}\r\ntoken={a}\r\n", a.len() + 6).into_bytes(),
                format!("{:x}\r\n{b};\r\n0\r\n\r\n", b.len() + 1).into_bytes(),
            ]
        }
        "/token" => {
            // A resource showing the caller's credential, served in ranges when asked.
            let body = format!("authorization: {auth}\n");
            let range = head.lines().find_map(|l| l.strip_prefix("range: bytes=")).and_then(|r| {
                let (a, b) = r.trim().split_once('-')?;
                Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?.min(body.len() - 1)))
            });
            vec![match range {
                Some((a, b)) if a <= b => format!(
                    "HTTP/1.1 206 Partial Content\r\ncontent-range: bytes {a}-{b}/{}\r\ncontent-length: {}\r\n{close}\r\n{}",
                    body.len(),
                    b - a + 1,
                    &body[a..=b]
                )
                .into_bytes(),
                _ => format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n{close}\r\n{body}", body.len()).into_bytes(),
            }]
        }
        p if p.starts_with("/cut?") => {
            // A resource showing the caller's credential cut to the length asked for.
            let body = format!("authorization: {auth}\n");
            let n = p["/cut?".len()..].parse::<usize>().unwrap_or(0).min(body.len());
            vec![format!("HTTP/1.1 200 OK\r\ncontent-length: {n}\r\n{close}\r\n{}", &body[..n]).into_bytes()]
        }
        "/location" => {
            vec![format!("HTTP/1.1 302 Found\r\nlocation: https://other.test/?t={token}\r\ncontent-length: 0\r\n{close}\r\n").into_bytes()]
        }
        _ => vec![format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n{close}\r\n{head}", head.len()).into_bytes()],
    }
}

impl Hostile {
    async fn start(identity: (rustls::pki_types::CertificateDer<'static>, rustls::pki_types::PrivateKeyDer<'static>)) -> Self {
        let reply = |head: &str| {
            let path = head.split(' ').nth(1).unwrap_or("/");
            let token = head.lines().find_map(|l| l.strip_prefix("authorization: Bearer ")).unwrap_or("no-token");
            hostile_reply(path, head, token)
        };
        let server = TlsServer::answering(identity, Arc::new(reply)).await;
        Self { port: server.port, server }
    }

    fn heads(&self) -> Vec<String> {
        self.server.heads()
    }
}

/// The attacker's helpers: a `CONNECT` through the proxy, TLS trusting the sandbox's
/// bundle, one HTTP/1.1 exchange read to the end, and an HTTP/2 client framed by hand.
const HELPERS: &str = r#"
import json, os, socket, ssl
conf = json.load(open("/skill/scripts/conf.json"))
secure = conf["secure"]
def out(*a): print(*a, flush=True)
proxy = os.environ["HTTPS_PROXY"].rsplit(":", 1)
def connect(authority):
    s = socket.create_connection((proxy[0].split("//")[1], int(proxy[1])))
    s.settimeout(20)
    s.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = s.recv(1)
        if not chunk:
            break
        answer += chunk
    return s, answer.split(b"\r\n")[0].decode()
def tls(authority=secure, name="secure.test", alpn=None):
    s, status = connect(authority)
    ctx = ssl.create_default_context()
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx.wrap_socket(s, server_hostname=name)
def drain(t):
    data = b""
    while True:
        try:
            chunk = t.recv(65536)
        except (ssl.SSLError, OSError):
            break
        if not chunk:
            break
        data += chunk
    return data
def exchange(raw, authority=secure, name="secure.test"):
    t = tls(authority, name)
    t.sendall(raw.encode())
    return drain(t)
def lit(n, v):
    n, v = n.encode(), v if isinstance(v, bytes) else v.encode()
    return bytes([0, len(n)]) + n + bytes([len(v)]) + v
def frame(kind, flags, stream, payload):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload
def request_block(authority, path, extra=b""):
    return lit(":method", "GET") + lit(":scheme", "https") + lit(":authority", authority) + lit(":path", path) + extra
def h2(frames, until=1):
    # Sends `frames` after the preface on a new connection; returns the frames read until
    # the server closes or goes away: (kind, flags, stream, payload).
    t = tls(alpn=["h2"])
    if t.selected_alpn_protocol() != "h2":
        return None
    try:
        t.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"") + frames)
    except (ssl.SSLError, OSError):
        pass  # the server stopped reading (a GOAWAY, read below)
    buf, got = b"", []
    while True:
        while len(buf) < 9 or len(buf) < 9 + int.from_bytes(buf[:3], "big"):
            try:
                chunk = t.recv(65536)
            except (ssl.SSLError, OSError):
                chunk = b""
            if not chunk:
                return got
            buf += chunk
        n = int.from_bytes(buf[:3], "big")
        kind, flags, stream, payload, buf = buf[3], buf[4], int.from_bytes(buf[5:9], "big"), buf[9:9 + n], buf[9 + n:]
        if kind == 4 and not flags & 1:
            try:
                t.sendall(frame(4, 1, 0, b""))
            except (ssl.SSLError, OSError):
                pass
        got.append((kind, flags, stream, payload))
        if kind == 7 or (stream == until and (kind == 3 or (kind in (0, 1) and flags & 1))):
            return got
def status_of(got, stream=1):
    # `:status 200` is entry 8 of HPACK's static table.
    heads = [p for k, f, s, p in got or [] if s == stream and k == 1]
    return ("200" if heads[0][:1] == b"\x88" else "not 200") if heads else "none"
"#;

/// Each hostile response, fetched over HTTP/1.1 and written to stdout in hex.
const ECHOES: &str = r#"
# A server of the secret's whose certificate names the secret (not the host): the TLS
# failure the proxy reports must not quote it.
named = conf["named"]
raw = exchange(f"GET /named HTTP/1.1\r\nHost: {named}\r\nConnection: close\r\n\r\n", named)
out("resp/named", raw.hex())
for path in conf["paths"]:
    raw = exchange(f"GET {path} HTTP/1.1\r\nHost: {secure}\r\nTE: trailers\r\nConnection: close\r\n\r\n")
    out("resp" + path, raw.hex())
# The credential's resource in two ranges, each half of the value the whole one shows redacted.
whole = exchange(f"GET /token HTTP/1.1\r\nHost: {secure}\r\nConnection: close\r\n\r\n").split(b"\r\n\r\n", 1)[1]
at = whole.index(b"Bearer ") + 7
n = len(whole.rstrip(b"\n")) - at
halves = []
for a, b in [(at, at + n // 2 - 1), (at + n // 2, at + n - 1)]:
    raw = exchange(f"GET /token HTTP/1.1\r\nHost: {secure}\r\nRange: bytes={a}-{b}\r\nConnection: close\r\n\r\n")
    halves.append(raw.split(b"\r\n")[0].decode() + " " + raw.split(b"\r\n\r\n", 1)[1].decode(errors="replace").strip())
out("ranges", " | ".join(halves))
# The same resource cut at each length through the value: each answer ends in a longer
# piece of it.
cuts = [exchange(f"GET /cut?{k} HTTP/1.1\r\nHost: {secure}\r\nConnection: close\r\n\r\n").split(b"\r\n\r\n", 1)[1] for k in range(at + 1, at + n)]
out("cuts", " | ".join(c[at:].decode(errors="replace") for c in cuts))
try:
    open(conf["ca_key"], "rb").read()
    out("ca key", "read")
except OSError as e:
    out("ca key", "unreadable")
scan = [b"\n".join(f"{k}={v}".encode() for k, v in os.environ.items())]
for top in ["/etc", "/tmp", "/skill", "/run", "/proc/self/environ", os.getcwd()]:
    paths = [top] if os.path.isfile(top) else [os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs]
    for path in paths:
        try:
            scan.append(open(path, "rb").read(4 << 20))
        except OSError:
            pass
open("scan.bin", "wb").write(b"\n".join(scan))
"#;

/// The paths of [`hostile_reply`] the echo script fetches.
const ECHO_PATHS: &[&str] = &["/two-ce", "/te-gzip", "/ce-echo", "/reason", "/name", "/trailer", "/early", "/split", "/location"];

/// A test CA, the hostile server for `secure.test`, and a host whose upstream TLS trusts
/// the CA, with the secret set; the skill `attacker` runs `script` under a policy binding
/// the secret to the hostile server.
struct Stage {
    hostile: Hostile,
    data: tempfile::TempDir,
    out: skillhost::run::RunOutput,
    host: skillhost::Host,
}

impl Stage {
    async fn run(script: &str) -> Self {
        let test_ca = TestCa::new();
        let hostile = Hostile::start(test_ca.issue("secure.test")).await;
        let origin = format!("https://secure.test:{}", hostile.port);
        // Another server of the secret's, whose certificate is valid for a name holding the
        // value (its owner could have one issued) but not for `secure.test`.
        let named = Hostile::start(test_ca.issue(&format!("{SECRET}.secure.test"))).await;
        let named_origin = format!("https://secure.test:{}", named.port);
        let data = tempfile::tempdir().unwrap();
        let skills = tempfile::tempdir().unwrap();
        let resolver = TestResolver::with(&[("secure.test", &["127.0.0.1"])]);
        let net = NetConfig { resolver, tls: test_ca.client_config(), ..NetConfig::default() };
        let host = skillhost::Host::builder()
            .data_dir(data.path())
            .toolchains(fixtures::toolchains())
            .wasm_config(skillhost::runtime::WasmConfig {
                cache_dir: Some(crate::shared_cache().join("compiled")),
                net,
                ..Default::default()
            })
            .sandbox_config({
                let mut config = fixtures::python::sandbox_config(data.path());
                config.shim = Some(vec![env!("CARGO_BIN_EXE_skillhost-shim").into()]);
                config.init = Some(vec![env!("CARGO_BIN_EXE_skillhost-run-init").into()]);
                config
            })
            .build()
            .unwrap();
        host.secrets().set("api-token", SECRET).unwrap();
        let dir = skills.path().join("attacker");
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::write(dir.join("SKILL.md"), "---\nname: attacker\ndescription: Attacks the egress proxy in tests.\n---\nRun it.\n")
            .unwrap();
        std::fs::write(dir.join("scripts/attack.py"), format!("{HELPERS}{script}")).unwrap();
        let conf = serde_json::json!({
            "secure": format!("secure.test:{}", hostile.port),
            "named": format!("secure.test:{}", named.port),
            "port": hostile.port,
            "paths": ECHO_PATHS,
            "ca_key": data.path().join("egress-ca/ca.key"),
        });
        std::fs::write(dir.join("scripts/conf.json"), conf.to_string()).unwrap();
        let policy = format!(
            "[network]\nallow = [\"{origin}\", \"{named_origin}\"]\nprivate = [\"{origin}\", \"{named_origin}\"]\n{}",
            secret_policy(&origin).replace(&format!("\"{origin}\""), &format!("\"{origin}\", \"{named_origin}\""))
        );
        let out = approve_and_run(&host, data.path(), skills.path(), "attacker", &policy, &["python", "scripts/attack.py"]).await;
        Self { hostile, data, out, host }
    }

    /// The value of the stdout line `key …`.
    fn line(&self, key: &str) -> String {
        printed_line(&self.out, key)
    }
}

/// A raw HTTP/1.1 response: its head and its body (de-chunked when chunked).
fn split_response(raw: &[u8]) -> (String, Vec<u8>) {
    let at = raw.windows(4).position(|w| w == b"\r\n\r\n").map_or(raw.len(), |at| at + 4);
    let head = String::from_utf8_lossy(&raw[..at]).into_owned();
    let mut body = raw[at..].to_vec();
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        let (mut plain, mut rest) = (Vec::new(), &body[..]);
        while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
            let size = std::str::from_utf8(&rest[..eol]).ok().and_then(|s| usize::from_str_radix(s.split(';').next()?.trim(), 16).ok());
            let Some(size) = size.filter(|&s| s > 0 && rest.len() >= eol + 2 + s) else { break };
            plain.extend_from_slice(&rest[eol + 2..eol + 2 + size]);
            rest = &rest[(eol + 4 + size).min(rest.len())..];
        }
        body = plain;
    }
    (head, body)
}

/// `body` gunzipped, when it is gzip.
fn gunzip(body: &[u8]) -> Option<String> {
    let mut plain = String::new();
    flate2::read::MultiGzDecoder::new(body).read_to_string(&mut plain).ok()?;
    Some(plain)
}

/// A hostile server bound a secret echoes it back in every form HTTP lets it pass a
/// proxy: each is redacted, dropped or refused; the sandbox never reads the value, nor the
/// egress CA's key.
#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_server_cannot_echo_the_secret_past_the_proxy_in_any_http_form() {
    let stage = Stage::run(ECHOES).await;
    let secret = SECRET.as_bytes();
    let stars = "*".repeat(SECRET.len());
    let response = |path: &str| {
        let raw = hex::decode(stage.line(&format!("resp{path}"))).unwrap();
        assert!(!raw.is_empty(), "{path}: no response");
        let lower = raw.to_ascii_lowercase();
        assert!(
            !lower.windows(secret.len()).any(|w| w == secret),
            "{path}: the secret reached the sandbox: {}",
            String::from_utf8_lossy(&raw)
        );
        let (head, body) = split_response(&raw);
        if let Some(plain) = gunzip(&body) {
            assert!(!plain.contains(SECRET), "{path}: the secret reached the sandbox gzip-compressed ({head:?}): {plain}");
        }
        (head, body)
    };
    // An encoding the proxy cannot read, in a second header or as a transfer coding, is
    // refused; so is one whose name echoes the secret, and the refusal does not quote it.
    for path in ["/two-ce", "/te-gzip", "/ce-echo"] {
        let (head, body) = response(path);
        assert!(head.starts_with("HTTP/1.1 502"), "{path}: {head}{}", String::from_utf8_lossy(&body));
    }
    // A TLS failure naming what the server's certificate names, the value among them.
    let (head, body) = response("/named");
    assert!(head.starts_with("HTTP/1.1 502") && String::from_utf8_lossy(&body).contains("TLS"), "{head}");
    // The status line, a header's name, a trailer and a 1xx answer: passed on redacted, or not at all.
    let (head, _) = response("/reason");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    let (head, _) = response("/name");
    assert!(head.starts_with("HTTP/1.1 200 ") && head.contains(&stars), "the header's name redacted: {head}");
    let (_, body) = response("/trailer");
    assert_eq!(body, b"ok");
    let (head, body) = response("/early");
    assert!(head.starts_with("HTTP/1.1 200 ") && body == b"ok", "{head}");
    // Split across two chunks written apart, and in a redirect's `Location`.
    let (_, body) = response("/split");
    assert_eq!(String::from_utf8_lossy(&body), format!("token={stars};"));
    let (head, _) = response("/location");
    assert!(head.starts_with("HTTP/1.1 302") && head.contains(&format!("?t={stars}")), "{head}");
    // Two ranges of a resource showing the credential, each half of the value: the proxy
    // asks for the whole (no `Range` to a secret-bound host), so each comes back redacted.
    let ranges = stage.line("ranges");
    let (first, second) = SECRET.split_at(SECRET.len() / 2);
    assert!(!ranges.contains(first) && !ranges.contains(second), "the secret reached the sandbox in two ranges: {ranges}");
    assert!(ranges.starts_with("HTTP/1.1 200 OK ") && ranges.contains(&stars), "{ranges}");
    // Each request reached the hostile server with the secret (so each echo was real).
    let heads = stage.hostile.heads();
    for path in ECHO_PATHS {
        let sent = heads.iter().filter(|h| h.starts_with(&format!("GET {path} "))).collect::<Vec<_>>();
        assert!(sent.len() == 1 && sent[0].contains(&format!("authorization: Bearer {SECRET}")), "{path}: {heads:?}");
    }

    // Cut short by the server at each length through the value: no answer ends in more
    // than 3 bytes of it (a longer piece of the value's start at a body's end is redacted).
    let cuts = stage.line("cuts");
    assert!(!cuts.contains(&SECRET[..4]), "the value's start reached the sandbox piece by piece: {cuts}");
    assert_eq!(cuts.matches(" | ").count(), SECRET.len() - 2, "{cuts}");
    // Nor does the host's audit of it (the TLS failure's row among them).
    let rows = stage.host.audit().query(&Default::default()).unwrap();
    assert!(rows.iter().any(|r| r.url.ends_with("/named")), "the TLS failure audited");
    let held: Vec<String> = rows.iter().map(|r| format!("{r:?}")).filter(|r| r.contains(SECRET)).collect();
    assert!(held.is_empty(), "audit rows hold the secret: {held:#?}");
    // Nothing in the sandbox holds the secret or the CA's key.
    assert_eq!(stage.line("ca key"), "unreadable");
    let key = std::fs::read(stage.data.path().join("egress-ca/ca.key")).unwrap();
    let scan = stage.out.files.iter().find(|f| f.path == "scan.bin").expect("scan.bin");
    assert!(scan.bytes.len() > 1000, "the scan read files");
    assert!(!scan.bytes.windows(secret.len()).any(|w| w == secret), "the secret is in a file of the sandbox");
    // The private scalar: PKCS#8's ECPrivateKey holds it as `02 01 01 04 20` and 32 bytes.
    let at = key.windows(5).position(|w| w == [2, 1, 1, 4, 32]).expect("an EC private key") + 5;
    let private = &key[at..at + 32];
    assert!(!scan.bytes.windows(32).any(|w| w == private), "the egress CA's key is readable in the sandbox");
    drop(stage.host);
}

/// The script's attacks on the terminated connection (see the module docs).
const SMUGGLES: &str = r#"
port = conf["port"]
other = f"other.test:{port}"
# A request smuggled in the body of another (`Content-Length` and `Transfer-Encoding` both).
raw = exchange(f"POST /cl-te HTTP/1.1\r\nHost: {secure}\r\nContent-Length: 60\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: {other}\r\nConnection: close\r\n\r\n")
out("cl-te", " | ".join(l.decode(errors="replace") for l in raw.split(b"\r\n") if l.startswith(b"HTTP/1.1")))
# HTTP/1.1 inside the connection: an absolute URI for another port of the host, a `Host`
# hiding another host behind userinfo, two `Host` headers; and a `CONNECT` to an IPv6 literal.
def first(raw):
    return raw.split(b"\r\n")[0].decode()
out("other port", first(exchange(f"GET https://secure.test:{port + 1}/other-port HTTP/1.1\r\nHost: {secure}\r\nConnection: close\r\n\r\n")))
out("host userinfo", first(exchange(f"GET /host-userinfo HTTP/1.1\r\nHost: {secure}@{other}\r\nConnection: close\r\n\r\n")))
out("two hosts", first(exchange(f"GET /two-hosts HTTP/1.1\r\nHost: {secure}\r\nHost: {other}\r\nConnection: close\r\n\r\n")))
out("ipv6", connect(f"[::1]:{port}")[1])
# HTTP/2: a `host` header naming another host than `:authority`; an `:authority` whose
# host is another behind userinfo naming this one; a header value with a line break.
out("h2 host", status_of(h2(frame(1, 5, 1, request_block(secure, "/h2-host", lit("host", other))))))
out("h2 userinfo", status_of(h2(frame(1, 5, 1, request_block(f"{secure}@{other}", "/h2-userinfo")))))
out("h2 crlf", status_of(h2(frame(1, 5, 1, request_block(secure, "/h2-crlf", lit("x-a", "1\r\nx-injected: 2"))))))
# Streams opened and reset at once, far more than a connection may carry.
flood = b"".join(frame(1, 5, 2 * i + 1, request_block(secure, "/flood")) + frame(3, 0, 2 * i + 1, (8).to_bytes(4, "big")) for i in range(500))
h2(flood, until=None)
# HPACK: one 4000-byte entry in the dynamic table, then 3000 references to it (12 MB).
# The length 4000 as an HPACK integer: 127 + 3873, in 7-bit groups.
n, rest = 4000 - 127, b""
while n >= 128:
    rest += bytes([n % 128 + 128]); n //= 128
rest += bytes([n])
bomb = b"\x40" + bytes([3]) + b"x-b" + b"\x7f" + rest + b"a" * 4000 + b"\xbe" * 3000
got = h2(frame(1, 5, 1, request_block(secure, "/bomb", bomb)))
out("bomb", status_of(got))
# A TLS hello that never finishes: the proxy closes the connection.
s, status = connect(secure)
s.sendall(b"\x16\x03\x01\x02\x00\x01")
try:
    closed = s.recv(1) == b""
except OSError:
    closed = True
out("slow hello", status, "closed" if closed else "open")
# The host in capitals with a trailing dot: the same host, given the secret.
raw = exchange(f"GET /variant HTTP/1.1\r\nHost: {secure}\r\nConnection: close\r\n\r\n", f"SECURE.TEST.:{port}")
out("variant", raw.split(b"\r\n")[0].decode())
# The proxy still serves after all of it.
out("after", exchange(f"GET /after HTTP/1.1\r\nHost: {secure}\r\nConnection: close\r\n\r\n").split(b"\r\n")[0].decode())
"#;

/// A script in the jail attacks the terminated connection: smuggling, HTTP/2 names and
/// header injection, a reset flood, an HPACK bomb, a hello that never ends, a host name
/// variant. Nothing reaches the server but the requests for it, each once and bounded, and
/// the proxy still serves.
#[tokio::test(flavor = "multi_thread")]
async fn a_script_cannot_smuggle_inject_or_flood_its_way_through_the_terminated_connection() {
    let stage = Stage::run(SMUGGLES).await;
    let heads = stage.hostile.heads();
    let sent =
        |path: &str| heads.iter().filter(|h| h.starts_with(&format!("GET {path} ")) || h.starts_with(&format!("POST {path} "))).count();

    // The chunked body wins over `Content-Length` and is sent as what it is (no length
    // left for the server to read the next request as body); the smuggled request never
    // reaches a server.
    let cl_te = stage.line("cl-te");
    let post = heads.iter().find(|h| h.starts_with("POST /cl-te ")).unwrap_or_else(|| panic!("{cl_te}: {heads:?}"));
    assert!(!post.contains("content-length: 60") && !post.contains("transfer-encoding"), "{post}");
    assert_eq!(sent("/smuggled"), 0, "{cl_te}: {heads:?}");
    assert!(heads.iter().all(|h| !h.contains("other.test")), "{heads:?}");
    assert!(stage.line("other port").starts_with("HTTP/1.1 403"), "{}", stage.line("other port"));
    assert!(stage.line("host userinfo").starts_with("HTTP/1.1 403"), "{}", stage.line("host userinfo"));
    assert_eq!(sent("/other-port") + sent("/host-userinfo"), 0, "{heads:?}");
    // Two `Host` headers: the first is checked, and the request is sent with that one only.
    assert_eq!(stage.line("two hosts"), "HTTP/1.1 200 OK");
    let two = heads.iter().find(|h| h.starts_with("GET /two-hosts ")).expect("/two-hosts sent");
    assert_eq!(two.matches("host: ").count(), 1, "{two}");
    assert!(stage.line("ipv6").starts_with("HTTP/1.1 403"), "{}", stage.line("ipv6"));
    // HTTP/2: another host in `host` or `:authority`, or a line break in a value: refused.
    assert_eq!(stage.line("h2 host"), "not 200");
    assert_ne!(stage.line("h2 userinfo"), "200");
    assert_ne!(stage.line("h2 crlf"), "200");
    for path in ["/h2-host", "/h2-userinfo", "/h2-crlf"] {
        assert_eq!(sent(path), 0, "{path} was sent: {heads:?}");
    }
    assert!(heads.iter().all(|h| !h.contains("x-injected")), "a header was injected: {heads:?}");
    // The flood sent at most a connection's requests.
    let flood = sent("/flood");
    // `terminate::MAX_REQUESTS`: what one terminated connection may carry.
    assert!(flood <= 100, "{flood} requests of one connection reached the server");
    // The bomb is not decoded into a request.
    assert_ne!(stage.line("bomb"), "200");
    assert_eq!(sent("/bomb"), 0);
    assert_eq!(stage.line("slow hello"), "HTTP/1.1 200 OK closed");
    assert_eq!(stage.line("variant"), "HTTP/1.1 200 OK");
    let variant = heads.iter().find(|h| h.starts_with("GET /variant ")).expect("/variant sent");
    assert!(variant.contains(&format!("host: secure.test:{}", stage.hostile.port)), "{variant}");
    assert_eq!(stage.line("after"), "HTTP/1.1 200 OK");
    drop(stage.host);
}
