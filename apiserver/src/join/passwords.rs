//! Node passwords, as k3s keeps them: the first agent to join under a name registers a secret
//! of its own, and only that secret gets a certificate for the name afterwards. The controller
//! keeps a salted SHA-256 of it in `DATA/node-passwords/<name>` (directory 0700, files 0600,
//! outside the API's reach); `berth-controller node forget NAME` removes the record. The
//! secrets are 256 random bits made by the agent, so a fast hash is enough: there is nothing to
//! guess a dictionary for.
//!
//! Records are read on every join (nothing is cached), so a record removed while the controller
//! runs takes effect at once. A record is created with a hard link from a complete temporary
//! file: two agents racing for a new name cannot both win, and a crash never leaves half a
//! record.
//!
//! Controllers sharing a store (etcd) keep the records in it instead, under keys outside the
//! API's space (`/nodepasswords/<name>`), created by compare-and-swap: an agent that joined
//! through one controller is known to all of them.

use super::node_name::NodeName;
use super::records::{SaltedDigest, create_whole};
use berth_shared::private_files::FileError;
use berth_store::{Precondition, Store, StoreError};
use std::path::{Path, PathBuf};

/// The directory of the records under the data dir.
pub const DIR: &str = "node-passwords";

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error(transparent)]
    Io(#[from] FileError),
    #[error("{0}: not a node password record (want sha256:<salt>:<digest>)")]
    Corrupt(PathBuf),
    #[error("node password records: {0}")]
    Store(#[from] StoreError),
}

impl PasswordError {
    pub fn is_transient(&self) -> bool {
        matches!(self, PasswordError::Store(e) if e.is_transient())
    }
}

/// How a presented secret compares with a name's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// No agent has joined under the name yet (or it was forgotten).
    Unregistered,
    Matches,
    Mismatch,
}

/// The records of one data dir, or of a shared store.
#[derive(Clone)]
pub struct NodePasswords {
    dir: PathBuf,
    store: Option<Store>,
}

impl std::fmt::Debug for NodePasswords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodePasswords")
            .field("dir", &self.dir)
            .field("in_store", &self.store.is_some())
            .finish()
    }
}

fn store_key(name: &NodeName) -> String {
    format!("/nodepasswords/{}", name.as_str())
}

impl NodePasswords {
    /// The records under `data_dir` (the directory is made on first registration).
    pub fn new(data_dir: &Path) -> NodePasswords {
        NodePasswords {
            dir: data_dir.join(DIR),
            store: None,
        }
    }

    /// The records in `store`, shared by every controller on it. Blocking calls.
    pub fn in_store(data_dir: &Path, store: Store) -> NodePasswords {
        NodePasswords {
            dir: data_dir.join(DIR),
            store: Some(store),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, name: &NodeName) -> PathBuf {
        self.dir.join(name.as_str())
    }

    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PasswordError + '_ {
        move |source| FileError::at(path)(source).into()
    }

