//! The controller's own serving certificate, renewed in place: a rustls certificate resolver
//! ([`ServingCertificate`]) holds the current certificate behind a lock and every new TLS
//! handshake reads it, so swapping it changes what new connections get while open ones
//! (watches) keep theirs. [`run`] renews it at a jittered 70–90% of its life
//! ([`super::rotation`]), writing `server.key` then `server.crt` atomically (fsync'd), and
//! every 5 s picks up files that changed under it (`berth-controller certificate renew`).
//! Also the admin credentials' re-issue ([`renew_admin`]: by `certificate renew`, and by
//! [`run`] when past 70% of their life, rewriting the kubeconfig written at start) and the
//! serving certificate's metrics.

use super::rotation;
use super::signer;
use crate::pki::{self, PkiError};
use berth_shared::private_files::FileError;
use rcgen::{Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// `--certificate-validity`'s default: 8760h, a year.
pub const DEFAULT_VALIDITY: Duration = Duration::from_secs(8760 * 3600);
/// How often the files are compared with the certificate served.
const FILE_POLL: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ServingError {
    #[error("reading PEM: {0}")]
    Pem(String),
    #[error("TLS key: {0}")]
    Tls(#[from] rustls::Error),
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error(transparent)]
    Io(#[from] FileError),
}

impl ServingError {
    pub fn is_transient(&self) -> bool {
        matches!(self, ServingError::Io(_))
    }
}

struct Current {
    key: Arc<CertifiedKey>,
    pem: String,
    not_after: Option<jiff::Timestamp>,
}

/// The certificate new handshakes get.
pub struct ServingCertificate {
    current: RwLock<Current>,
    renewals: AtomicU64,
    failures: AtomicU64,
}

impl std::fmt::Debug for ServingCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServingCertificate")
    }
}

impl ResolvesServerCert for ServingCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        Some(current.key.clone())
    }
}

/// A certificate chain and its key as rustls signs with them; the key must match.
fn certified(cert_pem: &str, key_pem: &str) -> Result<CertifiedKey, ServingError> {
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| ServingError::Pem(e.to_string()))?;
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut key_pem.as_bytes())
        .map_err(|e| ServingError::Pem(e.to_string()))?
        .ok_or_else(|| ServingError::Pem("no private key".into()))?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key)?;
    let certified = CertifiedKey::new(certs, signing);
    certified.keys_match()?;
    Ok(certified)
}

impl ServingCertificate {
    pub fn new(cert_pem: &str, key_pem: &str) -> Result<Arc<ServingCertificate>, ServingError> {
        Ok(Arc::new(ServingCertificate {
            current: RwLock::new(Current {
                key: Arc::new(certified(cert_pem, key_pem)?),
                pem: cert_pem.to_string(),
                not_after: signer::not_after(cert_pem),
            }),
            renewals: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        }))
    }

