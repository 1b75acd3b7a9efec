//! Listing a host directory: its subdirectories (cgroup hierarchies, pod log directories),
//! where a missing or unreadable directory lists nothing and an entry whose type cannot be read
//! is left out (the callers sweep what they find and look again on their next pass); and its
//! entries' names (named netns, network state files), where only a missing directory is empty.

use std::path::{Path, PathBuf};

/// The subdirectories of `dir`, as paths.
pub fn subdirectories(dir: &Path) -> Vec<PathBuf> {
    directories(dir).map(|e| e.path()).collect()
}

/// The names of `dir`'s subdirectories that are UTF-8.
pub fn subdirectory_names(dir: &Path) -> Vec<String> {
    directories(dir)
        .filter_map(|e| e.file_name().into_string().ok())
        .collect()
}

/// The UTF-8 names of `dir`'s entries; a missing directory has none, other errors are the
/// caller's.
pub async fn entry_names(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut entries = match tokio::fs::read_dir(dir).await {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    while let Some(entry) = entries.next_entry().await? {
        if let Ok(name) = entry.file_name().into_string() {
            out.push(name);
        }
    }
    Ok(out)
}

fn directories(dir: &Path) -> impl Iterator<Item = std::fs::DirEntry> {
    std::fs::read_dir(dir)
        .into_iter()
        .flat_map(|entries| entries.flatten())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_directories_are_listed_and_a_missing_directory_lists_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        std::fs::write(dir.path().join("f"), b"x").unwrap();
        assert_eq!(subdirectories(dir.path()), vec![dir.path().join("a")]);
        assert_eq!(subdirectory_names(dir.path()), vec!["a".to_string()]);
        assert!(subdirectories(&dir.path().join("missing")).is_empty());
        assert!(subdirectory_names(&dir.path().join("missing")).is_empty());
    }

    #[tokio::test]
    async fn entry_names_are_every_entry_and_a_missing_directory_has_none() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        std::fs::write(dir.path().join("f"), b"x").unwrap();
        let mut names = entry_names(dir.path()).await.unwrap();
        names.sort();
        assert_eq!(names, ["a", "f"]);
        assert!(
            entry_names(&dir.path().join("missing"))
                .await
                .unwrap()
                .is_empty()
        );
        let file = dir.path().join("f");
        assert!(entry_names(&file).await.is_err(), "not a directory");
    }
}
