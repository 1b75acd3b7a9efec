//! A pod's `fsGroup` applied to its volumes as the kubelet's `SetVolumeOwnership` does: every
//! file and directory gets the group, group read/write (read only for config volumes), and
//! directories also group search and the setgid bit, so what the containers create later
//! inherits the group. `fsGroupChangePolicy: OnRootMismatch` skips the walk when the volume's
//! root already has the group and the bits. Symlinks get the group but keep their mode.

use super::{VolumeError, io};
use berth_api::k8s_openapi::api::core::v1::Pod;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

const RW: u32 = 0o660;
const RO: u32 = 0o440;
const SEARCH: u32 = 0o110;
const SETGID: u32 = 0o2000;

/// When the walk runs (`fsGroupChangePolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangePolicy {
    Always,
    OnRootMismatch,
}

/// The pod's `fsGroup` and its change policy, if it sets one.
pub fn fs_group(pod: &Pod) -> Option<(u32, ChangePolicy)> {
    let sc = pod.spec.as_ref()?.security_context.as_ref()?;
    let gid = u32::try_from(sc.fs_group?).ok()?;
    let policy = match sc.fs_group_change_policy.as_deref() {
        Some("OnRootMismatch") => ChangePolicy::OnRootMismatch,
        _ => ChangePolicy::Always,
    };
    Some((gid, policy))
}

/// The mode bits an entry gets: its own plus the group's (upstream's `changeFilePermission`).
pub fn owned_mode(mode: u32, is_dir: bool, read_only: bool) -> u32 {
    let mut add = if read_only { RO } else { RW };
    if is_dir {
        add |= SEARCH | SETGID;
    }
    (mode & 0o7777) | add
}

/// Whether the volume's root already has the group and bits (`OnRootMismatch` then skips the
/// walk; upstream's `requiresPermissionChange`).
pub fn root_matches(mode: u32, gid: u32, fs_group: u32, read_only: bool) -> bool {
    gid == fs_group && owned_mode(mode, true, read_only) == mode & 0o7777
}

/// Applies `fs_group` to `dir` and everything below it (not crossing into other file systems:
/// a mount inside a volume is not the volume's).
pub fn apply(
    dir: &Path,
    fs_group: u32,
    policy: ChangePolicy,
    read_only: bool,
) -> Result<(), VolumeError> {
    let meta = std::fs::metadata(dir).map_err(io(dir))?;
    if policy == ChangePolicy::OnRootMismatch
        && root_matches(meta.mode(), meta.gid(), fs_group, read_only)
    {
        return Ok(());
    }
    walk(dir, meta.dev(), fs_group, read_only)
}

fn walk(path: &Path, dev: u64, fs_group: u32, read_only: bool) -> Result<(), VolumeError> {
    let meta = std::fs::symlink_metadata(path).map_err(io(path))?;
    if meta.dev() != dev {
        return Ok(());
    }
    std::os::unix::fs::lchown(path, None, Some(fs_group)).map_err(io(path))?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    let mode = owned_mode(meta.mode(), meta.is_dir(), read_only);
    if mode != meta.mode() & 0o7777 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io(path))?;
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).map_err(io(path))? {
            let entry = entry.map_err(io(path))?;
            walk(&entry.path(), dev, fs_group, read_only)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_get_group_read_write_and_directories_also_search_and_setgid() {
        let cases = [
            (0o644, false, false, 0o664),
            (0o400, false, true, 0o440),
            (0o755, true, false, 0o2775),
            (0o777, true, false, 0o2777),
            (0o700, true, true, 0o2750),
        ];
        for (mode, dir, ro, want) in cases {
            assert_eq!(
                owned_mode(mode, dir, ro),
                want,
                "{mode:o} dir={dir} ro={ro}"
            );
        }
    }

    #[test]
    fn on_root_mismatch_skips_only_a_root_with_the_group_and_bits() {
        assert!(root_matches(0o2777, 2000, 2000, false));
        assert!(!root_matches(0o2777, 0, 2000, false), "another group");
        assert!(!root_matches(0o777, 2000, 2000, false), "no setgid");
        assert!(!root_matches(0o2705, 2000, 2000, false), "no group rw");
    }

    #[test]
    fn the_walk_sets_group_and_bits_below_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("v");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/f"), b"x").unwrap();
        std::fs::set_permissions(root.join("sub/f"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        std::os::unix::fs::symlink("sub/f", root.join("link")).unwrap();
        // The test runs as root in CI; a group it may set anywhere.
        apply(&root, 2000, ChangePolicy::Always, false).unwrap();
        let m = |p: &str| std::fs::symlink_metadata(root.join(p)).unwrap();
        assert_eq!(m("sub").mode() & 0o7777, 0o2775);
        assert_eq!(m("sub/f").mode() & 0o7777, 0o660);
        assert_eq!(m("sub/f").gid(), 2000);
        assert_eq!(m("link").gid(), 2000);
        assert_eq!(m("").gid(), 2000);
        // OnRootMismatch: a root that matches is left alone, even if below it is not.
        std::fs::set_permissions(root.join("sub/f"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        apply(&root, 2000, ChangePolicy::OnRootMismatch, false).unwrap();
        assert_eq!(m("sub/f").mode() & 0o7777, 0o600);
        apply(&root, 2000, ChangePolicy::Always, false).unwrap();
        assert_eq!(m("sub/f").mode() & 0o7777, 0o660);
    }
}
