//! Network egress through the host's gate, against servers on 127.0.0.1 and a test
//! resolver: allowed requests work; other ports, hosts, bare domains under a wildcard,
//! names resolving to loopback, userinfo tricks, numeric IP forms, IDN homographs and
//! redirects to other hosts are refused before a byte leaves the host (a canary server
//! proves it); DNS rebinding cannot move a request; bodies are capped, silent servers
//! time out; a bound secret reaches only its host and never the guest; each request is in
//! the audit log.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fixtures::{NET, TestHost, TestServer};
use serde_json::{Value, json};
use skillhost::{DirectSkill, net::EgressOutcome, net::NetConfig, net::Resolver, runtime::WasmConfig};

use crate::{load_error, ok, shared_cache};

/// Resolves names from a table; each name answers its list in turn (the last one
/// repeating), so a second lookup can be made to give a different address.
#[derive(Default)]
pub(crate) struct TestResolver {
    names: Mutex<HashMap<String, Vec<IpAddr>>>,
    lookups: AtomicUsize,
}

impl TestResolver {
    pub(crate) fn with(entries: &[(&str, &[&str])]) -> Arc<Self> {
        let resolver = Self::default();
        for (name, addrs) in entries {
            resolver.names.lock().unwrap().insert(name.to_string(), addrs.iter().map(|a| a.parse().unwrap()).collect());
        }
        Arc::new(resolver)
    }
}

#[async_trait::async_trait]
impl Resolver for TestResolver {
    async fn resolve(&self, host: &str, _port: u16) -> std::io::Result<Vec<IpAddr>> {
        self.lookups.fetch_add(1, Ordering::SeqCst);
        let mut names = self.names.lock().unwrap();
        let addrs = names.get_mut(host).ok_or_else(|| std::io::Error::other(format!("{host}: no such name")))?;
        let first = addrs[0];
        if addrs.len() > 1 {
            addrs.remove(0);
        }
        Ok(vec![first])
    }
}

fn host_with(resolver: Arc<TestResolver>, tune: impl FnOnce(&mut NetConfig)) -> TestHost {
    let mut net = NetConfig { resolver, ..NetConfig::default() };
    tune(&mut net);
    TestHost::with_config(WasmConfig { cache_dir: Some(shared_cache().join("compiled")), net, ..WasmConfig::default() })
}

async fn net_skill(t: &TestHost, network: &str) -> DirectSkill {
    let dir = NET.folder_with(t.skills.path(), network);
    t.host.load_path_granted(&dir).await.expect("net guest loads")
}

async fn fetch(skill: &DirectSkill, url: &str) -> Value {
    ok(skill, "fetch", json!({ "url": url })).await
}

fn assert_denied(report: &Value, what: &str) {
    assert_eq!(report["ok"], false, "{what}: {report}");
    assert_eq!(report["code"], "denied", "{what} is refused as HttpRequestDenied: {report}");
}

/// Refusal reasons in the audit log, oldest first.
fn refusals(t: &TestHost) -> Vec<String> {
    let rows = t.host.audit().query(&Default::default()).unwrap();
    rows.into_iter()
        .filter_map(|r| match r.outcome {
            EgressOutcome::Refused(reason) => Some(reason),
            _ => None,
        })
        .collect()
}

/// The audit log's writer gathers rows for a few milliseconds before it writes them. A
/// request's row is still in the log once the host is gone, even while a loaded skill
/// (and through it the log) outlives the host: dropping the host writes what gathered.
#[tokio::test]
async fn a_requests_audit_row_is_written_when_the_host_is_dropped() {
    let server = TestServer::start();
    let t = host_with(TestResolver::with(&[]), |_| {});
    let port = server.port();
    let skill = net_skill(&t, &format!("[network]\nallow = [\"http://127.0.0.1:{port}\"]\n")).await;
    let report = fetch(&skill, &format!("http://127.0.0.1:{port}/ok")).await;
    assert_eq!(report["status"], 200, "{report}");
    let TestHost { host, data, skills: _skills } = t;
    drop(host);
    let log = skillhost::audit::SqliteAuditLog::open(data.path().join("audit.db")).unwrap();
    let rows = skillhost::audit::AuditLog::query(&log, &Default::default()).unwrap();
    assert_eq!(rows.len(), 1, "the request's row, written before the host was gone: {rows:?}");
    assert_eq!(rows[0].outcome, EgressOutcome::Status(200));
    drop(skill);
}

