//! `berth-controller snapshot save|restore`: backups of the embedded store.
//!
//! redb lets one process open the store file, so `save` cannot read it beside a running
//! controller. It tries the file first: when the file's lock is free no controller serves on
//! the data directory, and one read transaction gives every object at one revision. When a
//! controller holds it, `save` asks that controller (`GET /v1-berth/snapshot`, at the address
//! in `DATA/listen-address`, with the admin certificate in `DATA/pki`): it answers from its
//! published state at one revision, which holds every write it acknowledged. Either way the
//! file is written atomically and private (see `store::snapshot`).
//!
//! `restore` creates `DATA/store.redb` from a snapshot in a data directory without a store.
//! The PKI (`DATA/pki`) and join token (`DATA/token`) are not in a snapshot: a backup copies
//! them beside it, and a restore puts them back, or the cluster gets a new CA.
//!
//! On etcd (`--datastore-endpoint`), `save` reads every object under the prefix at one
//! revision straight from etcd, and `restore` puts them back under an empty prefix (uids kept,
//! revisions etcd's). The file format is the same, so a snapshot of one store restores into the
//! other: the way from a single embedded controller to several on etcd.

use berth_shared::client::{Client, ClientError, Credentials};
use berth_store::snapshot::{self, Snapshot, SnapshotError};
use berth_store::{EtcdConfig, FileRead, Revision, StoreError};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{0} does not exist: there is no store to save")]
    NoStore(PathBuf),
    #[error(
        "{0} exists: a snapshot is restored only into a data directory without a store (use a new one)"
    )]
    StoreExists(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error("reading the store file: {0}")]
    Store(#[from] StoreError),
    #[error("a controller holds the store; asking it at {url} failed: {source}")]
    Controller { url: String, source: ClientError },
    #[error("a controller holds the store; it refused the snapshot ({status}): {message}")]
    Refused { status: u16, message: String },
}

impl BackupError {
    pub fn is_transient(&self) -> bool {
        matches!(self, BackupError::Controller { .. })
    }
}

/// Where a saved snapshot came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The store file (no controller was running).
    File,
    /// The running controller's API.
    Controller,
    /// etcd, read directly.
    Etcd,
}

