//! The credential policies (`bearer`, `sharedSecret`, `hmacSignature`):
//! the request proves itself with a secret, compared in constant time.

use subtle::{Choice, ConditionallySelectable};

use crate::sign::TagError;
use crate::{AuthContext, BearerToken, PrincipalType, Refusal, RequestParts, Secret};

/// The one copy of a credential header, or why there is none.
pub(crate) fn credential_header<'a>(
    req: &RequestParts<'a>,
    header: &str,
) -> Result<&'a [u8], Refusal> {
    let mut values = req.header_values(header);
    let Some(value) = values.next() else {
        return Err(Refusal::HeaderMissing {
            header: header.to_ascii_lowercase(),
        });
    };
    if values.next().is_some() {
        return Err(Refusal::HeaderRepeated {
            header: header.to_ascii_lowercase(),
        });
    }
    Ok(value)
}

/// `Authorization: Bearer <token>`. The scheme is case-insensitive
/// (RFC 9110 §11.1); the token is compared with every configured token,
/// without stopping at the first match, so timing reveals neither whether
/// nor which token matched.
pub(crate) fn admit_bearer(
    authenticator: &'static str,
    tokens: &[BearerToken],
    req: &RequestParts<'_>,
) -> Result<AuthContext, Refusal> {
    if tokens.iter().all(|t| t.token.is_empty()) {
        return Err(Refusal::EmptySecret);
    }
    let value = credential_header(req, "authorization")?;
    let presented = bearer_token(value).ok_or(Refusal::NotBearer)?;

    let mut found = Choice::from(0);
    let mut index = 0u64;
    for (i, token) in tokens.iter().enumerate() {
        // `matches` is false for an empty token, so it never admits.
        let hit = token.token.matches(presented) & !found;
        index.conditional_assign(&(i as u64), hit);
        found |= hit;
    }
    if !bool::from(found) {
        return Err(Refusal::Mismatch);
    }
    let principal = usize::try_from(index)
        .ok()
        .and_then(|i| tokens.get(i))
        .map(|t| t.principal.as_str())
        .ok_or(Refusal::Mismatch)?;
    Ok(AuthContext::new(
        authenticator,
        principal,
        PrincipalType::User,
    ))
}

/// The token of a `Bearer` authorization value, if it is one.
pub(crate) fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let value = value.trim_ascii();
    let space = value.iter().position(|b| *b == b' ')?;
    let (scheme, rest) = value.split_at(space);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// A header that must equal the secret.
pub(crate) fn admit_shared_secret(
    authenticator: &'static str,
    header: &str,
    secret: &Secret,
    req: &RequestParts<'_>,
) -> Result<AuthContext, Refusal> {
    if secret.is_empty() || header.is_empty() {
        return Err(Refusal::EmptySecret);
    }
    let value = credential_header(req, header)?;
    if !bool::from(secret.matches(value)) {
        return Err(Refusal::Mismatch);
    }
    Ok(signed_context(
        authenticator,
        header,
        PrincipalType::Service,
    ))
}

/// A header holding the hex HMAC-SHA256 of the raw body, optionally after a
/// prefix such as `sha256=`. The tag is checked with `Mac::verify_slice`
/// (constant time) over the bytes as received, before anything parses them.
pub(crate) fn admit_hmac_signature(
    authenticator: &'static str,
    header: &str,
    secret: &Secret,
    prefix: Option<&str>,
    req: &RequestParts<'_>,
) -> Result<AuthContext, Refusal> {
    if secret.is_empty() || header.is_empty() {
        return Err(Refusal::EmptySecret);
    }
    let value = credential_header(req, header)?.trim_ascii();
    let hex_tag = match prefix {
        Some(prefix) => value
            .strip_prefix(prefix.as_bytes())
            .ok_or(Refusal::WrongPrefix)?,
        None => value,
    };
    crate::sign::verify_body_tag(secret.expose().as_bytes(), req.body, hex_tag).map_err(
        |e| match e {
            TagError::EmptySecret => Refusal::EmptySecret,
            TagError::NotHex => Refusal::MalformedSignature,
            TagError::Mismatch => Refusal::Mismatch,
        },
    )?;
    Ok(signed_context(authenticator, header, PrincipalType::App))
}