#[tokio::test]
async fn allowed_rule_works_and_is_audited() {
    let server = TestServer::start();
    let t = host_with(TestResolver::with(&[]), |_| {});
    let port = server.port();
    let skill = net_skill(&t, &format!("[network]\nallow = [\"http://127.0.0.1:{port}\"]\n")).await;
    let report = fetch(&skill, &format!("http://127.0.0.1:{port}/ok?token=abc")).await;
    assert_eq!((report["ok"].clone(), report["status"].clone()), (json!(true), json!(200)), "{report}");
    assert_eq!(report["body"].as_str().unwrap().len(), 1024);
    let received = server.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].header("host"), Some(format!("127.0.0.1:{port}").as_str()));

    let rows = t.host.audit().query(&Default::default()).unwrap();
    let row = rows.last().expect("an audit row");
    assert_eq!((row.skill.as_str(), row.tool.as_str(), row.method.as_str()), ("net", "fetch", "GET"));
    assert_eq!(row.url, format!("http://127.0.0.1:{port}/ok"), "no query in the audit log");
    assert_eq!(row.ip, Some("127.0.0.1".parse().unwrap()));
    assert_eq!(row.outcome, EgressOutcome::Status(200));
    assert_eq!(row.bytes_in, 1024);
}

#[tokio::test]
async fn request_bodies_arrive_whole_with_their_length() {
    let server = TestServer::start();
    let t = host_with(TestResolver::with(&[]), |_| {});
    let port = server.port();
    let skill = net_skill(&t, &format!("[network]\nallow = [\"http://127.0.0.1:{port}\"]\n")).await;
    let body = "x".repeat(300_000);
    let report = ok(&skill, "fetch", json!({"url": format!("http://127.0.0.1:{port}/ok"), "method": "POST", "body": body})).await;
    assert_eq!(report["status"], 200, "{report}");
    assert_eq!(server.received()[0].header("content-length"), Some("300000"));
    let rows = t.host.audit().query(&Default::default()).unwrap();
    assert_eq!((rows[0].method.as_str(), rows[0].bytes_out), ("POST", 300_000));
}

#[tokio::test]
async fn other_ports_hosts_and_forms_are_refused_before_connecting() {
    let server = TestServer::start();
    let canary = TestServer::start();
    let resolver = TestResolver::with(&[("svc.test", &["127.0.0.1"])]);
    let t = host_with(resolver, |_| {});
    let (port, other) = (server.port(), canary.port());
    let skill = net_skill(&t, &format!("[network]\nallow = [\"http://svc.test:{port}\"]\nprivate = [\"http://svc.test:{port}\"]\n")).await;

    let report = fetch(&skill, &format!("http://svc.test:{port}/ok")).await;
    assert_eq!(report["status"], 200, "the named host works: {report}");

    let attempts = [
        format!("http://svc.test:{other}/ok"),           // same host, another port
        format!("https://svc.test:{port}/ok"),           // another scheme
        format!("http://127.0.0.1:{other}/ok"),          // the canary by IP
        format!("http://2130706433:{other}/ok"),         // decimal IPv4
        format!("http://0x7f.0.0.1:{other}/ok"),         // hex
        format!("http://0177.0.0.1:{other}/ok"),         // octal
        format!("http://[::ffff:127.0.0.1]:{other}/ok"), // IPv4-mapped IPv6
        format!("http://svc.test@127.0.0.1:{other}/ok"), // userinfo pointing elsewhere
        format!("http://xn--vc-doc.test:{port}/ok"),     // Cyrillic ѕ (ѕvc.test), as a guest must send it
        format!("http://svc.test.evil:{port}/ok"),       // suffix trick
    ];
    for url in &attempts {
        assert_denied(&fetch(&skill, url).await, url);
    }
    // Unencoded, the homograph never leaves the guest: wasi:http refuses the authority.
    let raw = fetch(&skill, &format!("http://ѕvc.test:{port}/ok")).await;
    assert_eq!(raw["ok"], false, "{raw}");
    assert!(canary.received().is_empty(), "the canary received {:?}", canary.received());
    assert_eq!(server.received().len(), 1, "only the allowed request arrived");
    let reasons = refusals(&t);
    assert_eq!(reasons.len(), attempts.len(), "one audit row per refusal: {reasons:#?}");
    assert!(reasons[0].contains(&format!("http://svc.test:{other} is not in the skill's network allowlist; to allow it, add \"http://svc.test:{other}\" to `[network] allow`")), "{}", reasons[0]);
    assert!(reasons.iter().any(|r| r.contains("userinfo")), "{reasons:#?}");
}

