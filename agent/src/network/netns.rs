//! Named network namespaces, made and removed with `ip netns` (bind mounts in /var/run/netns).

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
    let mut out = Vec::new();
    let mut dir = match tokio::fs::read_dir(NETNS_DIR).await {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(NetworkError::io(NETNS_DIR, e)),
    };
    while let Some(entry) = dir
        .next_entry()
        .await
        .map_err(|e| NetworkError::io(NETNS_DIR, e))?
    {
        if let Some(name) = entry.file_name().to_str() {
            out.push(name.to_string());
        }
    }
    Ok(out)
}