/// Slack's request signing: `X-Slack-Request-Timestamp` within five
/// minutes of now, and `X-Slack-Signature` = `v0=` + HMAC-SHA256 of
/// `v0:{timestamp}:{raw body}`, compared in constant time.
pub(crate) fn admit_slack_signature(
    authenticator: &'static str,
    secret: &Secret,
    req: &RequestParts<'_>,
) -> Result<AuthContext, Refusal> {
    use crate::sign::SlackError;
    if secret.is_empty() {
        return Err(Refusal::EmptySecret);
    }
    let timestamp = credential_header(req, "x-slack-request-timestamp")?;
    let signature = credential_header(req, "x-slack-signature")?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    crate::sign::verify_slack_tag(
        secret.expose().as_bytes(),
        timestamp,
        req.body,
        signature,
        now,
    )
    .map_err(|e| match e {
        SlackError::EmptySecret => Refusal::EmptySecret,
        SlackError::Stale => Refusal::Stale,
        SlackError::WrongVersion => Refusal::WrongPrefix,
        SlackError::NotHex => Refusal::MalformedSignature,
        SlackError::Mismatch => Refusal::Mismatch,
    })?;
    Ok(signed_context(
        authenticator,
        "x-slack-signature",
        PrincipalType::App,
    ))
}