/// What `save` wrote.
#[derive(Debug)]
pub struct Saved {
    pub revision: Revision,
    pub objects: usize,
    pub source: Source,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BackupError + '_ {
    move |source| BackupError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The store file of a data directory.
pub fn store_file(data_dir: &Path) -> PathBuf {
    data_dir.join("store.redb")
}

/// Writes a snapshot of the store of `data_dir` to `file`.
pub async fn save(data_dir: &Path, file: &Path) -> Result<Saved, BackupError> {
    let store = store_file(data_dir);
    if !store.exists() {
        return Err(BackupError::NoStore(store));
    }
    let read = {
        let store = store.clone();
        tokio::task::spawn_blocking(move || berth_store::read_objects(&store))
            .await
            .map_err(|e| StoreError::Backend(e.to_string()))??
    };
    let (snapshot, source) = match read {
        FileRead::Objects(revision, objects) => {
            (snapshot::write(file, revision, objects)?, Source::File)
        }
        FileRead::InUse => {
            let bytes = from_controller(data_dir).await?;
            (snapshot::write_bytes(file, &bytes)?, Source::Controller)
        }
    };
    Ok(Saved {
        revision: snapshot.revision,
        objects: snapshot.objects.len(),
        source,
    })
}

/// Asks the controller serving on `data_dir` for a snapshot, as its admin.
async fn from_controller(data_dir: &Path) -> Result<Vec<u8>, BackupError> {
    let read = |name: &str| {
        let path = data_dir.join(name);
        std::fs::read_to_string(&path).map_err(io(&path))
    };
    let url = read("listen-address")?.trim().to_string();
    let creds = Credentials::Certificate {
        cert_pem: read("pki/admin.crt")?,
        key_pem: read("pki/admin.key")?,
    };
    let failed = |source| BackupError::Controller {
        url: url.clone(),
        source,
    };
    let client = Client::new(&url, &read("pki/ca.crt")?, creds).map_err(failed)?;
    let (status, bytes) = client
        .get_raw(berth_apiserver::api::snapshot::PATH)
        .await
        .map_err(failed)?;
    if status != 200 {
        return Err(BackupError::Refused {
            status,
            message: String::from_utf8_lossy(&bytes).into_owned(),
        });
    }
    Ok(bytes)
}

/// Writes a snapshot of the etcd store `etcd` to `file`.
pub fn save_etcd(etcd: &EtcdConfig, file: &Path) -> Result<Saved, BackupError> {
    let (revision, objects) = berth_store::etcd::dump(etcd)?;
    let snapshot = snapshot::write(file, revision, objects)?;
    Ok(Saved {
        revision: snapshot.revision,
        objects: snapshot.objects.len(),
        source: Source::Etcd,
    })
}

/// Puts the objects of the snapshot in `file` into the etcd store `etcd` (whose prefix must be
/// empty); returns the snapshot and etcd's revision after it.
pub fn restore_etcd(etcd: &EtcdConfig, file: &Path) -> Result<(Snapshot, Revision), BackupError> {
    let snapshot = snapshot::read(file)?;
    let revision = berth_store::etcd::restore(etcd, &snapshot.objects)?;
    Ok((snapshot, revision))
}

/// Creates the store of `data_dir` (made if missing, 0700) from the snapshot in `file`.
pub fn restore(data_dir: &Path, file: &Path) -> Result<Snapshot, BackupError> {
    let store = store_file(data_dir);
    if store.exists() {
        return Err(BackupError::StoreExists(store));
    }
    let snapshot = snapshot::read(file)?;
    berth_shared::private_files::ensure_dir(data_dir).map_err(io(data_dir))?;
    berth_store::create_restored(&store, snapshot.revision, &snapshot.objects)?;
    Ok(snapshot)
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_store::{Precondition, RedbBackend, Store};
    use serde_json::json;

    fn store_with(dir: &Path, names: &[&str]) -> Store {
        let store =
            Store::open(Box::new(RedbBackend::open(&store_file(dir)).unwrap()), 100).unwrap();
        for n in names {
            store
                .put(
                    &format!("/registry/configmaps/default/{n}"),
                    json!({"metadata": {"name": n, "uid": format!("uid-{n}")}}),
                    Precondition::Absent,
                )
                .unwrap();
        }
        store
    }

    #[tokio::test]
    async fn a_stopped_store_is_saved_from_its_file_and_restored_with_uids_and_revision() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        drop(store_with(a.path(), &["one", "two", "three"]));
        let file = a.path().join("backup.snap");
        let saved = save(a.path(), &file).await.unwrap();
        assert_eq!(
            (saved.revision, saved.objects, saved.source),
            (3, 3, Source::File)
        );

        let restored_dir = b.path().join("data");
        restore(&restored_dir, &file).unwrap();
        let store = store_with(&restored_dir, &[]);
        let two = store.get("/registry/configmaps/default/two").unwrap();
        assert_eq!(two.value().unwrap()["metadata"]["uid"], "uid-two");
        assert_eq!(two.revision, 2);
        assert_eq!(store.current_revision(), 3);
        // The revision goes on from the snapshot's; watches from before it are gone.
        let four = store
            .put(
                "/registry/configmaps/default/four",
                json!({"metadata": {"name": "four"}}),
                Precondition::Absent,
            )
            .unwrap();
        assert_eq!(four.revision, 4);
        assert!(store.watch(1).is_err());
    }

    #[tokio::test]
    async fn a_store_in_use_is_not_read_from_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let _open = store_with(dir.path(), &["one"]);
        // The open store holds the file: save turns to the controller, whose address is not
        // there (no controller serves in this test).
        let err = save(dir.path(), &dir.path().join("x.snap"))
            .await
            .unwrap_err();
        assert!(matches!(err, BackupError::Io { .. }), "{err}");
    }

    #[test]
    fn a_restore_never_replaces_a_store() {
        let dir = tempfile::tempdir().unwrap();
        drop(store_with(dir.path(), &["one"]));
        let file = dir.path().join("backup.snap");
        snapshot::write(&file, 1, Vec::<(String, Vec<u8>)>::new()).unwrap();
        let err = restore(dir.path(), &file).unwrap_err();
        assert!(matches!(err, BackupError::StoreExists(_)), "{err}");
    }

    #[tokio::test]
    async fn saving_without_a_store_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let err = save(dir.path(), &dir.path().join("x.snap"))
            .await
            .unwrap_err();
        assert!(matches!(err, BackupError::NoStore(_)), "{err}");
    }
}
