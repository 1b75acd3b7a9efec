//! ServiceAccount tokens: JWTs signed with ES256 by a key kept under `<data-dir>/pki`, with
//! upstream's claims (issuer, audiences, expiry, subject `system:serviceaccount:<ns>:<name>`,
//! and the `kubernetes.io` claim naming the account and the pod or secret the token is bound
//! to). Issuing and checking the signature and the time and audience claims; whether the bound
//! objects still exist is [`super::authenticate`]'s part.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use berth_shared::private_files::FileError;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The issuer (and default audience) of tokens, as kubeadm and k3s name it.
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// Tolerated clock difference when checking `nbf` and `exp`, as upstream.
const LEEWAY_SECONDS: i64 = 60;

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(transparent)]
    Io(#[from] FileError),
    #[error("service account signing key: {0}")]
    Key(String),
    #[error("token is malformed")]
    Malformed,
    #[error("invalid signature")]
    Signature,
    #[error("token has expired")]
    Expired,
    #[error("token is not valid yet")]
    NotYetValid,
    #[error("token issuer {0:?} is not accepted")]
    Issuer(String),
    #[error("token audiences {0:?} is invalid for the target audiences")]
    Audience(Vec<String>),
}

/// A reference to an object a token is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundRef {
    pub name: String,
    pub uid: String,
}

/// The `kubernetes.io` claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaims {
    pub namespace: String,
    pub serviceaccount: BoundRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<BoundRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<BoundRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<BoundRef>,
}

/// A token's claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    pub sub: String,
    pub aud: Vec<String>,
    pub exp: i64,
    pub iat: i64,
    pub nbf: i64,
    pub jti: String,
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaims,
}

/// Signs and checks tokens.
pub struct TokenSigner {
    key: EcdsaKeyPair,
    public: Vec<u8>,
    kid: String,
    rng: SystemRandom,
    pub issuer: String,
    /// The audiences the API accepts (and gives tokens that name none).
    pub api_audiences: Vec<String>,
}

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSigner")
            .field("kid", &self.kid)
            .field("issuer", &self.issuer)
            .finish()
    }
}

const KEY_FILE: &str = "service-account.key";

impl TokenSigner {
    /// Loads the signing key from `<pki_dir>/service-account.key`, creating it (0600) at first
    /// start.
    pub fn load_or_create(pki_dir: &Path, issuer: &str) -> Result<TokenSigner, TokenError> {
        let path = pki_dir.join(KEY_FILE);
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = match std::fs::read_to_string(&path) {
            Ok(text) => pem_body(&text).ok_or_else(|| {
                TokenError::Key(format!("{} is not a PEM private key", path.display()))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let doc = EcdsaKeyPair::generate_pkcs8(alg, &rng)
                    .map_err(|_| TokenError::Key("cannot generate a P-256 key".into()))?;
                let pem = format!(
                    "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
                    base64::engine::general_purpose::STANDARD.encode(doc.as_ref())
                );
                crate::pki::write_private(&path, &pem)
                    .map_err(|e| TokenError::Key(e.to_string()))?;
                doc.as_ref().to_vec()
            }
            Err(source) => return Err(FileError { path, source }.into()),
        };
        let key = EcdsaKeyPair::from_pkcs8(alg, &pkcs8, &rng)
            .map_err(|e| TokenError::Key(format!("{}: {e}", path.display())))?;
        let public = key.public_key().as_ref().to_vec();
        let kid = {
            use sha2::Digest;
            B64.encode(sha2::Sha256::digest(&public))
        };
        Ok(TokenSigner {
            key,
            public,
            kid,
            rng,
            issuer: issuer.to_string(),
            api_audiences: vec![issuer.to_string()],
        })
    }

    /// Signs `claims` into a compact JWT.
    pub fn sign(&self, claims: &Claims) -> Result<String, TokenError> {
        let header = serde_json::json!({"alg": "ES256", "kid": self.kid});
        let payload = serde_json::to_vec(claims).map_err(|_| TokenError::Malformed)?;
        let signing_input = format!("{}.{}", B64.encode(header.to_string()), B64.encode(payload));
        let sig = self
            .key
            .sign(&self.rng, signing_input.as_bytes())
            .map_err(|_| TokenError::Key("signing failed".into()))?;
        Ok(format!("{signing_input}.{}", B64.encode(sig.as_ref())))
    }

    /// Whether `token` looks like one of ours (a JWT naming our key), without checking it.
    pub fn is_ours(&self, token: &str) -> bool {
        let Some(header) = token.split('.').next() else {
            return false;
        };
        B64.decode(header)
            .ok()
            .and_then(|h| serde_json::from_slice::<serde_json::Value>(&h).ok())
            .is_some_and(|h| h["kid"] == self.kid.as_str())
    }

    /// Checks the signature, issuer, audiences and validity period (`now` in Unix seconds).
    pub fn verify(&self, token: &str, now: i64) -> Result<Claims, TokenError> {
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(sig), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed);
        };
        let sig = B64.decode(sig).map_err(|_| TokenError::Malformed)?;
        let signing_input = &token[..header.len() + 1 + payload.len()];
        signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, &self.public)
            .verify(signing_input.as_bytes(), &sig)
            .map_err(|_| TokenError::Signature)?;
        let claims: Claims = B64
            .decode(payload)
            .ok()
            .and_then(|p| serde_json::from_slice(&p).ok())
            .ok_or(TokenError::Malformed)?;
        if claims.iss != self.issuer {
            return Err(TokenError::Issuer(claims.iss));
        }
        if !claims.aud.iter().any(|a| self.api_audiences.contains(a)) {
            return Err(TokenError::Audience(claims.aud));
        }
        if now > claims.exp + LEEWAY_SECONDS {
            return Err(TokenError::Expired);
        }
        if now + LEEWAY_SECONDS < claims.nbf {
            return Err(TokenError::NotYetValid);
        }
        Ok(claims)
    }
}

