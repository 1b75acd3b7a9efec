//! The kubelet's atomic writer (`pkg/volume/util/atomic_writer.go`) for config volumes: a new
//! payload is written into a fresh hidden directory `..<timestamp>` beside the last one, then
//! the `..data` symlink is switched to it with one `rename` of a `..data_tmp` symlink, so a
//! reader that goes through `..data` sees the old set of files or the new one, never a mix.
//! The names users see are symlinks `name -> ..data/name` for each top-level path component;
//! a name no longer in the payload loses its symlink, and the old directory is removed after
//! the switch. An unchanged payload (content, mode and group) writes nothing.
//!
//! Layout of a volume with keys `a` and `dir/b`:
//! ```text
//! ..2026_11_29_01_47_11.3141592/a    ..2026_11_29_01_47_11.3141592/dir/b
//! ..data -> ..2026_11_29_01_47_11.3141592
//! a -> ..data/a                       dir -> ..data/dir
//! ```

use super::ownership::{self, ChangePolicy};
use super::payload::Payload;
use super::{VolumeError, io};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub const DATA_DIR: &str = "..data";
const DATA_TMP: &str = "..data_tmp";

/// The top-level component of a payload path (what users see in the volume).
fn top(path: &str) -> &str {
    path.split('/').next().unwrap_or(path)
}

/// The mode a payload file has on disk: its own, plus group read under an `fsGroup`.
fn disk_mode(mode: u32, fs_group: Option<u32>) -> u32 {
    match fs_group {
        Some(_) => ownership::owned_mode(mode, false, true),
        None => mode & 0o7777,
    }
}

/// The regular files under `dir`, by path relative to it.
fn files_under(dir: &Path) -> Result<BTreeMap<String, PathBuf>, VolumeError> {
    let mut out = BTreeMap::new();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, prefix)) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(io(&d))? {
            let e = e.map_err(io(&d))?;
            let name = format!("{prefix}{}", e.file_name().to_string_lossy());
            let t = e.file_type().map_err(io(&e.path()))?;
            if t.is_dir() {
                stack.push((e.path(), format!("{name}/")));
            } else {
                out.insert(name, e.path());
            }
        }
    }
    Ok(out)
}

/// Whether the directory `ts` holds exactly `payload`, with the modes and group it would get.
fn holds(ts: &Path, payload: &Payload, fs_group: Option<u32>) -> Result<bool, VolumeError> {
    let Ok(files) = files_under(ts) else {
        return Ok(false);
    };
    if !files.keys().eq(payload.keys()) {
        return Ok(false);
    }
    for (path, f) in payload {
        let on_disk = &files[path];
        let meta = std::fs::symlink_metadata(on_disk).map_err(io(on_disk))?;
        if meta.mode() & 0o7777 != disk_mode(f.mode, fs_group)
            || fs_group.is_some_and(|g| meta.gid() != g)
            || meta.len() != f.data.len() as u64
        {
            return Ok(false);
        }
        if std::fs::read(on_disk).map_err(io(on_disk))? != f.data {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A new, empty timestamped directory in `dir` (mode 0755 whatever the umask), by name.
fn new_ts_dir(dir: &Path) -> Result<String, VolumeError> {
    let stamp = jiff::Timestamp::now().strftime("..%Y_%m_%d_%H_%M_%S");
    loop {
        let name = format!("{stamp}.{}", rand::random::<u32>());
        let path = dir.join(&name);
        match std::fs::create_dir(&path) {
            Ok(()) => {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                    .map_err(io(&path))?;
                return Ok(name);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io(&path)(e)),
        }
    }
}

fn write_payload(ts: &Path, payload: &Payload, fs_group: Option<u32>) -> Result<(), VolumeError> {
    for (rel, f) in payload {
        let path = ts.join(rel);
        if let Some(parent) = path.parent().filter(|p| !p.exists()) {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
            let mut d = parent;
            while d != ts {
                std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))
                    .map_err(io(d))?;
                d = d.parent().unwrap_or(ts);
            }
        }
        std::fs::write(&path, &f.data).map_err(io(&path))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(f.mode & 0o7777))
            .map_err(io(&path))?;
    }
    // Before the switch: a reader never sees the files without their group.
    if let Some(g) = fs_group {
        ownership::apply(ts, g, ChangePolicy::Always, true)?;
    }
    Ok(())
}