/// Attack: reach around a rule with the textual forms a name can take: an
/// internationalised rule reached by its look-alike ASCII spelling, case, trailing dots,
/// and IPv6 literals with a zone id (which names an interface, not a host).
/// Expected: the forms of the very same host pass (case and a trailing dot do not change
/// a DNS name; an IDN rule matches its punycode, which is what a guest sends); the
/// look-alike and every zone id are refused.
/// Checked: the canary listener received nothing, and the resolver only ever saw the
/// normalised name.
#[tokio::test]
async fn idn_case_trailing_dots_and_zone_ids_against_the_live_gate() {
    let server = TestServer::start();
    let canary = TestServer::start();
    let resolver = TestResolver::with(&[("xn--bcher-kva.test", &["127.0.0.1"]), ("bucher.test", &["127.0.0.1"])]);
    let t = host_with(resolver.clone(), |_| {});
    let (port, other) = (server.port(), canary.port());
    let skill = net_skill(&t, &format!("[network]\nprivate = [\"http://bücher.test:{port}\"]\n")).await;

    for url in [
        format!("http://xn--bcher-kva.test:{port}/ok"),
        format!("http://XN--BCHER-KVA.Test:{port}/ok"),
        format!("http://xn--bcher-kva.test.:{port}/ok"),
    ] {
        assert_eq!(fetch(&skill, &url).await["status"], 200, "{url} is the allowed host");
    }
    assert_eq!(server.received().len(), 3);
    assert!(server.received().iter().all(|r| r.header("host").is_some_and(|h| h.to_ascii_lowercase().starts_with("xn--bcher-kva.test"))));

    let refused = [
        format!("http://bucher.test:{port}/ok"),          // the ASCII look-alike of the IDN
        format!("http://xn--bcher-kva.test..:{port}/ok"), // two trailing dots: not the same name
        format!("http://[::1%25lo]:{other}/ok"),          // loopback with a zone id
        format!("http://[fe80::1%25eth0]:{other}/ok"),    // link-local with a zone id
    ];
    for url in &refused {
        let report = fetch(&skill, url).await;
        assert_eq!(report["ok"], false, "{url} must not pass: {report}");
    }
    assert!(canary.received().is_empty(), "the canary received {:?}", canary.received());
    assert_eq!(server.received().len(), 3, "no refused form reached the server");
    assert_eq!(resolver.lookups.load(Ordering::SeqCst), 3, "only the allowed name was ever resolved");
}

#[tokio::test]
async fn wildcards_match_subdomains_only() {
    let server = TestServer::start();
    let resolver = TestResolver::with(&[("a.corp.test", &["127.0.0.1"]), ("corp.test", &["127.0.0.1"])]);
    let t = host_with(resolver.clone(), |_| {});
    let port = server.port();
    let skill = net_skill(&t, &format!("[network]\nallow = [\"http://*.corp.test:{port}\"]\n")).await;
    // The subdomain passes the rule and is then refused for resolving to loopback: a
    // wildcard never opens private addresses.
    assert_denied(&fetch(&skill, &format!("http://a.corp.test:{port}/ok")).await, "a.corp.test");
    assert_denied(&fetch(&skill, &format!("http://corp.test:{port}/ok")).await, "the bare domain");
    let reasons = refusals(&t);
    assert!(reasons[0].contains("a.corp.test resolves to 127.0.0.1, a loopback address"), "{reasons:#?}");
    assert!(reasons[1].contains("corp.test:") && reasons[1].contains("is not in the skill's network allowlist"), "{reasons:#?}");
    assert_eq!(resolver.lookups.load(Ordering::SeqCst), 1, "the bare domain was refused before any lookup");
    assert!(server.received().is_empty());
}

#[tokio::test]
async fn a_name_resolving_to_loopback_needs_a_private_entry() {
    let server = TestServer::start();
    let resolver = TestResolver::with(&[("inside.test", &["127.0.0.1"])]);
    let port = server.port();
    let t = host_with(resolver.clone(), |_| {});
    let skill = net_skill(&t, &format!("[network]\nallow = [\"http://inside.test:{port}\"]\n")).await;
    assert_denied(&fetch(&skill, &format!("http://inside.test:{port}/ok")).await, "loopback without a private entry");
    assert!(refusals(&t)[0].contains("listed under `[network] private`"));
    assert!(server.received().is_empty());

    let t = host_with(resolver, |_| {});
    let skill = net_skill(&t, &format!("[network]\nprivate = [\"http://inside.test:{port}\"]\n")).await;
    assert_eq!(fetch(&skill, &format!("http://inside.test:{port}/ok")).await["status"], 200);
}