/// The principal of a secret-holding caller: the secret identifies the
/// sender, so the policy and header name it (`hmacSignature:x-hub-signature-256`).
fn signed_context(
    authenticator: &'static str,
    header: &str,
    principal_type: PrincipalType,
) -> AuthContext {
    let header = header.to_ascii_lowercase();
    AuthContext::new(
        authenticator,
        format!("{authenticator}:{header}"),
        principal_type,
    )
    .with_attribute("header", header)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn tokens(pairs: &[(&str, &str)]) -> Vec<BearerToken> {
        pairs
            .iter()
            .map(|(t, p)| BearerToken::new(*t, *p))
            .collect()
    }

    fn sign(secret: &str, body: &[u8]) -> String {
        crate::sign_body(secret, body)
    }

    #[test]
    fn bearer_scheme_parsing() {
        assert_eq!(bearer_token(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"bearer   abc "), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"BEARER abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"Bearer"), None);
        assert_eq!(bearer_token(b"Bearer "), None);
        assert_eq!(bearer_token(b"Basic abc"), None);
        assert_eq!(bearer_token(b"Bearerabc"), None);
    }

    #[test]
    fn bearer_picks_the_matching_principal() {
        let toks = tokens(&[("t-alice", "alice"), ("t-bob", "bob")]);
        let req = RequestParts::new(None).with_header("Authorization", "Bearer t-bob");
        let ctx = admit_bearer("bearer", &toks, &req).unwrap();
        assert_eq!(ctx.principal_id, "bob");
        assert_eq!(ctx.principal_type, PrincipalType::User);
    }

    #[test]
    fn bearer_duplicate_token_gives_the_first_principal() {
        let toks = tokens(&[("same", "first"), ("same", "second")]);
        let req = RequestParts::new(None).with_header("authorization", "Bearer same");
        assert_eq!(
            admit_bearer("bearer", &toks, &req).unwrap().principal_id,
            "first"
        );
    }

    #[test]
    fn bearer_refusals() {
        let toks = tokens(&[("t", "p")]);
        let check = |req: RequestParts<'_>| admit_bearer("bearer", &toks, &req).unwrap_err();
        assert_eq!(
            check(RequestParts::new(None)),
            Refusal::HeaderMissing {
                header: "authorization".into()
            }
        );
        assert_eq!(
            check(RequestParts::new(None).with_header("authorization", "Basic dDpw")),
            Refusal::NotBearer
        );
        assert_eq!(
            check(RequestParts::new(None).with_header("authorization", "Bearer x")),
            Refusal::Mismatch
        );
        assert_eq!(
            check(
                RequestParts::new(None)
                    .with_header("authorization", "Bearer t")
                    .with_header("authorization", "Bearer t")
            ),
            Refusal::HeaderRepeated {
                header: "authorization".into()
            }
        );
    }

    #[test]
    fn bearer_empty_tokens_never_admit() {
        let req = RequestParts::new(None).with_header("authorization", "Bearer ");
        assert_eq!(
            admit_bearer("bearer", &tokens(&[("", "p")]), &req).unwrap_err(),
            Refusal::EmptySecret
        );
        // A mix: the empty token is skipped, the real one still works.
        let toks = tokens(&[("", "empty"), ("real", "real")]);
        let req = RequestParts::new(None).with_header("authorization", "Bearer real");
        assert_eq!(
            admit_bearer("bearer", &toks, &req).unwrap().principal_id,
            "real"
        );
        assert_eq!(
            admit_bearer("bearer", &[], &req).unwrap_err(),
            Refusal::EmptySecret
        );
    }

    #[test]
    fn shared_secret() {
        let secret = Secret::new("s3cret");
        let ok = RequestParts::new(None).with_header("X-Api-Key", "s3cret");
        let ctx = admit_shared_secret("sharedSecret", "x-api-key", &secret, &ok).unwrap();
        assert_eq!(ctx.principal_id, "sharedSecret:x-api-key");
        assert_eq!(ctx.principal_type, PrincipalType::Service);
        assert_eq!(
            ctx.attributes.get("header").map(String::as_str),
            Some("x-api-key")
        );

        let wrong = RequestParts::new(None).with_header("x-api-key", "s3cret ");
        assert_eq!(
            admit_shared_secret("sharedSecret", "x-api-key", &secret, &wrong).unwrap_err(),
            Refusal::Mismatch
        );
        let empty = Secret::new("");
        let blank = RequestParts::new(None).with_header("x-api-key", "");
        assert_eq!(
            admit_shared_secret("sharedSecret", "x-api-key", &empty, &blank).unwrap_err(),
            Refusal::EmptySecret
        );
    }

    #[test]
    fn hmac_signature() {
        let secret = Secret::new("key");
        let body = br#"{"a":1}"#;
        let sig = format!("sha256={}", sign("key", body));
        let req = RequestParts::new(None)
            .with_header("x-hub-signature-256", &sig)
            .with_body(body);
        let ctx = admit_hmac_signature(
            "hmacSignature",
            "X-Hub-Signature-256",
            &secret,
            Some("sha256="),
            &req,
        )
        .unwrap();
        assert_eq!(ctx.principal_id, "hmacSignature:x-hub-signature-256");
        assert_eq!(ctx.principal_type, PrincipalType::App);

        // Without a configured prefix the prefixed value is not hex.
        assert_eq!(
            admit_hmac_signature("hmacSignature", "x-hub-signature-256", &secret, None, &req)
                .unwrap_err(),
            Refusal::MalformedSignature
        );
        assert_eq!(
            admit_hmac_signature(
                "hmacSignature",
                "x-hub-signature-256",
                &secret,
                Some("sha1="),
                &req
            )
            .unwrap_err(),
            Refusal::WrongPrefix
        );
        let tampered = req.clone().with_body(br#"{"a":2}"#);
        assert_eq!(
            admit_hmac_signature(
                "hmacSignature",
                "x-hub-signature-256",
                &secret,
                Some("sha256="),
                &tampered
            )
            .unwrap_err(),
            Refusal::Mismatch
        );
    }

    #[test]
    fn hmac_uppercase_hex_is_accepted_and_short_tags_are_refused() {
        let secret = Secret::new("key");
        let upper = sign("key", b"body").to_ascii_uppercase();
        let req = RequestParts::new(None)
            .with_header("sig", &upper)
            .with_body(b"body");
        assert!(admit_hmac_signature("hmacSignature", "sig", &secret, None, &req).is_ok());

        let short = &sign("key", b"body")[..32];
        let req = RequestParts::new(None)
            .with_header("sig", short)
            .with_body(b"body");
        assert_eq!(
            admit_hmac_signature("hmacSignature", "sig", &secret, None, &req).unwrap_err(),
            Refusal::Mismatch
        );
    }

    #[test]
    fn hmac_empty_secret_never_admits_even_with_a_valid_empty_key_signature() {
        let sig = sign("", b"body");
        let req = RequestParts::new(None)
            .with_header("sig", &sig)
            .with_body(b"body");
        assert_eq!(
            admit_hmac_signature("hmacSignature", "sig", &Secret::new(""), None, &req).unwrap_err(),
            Refusal::EmptySecret
        );
    }
}