/// The DER inside a PEM block.
fn pem_body(text: &str) -> Option<Vec<u8>> {
    let body: String = text
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .map(str::trim)
        .collect();
    base64::engine::general_purpose::STANDARD.decode(body).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(now: i64, aud: &str) -> Claims {
        Claims {
            iss: DEFAULT_ISSUER.into(),
            sub: "system:serviceaccount:d:default".into(),
            aud: vec![aud.into()],
            exp: now + 3600,
            iat: now,
            nbf: now,
            jti: "j".into(),
            kubernetes: KubernetesClaims {
                namespace: "d".into(),
                serviceaccount: BoundRef {
                    name: "default".into(),
                    uid: "sa-uid".into(),
                },
                pod: None,
                secret: None,
                node: None,
            },
        }
    }

    /// When the tests' tokens are issued.
    const NOW: i64 = 1_700_000_000;

    /// A signer with its key in a fresh directory, and a token it signed at [`NOW`].
    fn signed() -> (tempfile::TempDir, TokenSigner, String) {
        let dir = tempfile::tempdir().unwrap();
        let signer = TokenSigner::load_or_create(dir.path(), DEFAULT_ISSUER).unwrap();
        let token = signer.sign(&claims(NOW, DEFAULT_ISSUER)).unwrap();
        (dir, signer, token)
    }

    #[test]
    fn a_signed_token_verifies_until_it_expires_and_survives_a_restart() {
        let (dir, signer, token) = signed();
        let now = NOW;
        assert!(signer.is_ours(&token));
        assert_eq!(
            signer.verify(&token, now).unwrap(),
            claims(now, DEFAULT_ISSUER)
        );
        assert!(matches!(
            signer.verify(&token, now + 3600 + 61),
            Err(TokenError::Expired)
        ));
        let again = TokenSigner::load_or_create(dir.path(), DEFAULT_ISSUER).unwrap();
        assert!(again.verify(&token, now).is_ok());
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(dir.path().join(KEY_FILE))
                .unwrap()
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn tampered_foreign_or_misaddressed_tokens_are_refused() {
        let (_dir, signer, token) = signed();
        let now = NOW;
        let mut forged = claims(now, DEFAULT_ISSUER);
        forged.sub = "system:serviceaccount:kube-system:admin".into();
        let forged_payload = B64.encode(serde_json::to_vec(&forged).unwrap());
        let parts: Vec<&str> = token.split('.').collect();
        let tampered = format!("{}.{forged_payload}.{}", parts[0], parts[2]);
        assert!(matches!(
            signer.verify(&tampered, now),
            Err(TokenError::Signature)
        ));
        let other_dir = tempfile::tempdir().unwrap();
        let other = TokenSigner::load_or_create(other_dir.path(), DEFAULT_ISSUER).unwrap();
        assert!(!other.is_ours(&token));
        assert!(matches!(
            other.verify(&token, now),
            Err(TokenError::Signature)
        ));
        let elsewhere = signer.sign(&claims(now, "https://vault.example")).unwrap();
        assert!(matches!(
            signer.verify(&elsewhere, now),
            Err(TokenError::Audience(_))
        ));
        assert!(matches!(
            signer.verify("a.b", now),
            Err(TokenError::Malformed)
        ));
    }
}