#[tokio::test]
async fn dns_rebinding_cannot_move_a_request() {
    let server = TestServer::start();
    // First answer 127.0.0.1 (checked and allowed), then an address where nothing listens.
    let resolver = TestResolver::with(&[("rebind.test", &["127.0.0.1", "127.0.0.99"])]);
    let t = host_with(resolver.clone(), |_| {});
    let port = server.port();
    let skill = net_skill(&t, &format!("[network]\nprivate = [\"http://rebind.test:{port}\"]\n")).await;
    let report = fetch(&skill, &format!("http://rebind.test:{port}/ok")).await;
    assert_eq!(report["status"], 200, "went to the checked address: {report}");
    assert_eq!(resolver.lookups.load(Ordering::SeqCst), 1, "one lookup per request: nothing to rebind");
    assert_eq!(server.received()[0].header("host"), Some(format!("rebind.test:{port}").as_str()));
}

#[tokio::test]
async fn redirects_are_not_followed_and_the_next_hop_is_checked() {
    let server = TestServer::start();
    let canary = TestServer::start();
    let t = host_with(TestResolver::with(&[]), |_| {});
    let (port, other) = (server.port(), canary.port());
    let skill = net_skill(&t, &format!("[network]\nallow = [\"http://127.0.0.1:{port}\"]\n")).await;
    let evil = format!("http://127.0.0.1:{other}/ok");
    let report = fetch(&skill, &format!("http://127.0.0.1:{port}/redirect?to={evil}")).await;
    assert_eq!(report["status"], 302, "the guest sees the redirect: {report}");
    let location = report["headers"].as_array().unwrap().iter().find(|h| h[0] == "location").unwrap()[1].as_str().unwrap().to_owned();
    assert_eq!(location, evil);
    assert_denied(&fetch(&skill, &location).await, "the redirect target");
    assert!(canary.received().is_empty());
}

#[tokio::test]
async fn a_spoofed_host_header_does_not_reach_the_server() {
    let server = TestServer::start();
    let t = host_with(TestResolver::with(&[]), |_| {});
    let port = server.port();
    let skill = net_skill(&t, &format!("[network]\nallow = [\"http://127.0.0.1:{port}\"]\n")).await;
    // wasi:http forbids the guest to set `Host` at all; the gate would overwrite it anyway
    // (the allowed-request test checks the Host the server receives).
    let report = ok(&skill, "fetch", json!({"url": format!("http://127.0.0.1:{port}/ok"), "headers": [["Host", "evil.example"]]})).await;
    assert_eq!((report["ok"].clone(), report["code"].clone()), (json!(false), json!("invalid")), "{report}");
    assert!(server.received().is_empty(), "nothing was sent: {:?}", server.received());
}

#[tokio::test]
async fn oversized_bodies_are_cut_and_silent_servers_time_out() {
    let server = TestServer::start();
    let t = host_with(TestResolver::with(&[]), |net| {
        net.max_response_bytes = 64 << 10;
        net.first_byte_timeout = Duration::from_millis(300);
    });
    let port = server.port();
    let skill = net_skill(&t, &format!("[network]\nallow = [\"http://127.0.0.1:{port}\"]\n")).await;
    let report = fetch(&skill, &format!("http://127.0.0.1:{port}/big?n={}", 1 << 20)).await;
    assert_eq!(report["ok"], false, "{report}");
    let within = fetch(&skill, &format!("http://127.0.0.1:{port}/big?n={}", 60 << 10)).await;
    assert_eq!(within["body"].as_str().unwrap().len(), 60 << 10, "under the cap is fine");
    let report = fetch(&skill, &format!("http://127.0.0.1:{port}/hang")).await;
    assert_eq!((report["ok"].clone(), report["code"].clone()), (json!(false), json!("timeout")), "{report}");

    let rows = t.host.audit().query(&Default::default()).unwrap();
    assert!(matches!(&rows[0].outcome, EgressOutcome::Failed(why) if why.contains("body")), "{:?}", rows[0]);
    assert!(rows[0].bytes_in > 64 << 10 && rows[0].bytes_in < 1 << 20, "cut near the cap: {}", rows[0].bytes_in);
    assert!(matches!(&rows[2].outcome, EgressOutcome::Failed(_)), "{:?}", rows[2]);
}

