//! Named network namespaces, made and removed with `ip netns` (bind mounts in /var/run/netns),
//! and the identity of a namespace (its nsfs inode), by name or as a process's.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::NetworkError;
use super::command::tool;

/// Where `ip netns` keeps its bind mounts (iproute2 hard-codes it).
pub(crate) const NETNS_DIR: &str = "/var/run/netns";

/// The path of a named netns.
pub(crate) fn path(name: &str) -> PathBuf {
    Path::new(NETNS_DIR).join(name)
}

/// Whether the named netns exists.
pub(crate) async fn exists(name: &str) -> Result<bool, NetworkError> {
    let p = path(name);
    tokio::fs::try_exists(&p)
        .await
        .map_err(|e| NetworkError::io(p, e))
}

/// The identity of a network namespace: device and inode of its nsfs file. Two paths name the
/// same namespace exactly when their identities are equal (`/var/run/netns/X` and
/// `/proc/<pid>/ns/net` of a process inside it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetnsId {
    pub dev: u64,
    pub ino: u64,
}

/// What a netns name stands for on the host now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NetnsPresence {
    /// No such name.
    #[default]
    Absent,
    /// The file is there but no namespace is mounted on it (someone unmounted it, or
    /// /var/run/netns survived a reboot on disk): nothing can join it any more.
    NotMounted,
    /// A namespace is mounted there.
    Mounted(NetnsId),
}

/// nsfs has one superblock: every namespace file is on its device. Ours is the reference.
const OWN_NETNS: &str = "/proc/self/ns/net";

/// The named netns as it is now.
pub(crate) async fn presence(name: &str) -> Result<NetnsPresence, NetworkError> {
    let p = path(name);
    let meta = match tokio::fs::metadata(&p).await {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(NetnsPresence::Absent),
        Err(e) => return Err(NetworkError::io(p, e)),
    };
    let nsfs = tokio::fs::metadata(OWN_NETNS)
        .await
        .map_err(|e| NetworkError::io(OWN_NETNS, e))?
        .dev();
    Ok(if meta.dev() == nsfs {
        NetnsPresence::Mounted(NetnsId {
            dev: meta.dev(),
            ino: meta.ino(),
        })
    } else {
        NetnsPresence::NotMounted
    })
}

/// The netns process `pid` is in; `None` when the process is gone (or not ours to read).
pub(crate) async fn of_process(pid: u32) -> Option<NetnsId> {
    let meta = tokio::fs::metadata(format!("/proc/{pid}/ns/net"))
        .await
        .ok()?;
    Some(NetnsId {
        dev: meta.dev(),
        ino: meta.ino(),
    })
}

/// Creates the named netns with its loopback down (the loopback plugin brings it up).
pub(crate) async fn add(name: &str) -> Result<PathBuf, NetworkError> {
    tool("ip", &["netns", "add", name]).await?;
    Ok(path(name))
}

/// Removes the named netns; a missing one is not an error. Processes still inside keep the
/// namespace alive, but its name and everything CNI put in it are gone from the host's view.
pub(crate) async fn delete(name: &str) -> Result<(), NetworkError> {
    if !exists(name).await? {
        return Ok(());
    }
    match tool("ip", &["netns", "delete", name]).await {
        Ok(_) => Ok(()),
        // Raced with another delete: fine as long as it is gone now.
        Err(e) if !exists(name).await.unwrap_or(true) => {
            tracing::debug!(netns = name, error = %e, "netns vanished during delete");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Names of all named netns on the host.
pub(crate) async fn list() -> Result<Vec<String>, NetworkError> {
    crate::dir_listing::entry_names(Path::new(NETNS_DIR))
        .await
        .map_err(|e| NetworkError::io(NETNS_DIR, e))
}
