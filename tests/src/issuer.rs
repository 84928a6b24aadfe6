//! An OAuth authorization server's half that a resource server sees, on 127.0.0.1: its
//! signing keys (ES256, made by the test) published as a JWKS at `/jwks`, and access
//! tokens signed with them. [`Issuer::rotate`] replaces the published key, as an issuer
//! rotating its keys does; [`Issuer::fetches`] counts the JWKS fetches.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use serde_json::{Value, json};

/// A signing key and the kid it is published under.
pub struct SigningKey {
    kid: String,
    pair: EcdsaKeyPair,
}

impl SigningKey {
    /// A new P-256 key published as `kid`.
    pub fn new(kid: &str) -> Self {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("generate a P-256 key");
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).expect("read the key back");
        Self { kid: kid.to_owned(), pair }
    }

    /// Its public half as a JWK.
    pub fn jwk(&self) -> Value {
        // Uncompressed point: 0x04, X, Y.
        let point = self.pair.public_key().as_ref();
        json!({
            "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": self.kid,
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        })
    }

    /// A compact JWS of `claims`, signed ES256, its header naming `kid`.
    pub fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let header = json!({"alg": "ES256", "typ": "at+jwt", "kid": kid});
        let input = format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
        let signature = self.pair.sign(&SystemRandom::new(), input.as_bytes()).expect("sign");
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
    }

    /// [`sign_as`](Self::sign_as) under its own kid.
    pub fn sign(&self, claims: &Value) -> String {
        self.sign_as(&self.kid, claims)
    }
}

/// The issuer: its published keys, served at `http://ADDR/jwks` until dropped.
pub struct Issuer {
    /// Where it listens.
    pub addr: SocketAddr,
    published: Arc<Mutex<Vec<Value>>>,
    fetches: Arc<AtomicUsize>,
}

impl Issuer {
    /// An issuer publishing `key`.
    pub fn start(key: &SigningKey) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().unwrap();
        let published = Arc::new(Mutex::new(vec![key.jwk()]));
        let fetches = Arc::new(AtomicUsize::new(0));
        let (keys, count) = (published.clone(), fetches.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(10)));
                let mut reader = BufReader::new(&stream);
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                // The rest of the head.
                let mut header = String::new();
                while reader.read_line(&mut header).is_ok_and(|n| n > 0) && header != "\r\n" {
                    header.clear();
                }
                let (status, body) = if line.starts_with("GET /jwks ") {
                    count.fetch_add(1, Ordering::SeqCst);
                    ("200 OK", json!({"keys": *keys.lock().unwrap()}).to_string())
                } else {
                    ("404 Not Found", String::new())
                };
                let _ = write!(
                    &stream,
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Self { addr, published, fetches }
    }

    /// Its issuer identifier (`iss`).
    pub fn id(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Where its keys are published.
    pub fn jwks_url(&self) -> String {
        format!("http://{}/jwks", self.addr)
    }

    /// Publish `key` instead of the keys published so far.
    pub fn rotate(&self, key: &SigningKey) {
        *self.published.lock().unwrap() = vec![key.jwk()];
    }

    /// How many times its keys were fetched.
    pub fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}
