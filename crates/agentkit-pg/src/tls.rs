//! TLS to the database with rustls (no OpenSSL): the URL's `sslmode`
//! (`disable`, `prefer`, `require`, `verify-ca`, `verify-full`) and
//! `sslrootcert` (a PEM file of CA certificates) decide how connections
//! are encrypted and what is verified, as libpq's do. `tokio-postgres`
//! knows only `disable`, `prefer` and `require` and no `sslrootcert`, so
//! those are read here and taken out of the URL before it parses it.

use std::path::PathBuf;
use std::sync::Arc;

use percent_encoding::percent_decode_str;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Error, Result};

/// What the URL asked of TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TlsMode {
    /// No `sslmode` or `sslmode=disable`: plain connections (as before
    /// TLS was supported; libpq's default would be `prefer`).
    Disable,
    /// Encrypted if the server offers it, else plain; nothing verified.
    Prefer,
    /// Encrypted; the server's certificate is not verified (libpq's
    /// `require` without a root certificate).
    Require,
    /// Encrypted; the certificate chains to a CA of `sslrootcert`.
    VerifyCa(PathBuf),
    /// Encrypted; the certificate chains to a CA of `sslrootcert` and
    /// names the host connected to.
    VerifyFull(PathBuf),
}

impl TlsMode {
    /// The mode `tokio-postgres` is told.
    pub(crate) fn ssl_mode(&self) -> SslMode {
        match self {
            TlsMode::Disable => SslMode::Disable,
            TlsMode::Prefer => SslMode::Prefer,
            TlsMode::Require | TlsMode::VerifyCa(_) | TlsMode::VerifyFull(_) => SslMode::Require,
        }
    }

    /// `sslmode` as the URL spelled it.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            TlsMode::Disable => "disable",
            TlsMode::Prefer => "prefer",
            TlsMode::Require => "require",
            TlsMode::VerifyCa(_) => "verify-ca",
            TlsMode::VerifyFull(_) => "verify-full",
        }
    }
}