/// Makes `dir` hold `payload` (see the module doc); `Ok(false)` when it already did.
pub fn write(dir: &Path, payload: &Payload, fs_group: Option<u32>) -> Result<bool, VolumeError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let data = dir.join(DATA_DIR);
    let old = std::fs::read_link(&data)
        .ok()
        .map(|t| t.to_string_lossy().into_owned())
        .filter(|t| t.starts_with("..") && !t.contains('/'));
    let visible: BTreeSet<&str> = payload.keys().map(|k| top(k)).collect();
    let links_ok = visible.iter().all(|name| {
        std::fs::read_link(dir.join(name)).is_ok_and(|t| t == Path::new(DATA_DIR).join(name))
    });
    if let Some(old) = &old
        && links_ok
        && holds(&dir.join(old), payload, fs_group)?
    {
        return Ok(false);
    }
    let ts = new_ts_dir(dir)?;
    if let Err(e) = write_payload(&dir.join(&ts), payload, fs_group) {
        let _ = std::fs::remove_dir_all(dir.join(&ts));
        return Err(e);
    }
    // The switch: one rename of a symlink over `..data`.
    let tmp = dir.join(DATA_TMP);
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&tmp)(e)),
        _ => {}
    }
    std::os::unix::fs::symlink(&ts, &tmp).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &data).map_err(io(&data))?;
    // The names users see: new ones made, gone ones removed (only our symlinks).
    for name in &visible {
        let link = dir.join(name);
        let target = Path::new(DATA_DIR).join(name);
        match std::fs::symlink_metadata(&link) {
            Ok(_) if std::fs::read_link(&link).is_ok_and(|t| t == target) => continue,
            // A plain file or directory left by an agent that wrote files in place.
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&link).map_err(io(&link))?,
            Ok(_) => std::fs::remove_file(&link).map_err(io(&link))?,
            Err(_) => {}
        }
        std::os::unix::fs::symlink(&target, &link).map_err(io(&link))?;
        if let Some(g) = fs_group {
            std::os::unix::fs::lchown(&link, None, Some(g)).map_err(io(&link))?;
        }
    }
    for e in std::fs::read_dir(dir).map_err(io(dir))? {
        let e = e.map_err(io(dir))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        if name.starts_with("..") {
            // Earlier timestamped directories (the last one, and any a crash left).
            if name != DATA_DIR && name != ts && e.file_type().is_ok_and(|t| t.is_dir()) {
                std::fs::remove_dir_all(&path).map_err(io(&path))?;
            }
            continue;
        }
        let ours = std::fs::read_link(&path).is_ok_and(|t| t.starts_with(DATA_DIR));
        if ours && !visible.contains(name.as_str()) {
            std::fs::remove_file(&path).map_err(io(&path))?;
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::super::payload::FileProjection;
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn payload(files: &[(&str, &str, u32)]) -> Payload {
        files
            .iter()
            .map(|(p, d, m)| {
                (
                    p.to_string(),
                    FileProjection {
                        data: d.as_bytes().to_vec(),
                        mode: *m,
                    },
                )
            })
            .collect()
    }

    fn read(dir: &Path, p: &str) -> Option<String> {
        std::fs::read_to_string(dir.join(p)).ok()
    }

    /// A volume directory `v` (not made yet) in a new temporary directory.
    fn volume() -> (tempfile::TempDir, std::path::PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("v");
        (tmp, dir)
    }

    /// Files `a` and `d/b`, both holding `data`.
    fn a_and_d_b(data: &str) -> Payload {
        payload(&[("a", data, 0o644), ("d/b", data, 0o644)])
    }

    fn ts_dirs(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("..") && n != DATA_DIR)
            .collect()
    }

    #[test]
    fn an_update_switches_the_data_link_and_removes_the_old_directory() {
        let (_tmp, dir) = volume();
        assert!(write(&dir, &a_and_d_b("1"), None).unwrap());
        let first = std::fs::read_link(dir.join(DATA_DIR)).unwrap();
        assert_eq!(read(&dir, "a").as_deref(), Some("1"));
        assert_eq!(read(&dir, "d/b").as_deref(), Some("1"));
        assert_eq!(
            std::fs::read_link(dir.join("d")).unwrap(),
            Path::new("..data/d")
        );
        assert!(write(&dir, &a_and_d_b("2"), None).unwrap());
        assert_ne!(std::fs::read_link(dir.join(DATA_DIR)).unwrap(), first);
        assert_eq!(read(&dir, "a").as_deref(), Some("2"));
        assert_eq!(ts_dirs(&dir).len(), 1, "the old directory is gone");
    }

    #[test]
    fn a_key_no_longer_in_the_payload_disappears() {
        let (_tmp, dir) = volume();
        write(
            &dir,
            &payload(&[("a", "1", 0o644), ("b", "1", 0o644)]),
            None,
        )
        .unwrap();
        write(&dir, &payload(&[("a", "1", 0o644)]), None).unwrap();
        assert!(std::fs::symlink_metadata(dir.join("b")).is_err());
        assert_eq!(read(&dir, "a").as_deref(), Some("1"));
        write(&dir, &Payload::new(), None).unwrap();
        assert!(std::fs::symlink_metadata(dir.join("a")).is_err());
    }

    #[test]
    fn modes_are_set_whatever_the_umask_and_an_fs_group_adds_group_read() {
        let (_tmp, dir) = volume();
        let p = payload(&[("secret", "x", 0o400), ("open", "y", 0o755)]);
        write(&dir, &p, None).unwrap();
        let mode = |n: &str| std::fs::metadata(dir.join(n)).unwrap().mode() & 0o7777;
        assert_eq!((mode("secret"), mode("open")), (0o400, 0o755));
        // The same payload under an fsGroup is a change (the group), written anew.
        assert!(write(&dir, &p, Some(2000)).unwrap());
        assert_eq!((mode("secret"), mode("open")), (0o440, 0o755));
        assert_eq!(std::fs::metadata(dir.join("secret")).unwrap().gid(), 2000);
        assert!(!write(&dir, &p, Some(2000)).unwrap());
    }

    #[test]
    fn files_an_older_agent_wrote_in_place_become_links() {
        let (_tmp, dir) = volume();
        std::fs::create_dir_all(dir.join("d")).unwrap();
        std::fs::write(dir.join("a"), b"old").unwrap();
        std::fs::write(dir.join("d/b"), b"old").unwrap();
        write(&dir, &a_and_d_b("1"), None).unwrap();
        assert_eq!(read(&dir, "a").as_deref(), Some("1"));
        assert_eq!(read(&dir, "d/b").as_deref(), Some("1"));
        assert!(std::fs::read_link(dir.join("d")).is_ok());
    }

    #[test]
    fn an_unchanged_payload_writes_nothing() {
        let (_tmp, dir) = volume();
        let p = payload(&[("a", "1", 0o644)]);
        assert!(write(&dir, &p, None).unwrap());
        let link = std::fs::read_link(dir.join(DATA_DIR)).unwrap();
        assert!(!write(&dir, &p, None).unwrap());
        assert_eq!(std::fs::read_link(dir.join(DATA_DIR)).unwrap(), link);
        // A mode change is a change.
        assert!(write(&dir, &payload(&[("a", "1", 0o600)]), None).unwrap());
    }

    #[test]
    fn a_reader_through_the_data_link_never_sees_a_mixed_pair() {
        let (_tmp, dir) = volume();
        let pair = |n: usize| {
            let s = n.to_string();
            payload(&[("a", &s, 0o644), ("b", &s, 0o644)])
        };
        write(&dir, &pair(0), None).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (dir, stop) = (dir.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut pairs, mut mixed) = (0, 0);
                while !stop.load(Ordering::SeqCst) {
                    // As `cd ..data && cat a b`: one resolution of the link for both reads.
                    let Ok(ts) = std::fs::read_link(dir.join(DATA_DIR)) else {
                        continue;
                    };
                    let snap = dir.join(ts);
                    if let (Some(a), Some(b)) = (read(&snap, "a"), read(&snap, "b")) {
                        pairs += 1;
                        mixed += usize::from(a != b);
                    }
                }
                (pairs, mixed)
            })
        };
        for n in 1..=300 {
            write(&dir, &pair(n), None).unwrap();
        }
        stop.store(true, Ordering::SeqCst);
        let (pairs, mixed) = reader.join().unwrap();
        assert!(pairs > 0);
        assert_eq!(mixed, 0, "of {pairs} pairs");
        assert_eq!(read(&dir, "a").as_deref(), Some("300"));
    }
}