    /// Serves `cert_pem` to new handshakes from now on.
    pub fn swap(&self, cert_pem: &str, key_pem: &str) -> Result<(), ServingError> {
        let key = Arc::new(certified(cert_pem, key_pem)?);
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        *current = Current {
            key,
            pem: cert_pem.to_string(),
            not_after: signer::not_after(cert_pem),
        };
        self.renewals.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The PEM served now.
    pub fn pem(&self) -> String {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        current.pem.clone()
    }

    /// The metrics: the serving certificate's expiry and its renewals.
    pub fn render(&self) -> String {
        let not_after = {
            let current = self.current.read().unwrap_or_else(|e| e.into_inner());
            current.not_after.map_or(0, |t| t.as_second())
        };
        let left = not_after - jiff::Timestamp::now().as_second();
        format!(
            "# HELP berth_apiserver_serving_certificate_expiration_timestamp_seconds When the API server's serving certificate expires (Unix seconds).\n\
             # TYPE berth_apiserver_serving_certificate_expiration_timestamp_seconds gauge\n\
             berth_apiserver_serving_certificate_expiration_timestamp_seconds {not_after}\n\
             # HELP berth_apiserver_serving_certificate_ttl_seconds Seconds until the API server's serving certificate expires (as the kubelet's certificate_manager_server_ttl_seconds).\n\
             # TYPE berth_apiserver_serving_certificate_ttl_seconds gauge\n\
             berth_apiserver_serving_certificate_ttl_seconds {left}\n\
             # HELP berth_apiserver_serving_certificate_renewals_total Times the serving certificate was swapped for a new one.\n\
             # TYPE berth_apiserver_serving_certificate_renewals_total counter\n\
             berth_apiserver_serving_certificate_renewals_total {}\n\
             # HELP berth_apiserver_serving_certificate_renewal_failures_total Renewals of the serving certificate that failed (retried).\n\
             # TYPE berth_apiserver_serving_certificate_renewal_failures_total counter\n\
             berth_apiserver_serving_certificate_renewal_failures_total {}\n",
            self.renewals.load(Ordering::Relaxed),
            self.failures.load(Ordering::Relaxed),
        )
    }
}

fn read(path: &Path) -> Result<String, ServingError> {
    Ok(std::fs::read_to_string(path).map_err(FileError::at(path))?)
}

/// The cluster CA of the PKI directory `dir`, as an issuer.
pub fn issuer(dir: &Path) -> Result<Issuer<'static, KeyPair>, ServingError> {
    let ca = read(&dir.join("ca.crt"))?;
    let key = KeyPair::from_pem(&read(&dir.join("ca.key"))?).map_err(PkiError::from)?;
    Ok(Issuer::from_ca_cert_pem(&ca, key).map_err(PkiError::from)?)
}

/// Issues a new serving certificate (same SANs, `server.sans`) into the PKI directory `dir`:
/// `server.key` then `server.crt`, each written atomically; returns (cert, key).
pub fn renew_serving_files(
    dir: &Path,
    validity: Duration,
) -> Result<(String, String), ServingError> {
    let sans: BTreeSet<String> = read(&dir.join("server.sans"))?
        .split(',')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    let (cert, key) = pki::issue_serving_cert(&issuer(dir)?, &sans, validity)?;
    pki::write_private(&dir.join("server.key"), &key)?;
    pki::write_private(&dir.join("server.crt"), &cert)?;
    Ok((cert, key))
}

/// Issues new admin credentials (`admin.crt`, `admin.key`) into `data_dir/pki` and rewrites
/// the kubeconfig at `kubeconfig` for `server` with them.
pub fn renew_admin(
    data_dir: &Path,
    kubeconfig: &Path,
    server: &str,
    validity: Duration,
) -> Result<String, ServingError> {
    let dir = data_dir.join("pki");
    let (cert, key) =
        pki::issue_client_cert(&issuer(&dir)?, "admin", &["system:masters"], validity)?;
    pki::write_private(&dir.join("admin.key"), &key)?;
    pki::write_private(&dir.join("admin.crt"), &cert)?;
    let ca = read(&dir.join("ca.crt"))?;
    pki::write_kubeconfig(kubeconfig, server, &ca, &cert, &key, "admin")?;
    Ok(cert)
}

/// Picks up a serving certificate written by someone else (`certificate renew`): `true` when
/// the files hold another certificate than the one served, with a matching key, now served.
fn pick_up(dir: &Path, serving: &ServingCertificate) -> bool {
    let Ok(cert) = read(&dir.join("server.crt")) else {
        return false;
    };
    if cert == serving.pem() {
        return false;
    }
    let Ok(key) = read(&dir.join("server.key")) else {
        return false;
    };
    serving.swap(&cert, &key).is_ok()
}

/// The admin kubeconfig this controller wrote at start, kept valid while it runs.
#[derive(Debug, Clone)]
pub struct AdminKubeconfig {
    pub data_dir: PathBuf,
    pub path: PathBuf,
    pub server: String,
}