#[tokio::test]
async fn a_bound_secret_reaches_only_its_host_and_never_the_guest() {
    let bound = TestServer::start();
    let other = TestServer::start();
    let t = host_with(TestResolver::with(&[]), |_| {});
    let (port, other_port) = (bound.port(), other.port());
    t.host.secrets().set("api-token", "s3cr3t-value").unwrap();
    let network = format!(
        "[network]\nallow = [\"http://127.0.0.1:{port}\", \"http://127.0.0.1:{other_port}\"]\n\
         [[secrets]]\nname = \"api-token\"\nheader = \"Authorization\"\nformat = \"Bearer {{}}\"\nhosts = [\"http://127.0.0.1:{port}\"]\n"
    );
    let skill = net_skill(&t, &network).await;
    let to_bound =
        ok(&skill, "fetch", json!({"url": format!("http://127.0.0.1:{port}/ok"), "headers": [["Authorization", "guest-made"]]})).await;
    let to_other = fetch(&skill, &format!("http://127.0.0.1:{other_port}/ok")).await;
    assert_eq!(bound.received()[0].header("authorization"), Some("Bearer s3cr3t-value"), "the host's value wins");
    assert_eq!(other.received()[0].header("authorization"), None, "never sent to another host");
    let env = ok(&skill, "env_secret", json!({})).await;
    for seen in [&to_bound, &to_other, &env] {
        assert!(!seen.to_string().contains("s3cr3t"), "the guest saw the secret: {seen}");
    }

    // Unset: requests to the bound host are refused with the command that fixes it.
    t.host.secrets().remove("api-token").unwrap();
    assert_denied(&fetch(&skill, &format!("http://127.0.0.1:{port}/ok")).await, "missing secret");
    assert!(refusals(&t).last().unwrap().contains("skillhost secret set api-token"));
}

#[tokio::test]
async fn http_is_not_linked_without_a_network_grant() {
    let t = host_with(TestResolver::with(&[]), |_| {});
    let err = load_error(t.host.load_path_granted(&NET.folder(t.skills.path())).await);
    assert!(err.contains("imports wasi:http, but its skill.toml allows no network host"), "{err}");
}

#[tokio::test]
async fn the_uptime_skill_checks_an_allowed_site_and_is_refused_elsewhere() {
    let server = TestServer::start();
    let t = host_with(TestResolver::with(&[]), |_| {});
    let port = server.port();
    let dir = fixtures::UPTIME.folder(t.skills.path());
    let manifest = std::fs::read_to_string(dir.join("skill.toml")).unwrap();
    let start = manifest.find("allow = [").unwrap();
    let end = start + manifest[start..].find(']').unwrap() + 1;
    let local = format!("{}allow = [\"http://127.0.0.1:{port}\"]{}", &manifest[..start], &manifest[end..]);
    std::fs::write(dir.join("skill.toml"), local).unwrap();
    let skill = t.host.load_path_granted(&dir).await.unwrap();
    let out = ok(&skill, "check", json!({"url": format!("http://127.0.0.1:{port}/ok")})).await;
    assert_eq!((out["up"].clone(), out["status"].clone(), out["body_bytes"].clone()), (json!(true), json!(200), json!(1024)), "{out}");
    let err = crate::call(&skill, "check", json!({"url": "https://example.com/"})).await.unwrap_err();
    assert_eq!(err.code(), "denied", "{err}");
    assert!(
        err.to_string().contains("https://example.com:443 is not in the skill's network allowlist"),
        "the host's reason is on the error: {err}"
    );
}

#[tokio::test]
async fn the_github_skill_binds_its_token_to_the_api_host_only() {
    let t = host_with(TestResolver::with(&[]), |_| {});
    let skill = t.host.load_path_granted(&fixtures::GITHUB.folder(t.skills.path())).await.unwrap();
    let grant = skill.skill.grant();
    assert_eq!(grant.secrets.len(), 1);
    assert_eq!(grant.secrets[0].hosts[0].text, "https://api.github.com");
    assert_eq!(
        skillhost::skill::RiskTier::of(&skill.source.manifest),
        skillhost::skill::RiskTier::Explicit,
        "a secret needs explicit approval"
    );
    // No secret set: the request is refused before any lookup, naming the command.
    let err = crate::call(&skill, "repo", json!({"owner": "rust-lang", "repo": "rust"})).await.unwrap_err();
    assert!(err.to_string().contains("skillhost secret set github"), "{err}");
}

