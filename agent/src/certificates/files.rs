//! The renewed certificates on disk, as the kubelet keeps them: key and certificate in one PEM
//! file per kind under the agent's `pki/` (`kubelet-client-current.pem`,
//! `kubelet-server-current.pem`), written whole or not at all (a temporary file, fsync'd,
//! renamed, mode 0600), so a crash never leaves a key beside another key's certificate. The
//! client pair is mirrored to `node.key`/`node.crt`, which the join wrote and tools read.

use super::Kind;
use super::identity::Identity;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct FileError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// The combined file of `kind` in `pki_dir`.
pub fn current_path(pki_dir: &Path, kind: Kind) -> PathBuf {
    pki_dir.join(match kind {
        Kind::Client => "kubelet-client-current.pem",
        Kind::Serving => "kubelet-server-current.pem",
    })
}

/// The pair of `kind` kept in `pki_dir`, if there is a usable one (a damaged or mismatched
/// file is logged and ignored: the agent then asks anew).
pub fn load(pki_dir: &Path, kind: Kind) -> Option<Identity> {
    let path = current_path(pki_dir, kind);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the certificate");
            return None;
        }
    };
    // Written key first, then the certificate (and any chain).
    let at = text
        .find("-----BEGIN CERTIFICATE-----")
        .unwrap_or(text.len());
    let (key, cert) = text.split_at(at);
    match Identity::parse(cert, key) {
        Ok(id) => Some(id),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "ignoring an unusable certificate file");
            None
        }
    }
}

/// Keeps `id` as the current pair of `kind` (and, for the client, in `node.key`/`node.crt`).
pub fn store(pki_dir: &Path, kind: Kind, id: &Identity) -> Result<(), FileError> {
    berth_api::private_files::ensure_dir(pki_dir).map_err(|source| FileError {
        path: pki_dir.to_path_buf(),
        source,
    })?;
    let write = |path: PathBuf, text: &str| {
        berth_api::private_files::write_atomic(&path, text.as_bytes())
            .map_err(|(path, source)| FileError { path, source })
    };
    let key = id.key_pem.trim_end();
    let combined = format!("{key}\n{}", id.cert_pem);
    write(current_path(pki_dir, kind), &combined)?;
    if kind == Kind::Client {
        write(pki_dir.join("node.key"), &id.key_pem)?;
        write(pki_dir.join("node.crt"), &id.cert_pem)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certificates::identity::tests::self_signed;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_stored_pair_loads_back_and_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let pki = dir.path().join("pki");
        assert!(load(&pki, Kind::Client).is_none());
        let (cert, key) = self_signed("system:node:n1", &[], 120);
        let id = Identity::parse(&cert, &key).unwrap();
        store(&pki, Kind::Client, &id).unwrap();
        let back = load(&pki, Kind::Client).unwrap();
        assert_eq!(back.serial, id.serial);
        assert_eq!((back.cert_pem, back.key_pem), (cert.clone(), key.clone()));
        assert!(load(&pki, Kind::Serving).is_none());
        for name in ["kubelet-client-current.pem", "node.crt", "node.key"] {
            let mode = std::fs::metadata(pki.join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{name}");
        }
        assert_eq!(std::fs::read_to_string(pki.join("node.crt")).unwrap(), cert);
        // A damaged file is no certificate.
        std::fs::write(current_path(&pki, Kind::Client), "garbage").unwrap();
        assert!(load(&pki, Kind::Client).is_none());
    }
}
