//! The pod's tmpfs mounts (memory-backed emptyDirs; secret, projected and downwardAPI volumes):
//! made once at set-up, found again after an agent restart through `/proc/self/mountinfo`, and
//! unmounted, deepest first, before the pod's directory is removed.

use super::{VolumeError, io};
use std::path::{Path, PathBuf};

/// Mount points at or under `dir` in `mountinfo` text, deepest first.
fn mounts_under(mountinfo: &str, dir: &Path) -> Vec<PathBuf> {
    let mut points: Vec<PathBuf> = crate::mountinfo::parse(mountinfo)
        .into_iter()
        .map(|m| m.point)
        .filter(|p| p.starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    points.dedup();
    points
}

fn mountinfo() -> String {
    crate::mountinfo::read()
}

/// Whether `path` is a mount point, told as the kubelet's `IsLikelyNotMountPoint` tells it: its
/// device differs from its parent's. Every mount made here is a tmpfs of its own (a device of
/// its own), so for these the answer is exact; and it costs two `stat`s on every pass of every
/// pod, where reading `/proc/self/mountinfo` grew with every mount on the host (each pod's
/// netns, rootfs and volumes) and was most of the agent's CPU during a 100-pod rollout.
pub(super) fn is_mountpoint(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(parent) = path.parent() else {
        return true;
    };
    match (std::fs::metadata(path), std::fs::metadata(parent)) {
        (Ok(own), Ok(up)) => own.dev() != up.dev(),
        _ => false,
    }
}

/// Makes `dir` a tmpfs (of at most `size` bytes) unless it is one already: set up once per
/// pod, and kept across agent restarts (the mount outlives the agent, as the pod does).
pub(super) fn mount(dir: &Path, size: Option<u64>) -> Result<(), VolumeError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    if is_mountpoint(dir) {
        return Ok(());
    }
    let opts = size.map(|s| format!("size={s}"));
    nix::mount::mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        opts.as_deref(),
    )
    .map_err(|source| VolumeError::Mount {
        path: dir.to_path_buf(),
        source,
    })
}

/// Unmounts every mount at or under `dir` (lazily: a process still holding a file lets go later).
pub(super) fn unmount_all_under(dir: &Path) -> Result<(), VolumeError> {
    for point in mounts_under(&mountinfo(), dir) {
        nix::mount::umount2(&point, nix::mount::MntFlags::MNT_DETACH).map_err(|source| {
            VolumeError::Unmount {
                path: point.clone(),
                source,
            }
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mount_point_is_a_directory_on_another_device_than_its_parent() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::create_dir(&plain).unwrap();
        assert!(!is_mountpoint(&plain));
        assert!(!is_mountpoint(&dir.path().join("missing")));
        assert!(is_mountpoint(Path::new("/proc")));
        assert!(is_mountpoint(Path::new("/")));
    }

    #[test]
    fn mount_points_under_a_pod_are_found_deepest_first_with_escapes_decoded() {
        let info = "36 35 0:31 / /r/pods/u rw - tmpfs tmpfs rw
38 36 0:33 / /r/pods/u/volumes/secret/s rw - tmpfs tmpfs rw
39 35 0:34 / /r/pods/uu rw - tmpfs tmpfs rw
40 35 0:35 / /r/pods/u/with\\040space rw - tmpfs tmpfs rw
";
        assert_eq!(
            mounts_under(info, Path::new("/r/pods/u")),
            [
                PathBuf::from("/r/pods/u/volumes/secret/s"),
                PathBuf::from("/r/pods/u/with space"),
                PathBuf::from("/r/pods/u"),
            ]
        );
    }
}