/// A certificate authority of the test's own: a host built with [`TestCa::client_config`]
/// trusts it and nothing else.
pub(crate) struct TestCa {
    key: rcgen::KeyPair,
    params: rcgen::CertificateParams,
    cert: rcgen::Certificate,
}

impl TestCa {
    pub(crate) fn new() -> Self {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
        let cert = params.self_signed(&key).unwrap();
        Self { key, params, cert }
    }

    /// A server certificate for `name`, issued by this CA.
    pub(crate) fn issue(&self, name: &str) -> (rustls::pki_types::CertificateDer<'static>, rustls::pki_types::PrivateKeyDer<'static>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
        // Not the CA's name (OpenSSL takes a certificate naming its issuer as self-signed).
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        let cert = params.signed_by(&key, &rcgen::Issuer::from_params(&self.params, &self.key)).unwrap();
        (cert.der().clone(), rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()))
    }

    /// The CA's certificate.
    pub(crate) fn cert(&self) -> &rustls::pki_types::CertificateDer<'static> {
        self.cert.der()
    }

    pub(crate) fn client_config(&self) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.cert.der().clone()).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Arc::new(config)
    }
}

/// What a TLS server saw of each request: the SNI name and the request head.
type Seen = Arc<Mutex<Vec<(Option<String>, String)>>>;

/// How a [`TlsServer`] answers a request head: its response in pieces, written 100 ms
/// apart (so that a proxy reads them as separate chunks).
pub(crate) type Reply = Arc<dyn Fn(&str) -> Vec<Vec<u8>> + Send + Sync>;

/// An HTTPS server on 127.0.0.1 presenting one certificate; it records the SNI name and
/// the request head of each request that got past the handshake, and answers it with its
/// [`Reply`] (`over tls` unless told otherwise), then closes the connection.
pub(crate) struct TlsServer {
    pub(crate) port: u16,
    seen: Seen,
}

impl TlsServer {
    async fn start(identity: (rustls::pki_types::CertificateDer<'static>, rustls::pki_types::PrivateKeyDer<'static>)) -> Self {
        let over_tls = b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\nconnection: close\r\n\r\nover tls";
        Self::answering(identity, Arc::new(|_: &str| vec![over_tls.to_vec()])).await
    }

    pub(crate) async fn answering(
        identity: (rustls::pki_types::CertificateDer<'static>, rustls::pki_types::PrivateKeyDer<'static>),
        reply: Reply,
    ) -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![identity.0], identity.1)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Seen = Arc::default();
        let record = seen.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, record, reply) = (acceptor.clone(), record.clone(), reply.clone());
                tokio::spawn(async move {
                    // A client that refuses the certificate ends here.
                    let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                    let sni = tls.get_ref().1.server_name().map(str::to_owned);
                    let (mut head, mut buf) = (Vec::new(), [0u8; 4096]);
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    record.lock().unwrap().push((sni, head.clone()));
                    for (i, piece) in reply(&head).into_iter().enumerate() {
                        if i > 0 {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        if tls.write_all(&piece).await.is_err() || tls.flush().await.is_err() {
                            return;
                        }
                    }
                    let _ = tls.shutdown().await;
                });
            }
        });
        Self { port, seen }
    }

    /// The SNI name and the lowercased head of each request.
    fn seen(&self) -> Vec<(Option<String>, String)> {
        self.seen.lock().unwrap().iter().map(|(sni, head)| (sni.clone(), head.to_lowercase())).collect()
    }

    /// The head of each request, as it came.
    pub(crate) fn heads(&self) -> Vec<String> {
        self.seen.lock().unwrap().iter().map(|(_, head)| head.clone()).collect()
    }
}

/// `[network]` for `https://secure.test:PORT`, which the test resolver points at
/// 127.0.0.1 (so it is listed under `private` too).
fn secure_test(port: u16) -> String {
    format!("[network]\nallow = [\"https://secure.test:{port}\"]\nprivate = [\"https://secure.test:{port}\"]\n")
}