/// Takes `sslmode` and `sslrootcert` out of `url` (a `postgres://` URL
/// or a `key=value` string): the URL `tokio-postgres` is to parse, and
/// the mode.
pub(crate) fn split_url(url: &str) -> Result<(String, TlsMode)> {
    let mut mode: Option<String> = None;
    let mut root: Option<String> = None;
    for key in ["sslcert", "sslkey", "sslpassword"] {
        let asked = url
            .split(['?', '&', ' '])
            .any(|pair| pair.split_once('=').is_some_and(|(k, _)| k.trim() == key));
        if asked {
            return Err(Error::Url {
                message: format!(
                    "{key}: client certificates are not supported; authenticate with a password"
                ),
            });
        }
    }
    let keep =
        |key: &str, value: &str, mode: &mut Option<String>, root: &mut Option<String>| match key {
            "sslmode" => {
                *mode = Some(value.to_owned());
                false
            }
            "sslrootcert" => {
                *root = Some(value.to_owned());
                false
            }
            _ => true,
        };
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        match url.split_once('?') {
            None => url.to_owned(),
            Some((base, query)) => {
                let kept: Vec<&str> = query
                    .split('&')
                    .filter(|pair| {
                        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                        keep(
                            key,
                            &percent_decode_str(value).decode_utf8_lossy(),
                            &mut mode,
                            &mut root,
                        )
                    })
                    .collect();
                if kept.is_empty() {
                    base.to_owned()
                } else {
                    format!("{base}?{}", kept.join("&"))
                }
            }
        }
    } else {
        url.split_whitespace()
            .filter(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                keep(
                    key.trim(),
                    value.trim().trim_matches('\''),
                    &mut mode,
                    &mut root,
                )
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let root_file = || -> Result<PathBuf> {
        if let Some(root) = &root {
            return Ok(PathBuf::from(root));
        }
        // libpq's default place for it.
        let default = std::env::var_os("HOME")
            .map(|home| PathBuf::from(home).join(".postgresql/root.crt"))
            .filter(|p| p.is_file());
        default.ok_or_else(|| Error::Url {
            message: format!(
                "sslmode={} needs the CA certificates to verify the server with: add sslrootcert=<PEM file> to the URL",
                mode.as_deref().unwrap_or_default()
            ),
        })
    };
    let mode = match mode.as_deref() {
        None | Some("disable") => TlsMode::Disable,
        Some("allow" | "prefer") => TlsMode::Prefer,
        Some("require") => TlsMode::Require,
        Some("verify-ca") => TlsMode::VerifyCa(root_file()?),
        Some("verify-full") => TlsMode::VerifyFull(root_file()?),
        Some(other) => {
            return Err(Error::Url {
                message: format!(
                    "sslmode={other}: expected disable, prefer, require, verify-ca or verify-full"
                ),
            });
        }
    };
    Ok((rest, mode))
}

/// The connector for `mode`: rustls with the aws-lc-rs provider (what
/// reqwest already builds).
pub(crate) fn connector(mode: &TlsMode) -> Result<MakeRustlsConnect> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(mode, e.to_string()))?;
    let config = match mode {
        TlsMode::Disable | TlsMode::Prefer | TlsMode::Require => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unverified { provider }))
            .with_no_client_auth(),
        TlsMode::VerifyCa(file) | TlsMode::VerifyFull(file) => {
            let mut roots = RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(file)
                .and_then(|certs| certs.collect::<std::result::Result<Vec<_>, _>>())
                .map_err(|e| {
                    tls_error(
                        mode,
                        format!("cannot read sslrootcert {}: {e}", file.display()),
                    )
                })?;
            if certs.is_empty() {
                return Err(tls_error(
                    mode,
                    format!("sslrootcert {} holds no certificate", file.display()),
                ));
            }
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| tls_error(mode, format!("sslrootcert {}: {e}", file.display())))?;
            }
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| tls_error(mode, e.to_string()))?;
            let verifier: Arc<dyn ServerCertVerifier> = match mode {
                TlsMode::VerifyCa(_) => Arc::new(ChainOnly { webpki }),
                _ => webpki,
            };
            builder
                .dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_no_client_auth()
        }
    };
    Ok(MakeRustlsConnect::new(config))
}

fn tls_error(mode: &TlsMode, message: String) -> Error {
    Error::Url {
        message: format!("sslmode={}: {message}", mode.name()),
    }
}

/// `require`: encrypted, the certificate taken as it is (the handshake's
/// signatures are still checked, so the peer holds the key it presents).
#[derive(Debug)]
struct Unverified {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// `verify-ca`: the chain is verified, the name in the certificate is not.
#[derive(Debug)]
struct ChainOnly {
    webpki: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_the_url() {
        let (rest, mode) =
            split_url("postgres://u@h:5432/db?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&application_name=x")
                .unwrap();
        assert_eq!(rest, "postgres://u@h:5432/db?application_name=x");
        assert_eq!(mode, TlsMode::VerifyFull(PathBuf::from("/tmp/ca.pem")));
        let (rest, mode) = split_url("postgres://u@h/db?sslmode=require").unwrap();
        assert_eq!(rest, "postgres://u@h/db");
        assert_eq!(mode, TlsMode::Require);
        let (rest, mode) =
            split_url("host=h user=u sslmode=verify-ca sslrootcert=/ca.pem").unwrap();
        assert_eq!(rest, "host=h user=u");
        assert_eq!(mode, TlsMode::VerifyCa(PathBuf::from("/ca.pem")));
        assert_eq!(split_url("postgres://h/db").unwrap().1, TlsMode::Disable);
        let e = split_url("postgres://h/db?sslmode=sometimes").unwrap_err();
        assert!(e.to_string().contains("sslmode=sometimes"), "{e}");
        let e = split_url("postgres://h/db?sslmode=require&sslcert=/c.pem").unwrap_err();
        assert!(e.to_string().contains("not supported"), "{e}");
    }
}
