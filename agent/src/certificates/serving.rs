//! The agent server's certificate, swapped in place: TLS handshakes ask this resolver, which
//! hands out whatever pair was set last, so a renewed serving certificate is used from the
//! next handshake on while connections already open (streaming logs, exec, port-forward) go
//! on with the one they began with.

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::sync::{Arc, RwLock};

/// The serving certificate now in use.
#[derive(Debug)]
pub struct ServingCertificate {
    current: RwLock<Arc<CertifiedKey>>,
}

impl ServingCertificate {
    pub fn new(first: Arc<CertifiedKey>) -> ServingCertificate {
        ServingCertificate {
            current: RwLock::new(first),
        }
    }

    /// Serves `next` from the next handshake on.
    pub fn set(&self, next: Arc<CertifiedKey>) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = next;
    }

    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl ResolvesServerCert for ServingCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}