    /// Compares `secret` with the record of `name`.
    pub fn check(&self, name: &NodeName, secret: &str) -> Result<Check, PasswordError> {
        let path = self.path(name);
        if let Some(store) = &self.store {
            let Some(held) = store.latest(&store_key(name)) else {
                return Ok(Check::Unregistered);
            };
            let record = held.value()?;
            let digest = record["digest"]
                .as_str()
                .and_then(SaltedDigest::parse)
                .ok_or(PasswordError::Corrupt(path))?;
            return Ok(if digest.matches(secret) {
                Check::Matches
            } else {
                Check::Mismatch
            });
        }
        let record = match std::fs::read_to_string(&path) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Check::Unregistered),
            Err(e) => return Err(Self::io(&path)(e)),
        };
        let digest = SaltedDigest::parse(&record).ok_or(PasswordError::Corrupt(path))?;
        Ok(if digest.matches(secret) {
            Check::Matches
        } else {
            Check::Mismatch
        })
    }

    /// Records `secret` for `name` unless a record exists: `true` if this call registered it,
    /// `false` if another was there first.
    pub fn register(&self, name: &NodeName, secret: &str) -> Result<bool, PasswordError> {
        if let Some(store) = &self.store {
            let record = serde_json::json!({
                "metadata": {"name": name.as_str()},
                "digest": SaltedDigest::of(secret).to_string(),
            });
            return match store.put(&store_key(name), record, Precondition::Absent) {
                Ok(_) => Ok(true),
                Err(StoreError::AlreadyExists) => Ok(false),
                Err(e) => Err(e.into()),
            };
        }
        let record = format!("{}\n", SaltedDigest::of(secret));
        create_whole(&self.dir, name.as_str(), &record).map_err(Self::io(&self.path(name)))
    }

    /// Removes the record of `name`; `false` if there was none.
    pub fn forget(&self, name: &NodeName) -> Result<bool, PasswordError> {
        if let Some(store) = &self.store {
            return match store.delete(&store_key(name), Precondition::Exists, None) {
                Ok(_) => Ok(true),
                Err(StoreError::NotFound) => Ok(false),
                Err(e) => Err(e.into()),
            };
        }
        let path = self.path(name);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Self::io(&path)(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn name(s: &str) -> NodeName {
        NodeName::parse(s).unwrap()
    }

    /// `first` registers `s1` for `a`, then `second` tries `s2`: only `s1` matches, as
    /// `second` sees it.
    fn assert_first_registration_wins(first: &NodePasswords, second: &NodePasswords, a: &NodeName) {
        assert_eq!(second.check(a, "s1").unwrap(), Check::Unregistered);
        assert!(first.register(a, "s1").unwrap());
        assert!(
            !second.register(a, "s2").unwrap(),
            "the second registration loses"
        );
        assert_eq!(second.check(a, "s1").unwrap(), Check::Matches);
        assert_eq!(second.check(a, "s2").unwrap(), Check::Mismatch);
    }

    #[test]
    fn the_first_secret_registered_for_a_name_is_the_only_one_that_matches() {
        let dir = tempfile::tempdir().unwrap();
        let p = NodePasswords::new(dir.path());
        let a = name("node-a");
        assert_first_registration_wins(&p, &p, &a);
        assert_eq!(p.check(&name("node-b"), "s1").unwrap(), Check::Unregistered);
    }

    #[test]
    fn records_in_a_store_are_shared_through_it_and_the_first_registration_wins() {
        let dir = tempfile::tempdir().unwrap();
        let backend = berth_store::RedbBackend::open(&dir.path().join("store.redb")).unwrap();
        let store = Store::open(Box::new(backend), 100).unwrap();
        let one = NodePasswords::in_store(dir.path(), store.clone());
        let other = NodePasswords::in_store(dir.path(), store);
        let a = name("node-a");
        assert_first_registration_wins(&one, &other, &a);
        assert!(!dir.path().join(DIR).exists(), "no file records");
        assert!(other.forget(&a).unwrap());
        assert_eq!(one.check(&a, "s1").unwrap(), Check::Unregistered);
        assert!(!one.forget(&a).unwrap());
    }

    #[test]
    fn records_hold_a_salted_digest_in_private_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = NodePasswords::new(dir.path());
        p.register(&name("node-a"), "plain-secret").unwrap();
        let path = dir.path().join(DIR).join("node-a");
        let record = std::fs::read_to_string(&path).unwrap();
        assert!(!record.contains("plain-secret"));
        assert!(record.starts_with("sha256:"), "{record}");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.path().join(DIR)), 0o700);
        // Only the record is left: no temporary files.
        assert_eq!(std::fs::read_dir(dir.path().join(DIR)).unwrap().count(), 1);
    }

    #[test]
    fn forgetting_a_name_lets_a_new_secret_register() {
        let dir = tempfile::tempdir().unwrap();
        let p = NodePasswords::new(dir.path());
        let a = name("node-a");
        p.register(&a, "old").unwrap();
        assert!(p.forget(&a).unwrap());
        assert!(!p.forget(&a).unwrap());
        assert!(p.register(&a, "new").unwrap());
        assert_eq!(p.check(&a, "new").unwrap(), Check::Matches);
    }

    #[test]
    fn a_damaged_record_is_an_error_not_a_match() {
        let dir = tempfile::tempdir().unwrap();
        let p = NodePasswords::new(dir.path());
        std::fs::create_dir_all(dir.path().join(DIR)).unwrap();
        std::fs::write(dir.path().join(DIR).join("node-a"), "garbage").unwrap();
        assert!(matches!(
            p.check(&name("node-a"), "x"),
            Err(PasswordError::Corrupt(_))
        ));
    }
}