/// HTTPS through the gate: the host resolves the name, connects to the checked address,
/// sends SNI for the checked name and verifies the certificate against its roots; the
/// `Host` header is the checked authority; the audit row has the address and status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_reaches_an_allowed_host_with_a_verified_certificate() {
    let ca = TestCa::new();
    let server = TlsServer::start(ca.issue("secure.test")).await;
    let t = host_with(TestResolver::with(&[("secure.test", &["127.0.0.1"])]), |net| net.tls = ca.client_config());
    let skill = net_skill(&t, &secure_test(server.port)).await;
    let report = fetch(&skill, &format!("https://secure.test:{}/hello", server.port)).await;
    assert_eq!(
        (report["ok"].clone(), report["status"].clone(), report["body"].clone()),
        (json!(true), json!(200), json!("over tls")),
        "{report}"
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0.as_deref(), Some("secure.test"), "SNI names the checked host");
    assert!(seen[0].1.starts_with("get /hello http/1.1\r\n"), "{}", seen[0].1);
    assert!(seen[0].1.contains(&format!("\r\nhost: secure.test:{}\r\n", server.port)), "{}", seen[0].1);
    let rows = t.host.audit().query(&Default::default()).unwrap();
    let row = rows.last().expect("an audit row");
    assert_eq!(
        (row.url.clone(), row.ip, row.outcome.clone()),
        (format!("https://secure.test:{}/hello", server.port), Some("127.0.0.1".parse().unwrap()), EgressOutcome::Status(200))
    );
}

/// Attack: an allowed name answered by a server whose certificate is for another name,
/// or is issued by an authority the host does not trust (a man in the middle, a
/// rebinding target). Expected: the handshake fails on the host's side, the server never
/// receives a request, the guest gets an error (not a denial: the request was allowed),
/// and the audit row says TLS failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_name_or_from_an_untrusted_issuer_is_refused() {
    let ca = TestCa::new();
    let stranger = TestCa::new();
    for (what, identity) in
        [("a certificate for another name", ca.issue("other.test")), ("an untrusted issuer", stranger.issue("secure.test"))]
    {
        let server = TlsServer::start(identity).await;
        let t = host_with(TestResolver::with(&[("secure.test", &["127.0.0.1"])]), |net| net.tls = ca.client_config());
        let skill = net_skill(&t, &secure_test(server.port)).await;
        let report = fetch(&skill, &format!("https://secure.test:{}/secret", server.port)).await;
        assert_eq!(report["ok"], false, "{what}: {report}");
        assert_ne!(report["code"], "denied", "{what}: the request was allowed; TLS failed: {report}");
        assert!(server.seen().is_empty(), "{what}: no request got past the handshake");
        let rows = t.host.audit().query(&Default::default()).unwrap();
        let outcome = rows.last().map(|r| r.outcome.to_string()).unwrap_or_default();
        assert!(outcome.starts_with("failed: TLS with secure.test failed"), "{what}: {outcome}");
    }
}

/// A component importing wasi:http with no skill.toml at all (none embedded, none beside
/// it) is told that, not that its skill.toml lacks a section.
#[tokio::test]
async fn a_component_without_any_skill_toml_is_told_it_has_none() {
    use skillhost_core::{Grant, Limits, SkillCode, SkillManifest, SkillRuntime as _, SkillSource};
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("net.wasm");
    std::fs::copy(NET.wasm, &wasm).unwrap();
    let bytes: Arc<[u8]> = std::fs::read(&wasm).unwrap().into();
    // What the package reader makes of a component without one: a manifest asking for nothing.
    let manifest = SkillManifest::parse("name = \"net\"\nversion = \"0.0.0\"\ndescription = \"a component\"\n", &wasm).unwrap();
    let grant = Grant::pure(manifest.name.clone(), Limits::default());
    let content_hash = skillhost_package::Snapshot::Wasm { path: wasm.clone(), bytes: bytes.to_vec() }.content_hash();
    let source =
        SkillSource { manifest, origin: wasm.clone(), code: SkillCode::Wasm { path: wasm, bytes }, instructions: None, content_hash };
    let runtime = skillhost_wasm::WasmRuntime::new(WasmConfig::default()).unwrap();
    let err = runtime.load(&source, grant).await.err().expect("refused").to_string();
    assert!(err.contains("imports wasi:http, and it has no skill.toml (none embedded, none beside it)"), "{err}");
    assert!(!err.contains("`[network]` section"), "{err}");
}
