//! This agent's instance id: ten random characters of `[a-z0-9]`, made at the first start and
//! kept in `<state_dir>/instance-id`, so it lives and dies with the network state it names.
//!
//! Every netns the agent makes carries the id in its name, and the agent claims (lists, cleans
//! up) only names with its own id or recorded in its own state dir. Two agents on one host
//! with the same node name (two clusters, a reinstall beside an old root dir) therefore never
//! delete each other's namespaces. If the file is lost, the agent makes a new id: namespaces
//! of the old one are then nobody's, and left alone rather than guessed at.

use std::path::Path;

use super::NetworkError;

/// The file under the network state dir.
const FILE: &str = "instance-id";

/// Length of a newly made id (36^10 ≈ 3.7e15 values).
const LEN: usize = 10;

/// Longest id accepted from the file (an administrator may have put a shorter one there).
const MAX_LEN: usize = 16;

/// Whether `id` can serve as an instance id: 1 to 16 bytes of `[a-z0-9]`.
pub(crate) fn is_valid(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// A fresh random id.
fn generate() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..LEN)
        .map(|_| {
            let i = rand::random_range(0..ALPHABET.len());
            char::from(ALPHABET[i])
        })
        .collect()
}

/// The instance id kept in `state_dir`, made and written (atomically) if there is none yet.
/// A file with anything but a valid id is an error: making a new id would orphan every
/// namespace of the old one.
pub async fn instance_id(state_dir: &Path) -> Result<String, NetworkError> {
    let path = state_dir.join(FILE);
    match tokio::fs::read_to_string(&path).await {
        Ok(text) => {
            let id = text.trim();
            if is_valid(id) {
                return Ok(id.to_string());
            }
            return Err(NetworkError::InvalidConfig {
                field: "instance",
                value: id.chars().take(64).collect(),
                reason: "the instance-id file must hold 1 to 16 bytes of [a-z0-9]",
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(NetworkError::io(path, e)),
    }
    tokio::fs::create_dir_all(state_dir)
        .await
        .map_err(|e| NetworkError::io(state_dir, e))?;
    let id = generate();
    let tmp = state_dir.join(format!(".{FILE}.tmp"));
    tokio::fs::write(&tmp, format!("{id}\n"))
        .await
        .map_err(|e| NetworkError::io(&tmp, e))?;
    tokio::fs::rename(&tmp, &path)
        .await
        .map_err(|e| NetworkError::io(&path, e))?;
    tracing::info!(instance = %id, path = %path.display(), "made this agent's instance id");
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_ids_are_valid_and_differ() {
        let (a, b) = (generate(), generate());
        assert!(is_valid(&a) && is_valid(&b), "{a} {b}");
        assert_eq!(a.len(), LEN);
        assert_ne!(a, b);
        for bad in ["", "A1", "a-b", "a b", &"a".repeat(17)] {
            assert!(!is_valid(bad), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn the_id_is_made_once_and_read_back_on_later_starts() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("network");
        let first = instance_id(&state).await.unwrap();
        assert_eq!(instance_id(&state).await.unwrap(), first);
        assert_eq!(
            std::fs::read_to_string(state.join(FILE)).unwrap(),
            format!("{first}\n")
        );
    }

    #[tokio::test]
    async fn a_damaged_id_file_is_an_error_not_a_new_id() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), "Not/An-Id\n").unwrap();
        let err = instance_id(dir.path()).await.unwrap_err();
        assert!(matches!(err, NetworkError::InvalidConfig { .. }), "{err}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(FILE)).unwrap(),
            "Not/An-Id\n",
            "left as it was"
        );
    }
}
