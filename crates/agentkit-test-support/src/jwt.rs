//! An identity provider for tests: signing keys made on the spot (RSA,
//! P-256, Ed25519), their JWKS, and JSON Web Tokens signed with them,
//! written here with aws-lc-rs directly (not with the JWT library the code
//! under test uses), and a JWKS HTTP server whose keys a test rotates.

// Test helpers: a key that cannot be made is a broken test machine.
#![allow(clippy::expect_used)]

use std::sync::{Arc, Mutex};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaKeyPair};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::mock::{MockResponse, MockServer};

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

enum Pair {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
    Ed(Ed25519KeyPair),
}

/// A signing key with its `kid`.
pub struct TestKey {
    pub kid: String,
    pair: Pair,
}

impl std::fmt::Debug for TestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TestKey({} {})", self.alg(), self.kid)
    }
}

impl TestKey {
    /// A fresh 2048-bit RSA key (RS256).
    pub fn rsa(kid: &str) -> TestKey {
        let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048)
            .expect("generate an RSA key");
        TestKey {
            kid: kid.to_owned(),
            pair: Pair::Rsa(pair),
        }
    }

    /// A fresh P-256 key (ES256).
    pub fn ec(kid: &str) -> TestKey {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).expect("generate a P-256 key");
        let pair = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref()).expect("read the P-256 key");
        TestKey {
            kid: kid.to_owned(),
            pair: Pair::Ec(pair),
        }
    }

    /// A fresh Ed25519 key (EdDSA).
    pub fn ed(kid: &str) -> TestKey {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("generate a key");
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("read the Ed25519 key");
        TestKey {
            kid: kid.to_owned(),
            pair: Pair::Ed(pair),
        }
    }

    /// The JOSE algorithm the key signs with.
    pub fn alg(&self) -> &'static str {
        match self.pair {
            Pair::Rsa(_) => "RS256",
            Pair::Ec(_) => "ES256",
            Pair::Ed(_) => "EdDSA",
        }
    }

    /// The public key as a JWK.
    pub fn jwk(&self) -> Value {
        match &self.pair {
            Pair::Rsa(pair) => {
                let (n, e) = rsa_public_numbers(pair.public_key().as_ref());
                json!({"kty": "RSA", "kid": self.kid, "alg": "RS256", "use": "sig",
                       "n": b64(n), "e": b64(e)})
            }
            Pair::Ec(pair) => {
                // Uncompressed point: 0x04 || x || y.
                let point = pair.public_key().as_ref();
                json!({"kty": "EC", "kid": self.kid, "crv": "P-256", "alg": "ES256",
                       "x": b64(&point[1..33]), "y": b64(&point[33..65])})
            }
            Pair::Ed(pair) => json!({"kty": "OKP", "kid": self.kid, "crv": "Ed25519",
                                      "alg": "EdDSA", "x": b64(pair.public_key().as_ref())}),
        }
    }

    /// A token with the usual header (`alg`, `typ`, `kid`) over `claims`.
    pub fn sign(&self, claims: &Value) -> String {
        self.sign_with_header(
            &json!({"alg": self.alg(), "typ": "JWT", "kid": self.kid}),
            claims,
        )
    }

    /// A token with the header given as is.
    pub fn sign_with_header(&self, header: &Value, claims: &Value) -> String {
        let input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let rng = SystemRandom::new();
        let sig = match &self.pair {
            Pair::Rsa(pair) => {
                let mut sig = vec![0; pair.public_modulus_len()];
                pair.sign(
                    &signature::RSA_PKCS1_SHA256,
                    &rng,
                    input.as_bytes(),
                    &mut sig,
                )
                .expect("RSA signing");
                sig
            }
            Pair::Ec(pair) => pair
                .sign(&rng, input.as_bytes())
                .expect("ECDSA signing")
                .as_ref()
                .to_vec(),
            Pair::Ed(pair) => pair.sign(input.as_bytes()).as_ref().to_vec(),
        };
        format!("{input}.{}", b64(&sig))
    }
}

/// A JWKS document of `keys`.
pub fn jwks(keys: &[&TestKey]) -> Value {
    json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()})
}

/// Seconds since the epoch, for `iat` and `exp`.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// `n` and `e` of a DER `RSAPublicKey` (`SEQUENCE { INTEGER, INTEGER }`),
/// without the sign byte.
fn rsa_public_numbers(der: &[u8]) -> (&[u8], &[u8]) {
    let (_, seq, _) = der_item(der);
    let (_, n, rest) = der_item(seq);
    let (_, e, _) = der_item(rest);
    let n = n.strip_prefix(&[0]).unwrap_or(n);
    (n, e)
}

/// One DER item: its tag, its content and what follows it.
fn der_item(input: &[u8]) -> (u8, &[u8], &[u8]) {
    let tag = input[0];
    let first = input[1];
    let (len, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let count = usize::from(first & 0x7f);
        let len = input[2..2 + count]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, 2 + count)
    };
    (tag, &input[header..header + len], &input[header + len..])
}

/// A JWKS endpoint on loopback serving whatever keys the test sets.
pub struct JwksServer {
    server: MockServer,
    doc: Arc<Mutex<Value>>,
}

impl std::fmt::Debug for JwksServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JwksServer({})", self.server.url())
    }
}

impl JwksServer {
    pub fn start(keys: &[&TestKey]) -> JwksServer {
        let doc = Arc::new(Mutex::new(jwks(keys)));
        let served = doc.clone();
        let server = MockServer::start(move |_| {
            let doc = served.lock().unwrap_or_else(|e| e.into_inner()).clone();
            MockResponse::json(200, &doc)
        });
        JwksServer { server, doc }
    }

    /// Publishes `keys` instead (a rotation).
    pub fn set(&self, keys: &[&TestKey]) {
        *self.doc.lock().unwrap_or_else(|e| e.into_inner()) = jwks(keys);
    }

    /// The JWKS URL.
    pub fn url(&self) -> String {
        format!("{}/.well-known/jwks.json", self.server.url())
    }

    /// How many times the keys were fetched.
    pub fn fetches(&self) -> usize {
        self.server.requests().len()
    }
}
