//! Per-pod network state on disk (`<state_dir>/pods/<uid>.json`): written before the netns
//! exists and after each CNI attachment, so a restarted agent can finish or undo any step.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::NetworkError;
use super::plugins::Attachment;

/// What was (or is being) set up for one pod.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PodState {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// The netns name (under /var/run/netns).
    pub netns: String,
    /// The plugin configurations used at ADD; DEL replays exactly these, even if the agent's
    /// configuration changed since.
    pub attachments: Vec<Attachment>,
    /// The final ADD result of each attachment (same index) once it succeeded; DEL passes it
    /// as `prevResult`.
    pub results: Vec<Option<Value>>,
    /// True once every attachment succeeded.
    pub complete: bool,
}

fn pods_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("pods")
}

fn file(state_dir: &Path, uid: &str) -> PathBuf {
    pods_dir(state_dir).join(format!("{uid}.json"))
}

/// Reads a pod's state; `None` when there is none.
pub(crate) async fn read(state_dir: &Path, uid: &str) -> Result<Option<PodState>, NetworkError> {
    let path = file(state_dir, uid);
    let bytes = match tokio::fs::read(&path).await {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(NetworkError::io(path, e)),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|source| NetworkError::State { path, source })
}

/// Replaces a pod's state atomically (write a temporary file, then rename over).
pub(crate) async fn write(state_dir: &Path, st: &PodState) -> Result<(), NetworkError> {
    let dir = pods_dir(state_dir);
    tokio::fs::create_dir_all(&dir)
        .await
        .map_err(|e| NetworkError::io(&dir, e))?;
    let path = file(state_dir, &st.uid);
    let tmp = dir.join(format!(".{}.json.tmp", st.uid));
    let bytes = serde_json::to_vec_pretty(st).map_err(|source| NetworkError::State {
        path: path.clone(),
        source,
    })?;
    tokio::fs::write(&tmp, bytes)
        .await
        .map_err(|e| NetworkError::io(&tmp, e))?;
    tokio::fs::rename(&tmp, &path)
        .await
        .map_err(|e| NetworkError::io(&path, e))
}

/// Forgets a pod; a missing file is fine.
pub(crate) async fn remove(state_dir: &Path, uid: &str) -> Result<(), NetworkError> {
    let path = file(state_dir, uid);
    match tokio::fs::remove_file(&path).await {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(NetworkError::io(path, e)),
    }
}

/// The uids that have a state file.
pub(crate) async fn list(state_dir: &Path) -> Result<Vec<String>, NetworkError> {
    let dir = pods_dir(state_dir);
    let names = crate::dir_listing::entry_names(&dir)
        .await
        .map_err(|e| NetworkError::io(&dir, e))?;
    let mut out: Vec<String> = names
        .iter()
        .filter_map(|n| n.strip_suffix(".json"))
        .filter(|uid| !uid.starts_with('.'))
        .map(str::to_string)
        .collect();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample(uid: &str) -> PodState {
        PodState {
            uid: uid.into(),
            namespace: "default".into(),
            name: "web".into(),
            netns: format!("net-{uid}"),
            attachments: vec![Attachment {
                if_name: "eth0".into(),
                plugins: vec![json!({"type": "bridge"})],
            }],
            results: vec![Some(json!({"ips": []}))],
            complete: true,
        }
    }

    #[tokio::test]
    async fn state_round_trips_and_lists_by_uid() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path(), "a").await.unwrap(), None);
        assert!(list(dir.path()).await.unwrap().is_empty());
        write(dir.path(), &sample("b")).await.unwrap();
        write(dir.path(), &sample("a")).await.unwrap();
        assert_eq!(read(dir.path(), "a").await.unwrap(), Some(sample("a")));
        assert_eq!(list(dir.path()).await.unwrap(), vec!["a", "b"]);
        remove(dir.path(), "a").await.unwrap();
        remove(dir.path(), "a").await.unwrap();
        assert_eq!(list(dir.path()).await.unwrap(), vec!["b"]);
    }

    #[tokio::test]
    async fn a_corrupt_state_file_is_a_typed_permanent_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("pods")).unwrap();
        std::fs::write(dir.path().join("pods/x.json"), "{").unwrap();
        let err = read(dir.path(), "x").await.unwrap_err();
        assert!(matches!(err, NetworkError::State { .. }), "{err}");
        assert!(!err.is_transient());
    }
}