/// Issues the admin credentials again when past 70% of their life (or unreadable).
fn refresh_admin(admin: &AdminKubeconfig, validity: Duration) {
    let cert = read(&admin.data_dir.join("pki").join("admin.crt")).unwrap_or_default();
    let due = signer::validity(&cert)
        .is_none_or(|(from, to)| rotation::past(from, to, jiff::Timestamp::now(), 0.7));
    if !due {
        return;
    }
    match renew_admin(&admin.data_dir, &admin.path, &admin.server, validity) {
        Ok(cert) => tracing::info!(
            serial = signer::serial(&cert).unwrap_or_default(),
            kubeconfig = %admin.path.display(),
            "admin certificate renewed"
        ),
        Err(e) => tracing::warn!(error = %e, "renewing the admin certificate failed"),
    }
}

/// Renews the serving certificate in `dir` (the PKI directory) until `shutdown`, and keeps
/// the admin kubeconfig's certificate from passing 70% of its life.
pub async fn run(
    dir: PathBuf,
    serving: Arc<ServingCertificate>,
    validity: Duration,
    admin: AdminKubeconfig,
    shutdown: CancellationToken,
) {
    let mut planned: Option<(String, jiff::Timestamp)> = None;
    let mut backoff = Duration::from_secs(1);
    loop {
        let pem = serving.pem();
        let at = match &planned {
            Some((p, at)) if *p == pem => *at,
            _ => {
                let now = jiff::Timestamp::now();
                let at = signer::validity(&pem).map_or(now, |(from, to)| {
                    rotation::deadline(from, to, rand::random())
                });
                tracing::info!(renew_at = %at, serial = signer::serial(&pem).unwrap_or_default(),
                    "serving certificate renewal planned");
                planned = Some((pem.clone(), at));
                at
            }
        };
        let wait = rotation::until(jiff::Timestamp::now(), at).min(FILE_POLL);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.cancelled() => return,
        }
        let (d, s, a) = (dir.clone(), serving.clone(), admin.clone());
        if tokio::task::spawn_blocking(move || {
            refresh_admin(&a, validity);
            pick_up(&d, &s)
        })
        .await
        .unwrap_or(false)
        {
            tracing::info!(
                serial = signer::serial(&serving.pem()).unwrap_or_default(),
                "serving certificate changed on disk: serving it"
            );
            continue;
        }
        if jiff::Timestamp::now() < at {
            continue;
        }
        let d = dir.clone();
        let renewed = tokio::task::spawn_blocking(move || renew_serving_files(&d, validity)).await;
        let swapped = match renewed {
            Ok(Ok((cert, key))) => serving.swap(&cert, &key).map(|()| cert),
            Ok(Err(e)) => Err(e),
            Err(e) => Err(ServingError::Pem(format!("renewal task failed: {e}"))),
        };
        match swapped {
            Ok(cert) => {
                backoff = Duration::from_secs(1);
                tracing::info!(serial = signer::serial(&cert).unwrap_or_default(),
                    not_after = ?signer::not_after(&cert), "serving certificate renewed");
            }
            Err(e) => {
                serving.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "renewing the serving certificate failed; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = shutdown.cancelled() => return,
                }
                backoff = (backoff * 2).min(Duration::from_secs(60));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renewal_rewrites_the_files_with_a_new_serial_and_the_resolver_serves_it() {
        let dir = tempfile::tempdir().unwrap();
        let pki =
            crate::pki::load_or_create_valid(dir.path(), &[], Duration::from_secs(120)).unwrap();
        let serving = ServingCertificate::new(&pki.server_cert, &pki.server_key).unwrap();
        let (from, to) = signer::validity(&pki.server_cert).unwrap();
        assert!(to.as_second() - from.as_second() <= 122);
        let (cert, _) = renew_serving_files(dir.path(), Duration::from_secs(120)).unwrap();
        assert_ne!(signer::serial(&cert), signer::serial(&pki.server_cert));
        assert!(pick_up(dir.path(), &serving));
        assert_eq!(serving.pem(), cert);
        assert!(!pick_up(dir.path(), &serving));
        assert!(
            serving
                .render()
                .contains("berth_apiserver_serving_certificate_renewals_total 1\n")
        );
        // A key that does not match is not served.
        let other = KeyPair::generate().unwrap().serialize_pem();
        assert!(serving.swap(&pki.server_cert, &other).is_err());
    }
}
