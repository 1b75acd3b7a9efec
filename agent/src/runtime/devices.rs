//! Lists the host's device nodes for privileged containers (like containerd's host devices).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use super::spec::HostDevice;

/// Device nodes under `/dev`, skipping the pseudo-terminal, shm and mqueue trees that every
/// container gets fresh. Unreadable entries are skipped: a privileged container simply lacks
/// that device.
pub(crate) fn host_devices() -> Vec<HostDevice> {
    let mut out = Vec::new();
    walk(Path::new("/dev"), &mut out, 0);
    out
}

fn walk(dir: &Path, out: &mut Vec<HostDevice>, depth: usize) {
    if depth > 4 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let ft = meta.file_type();
        if ft.is_dir() {
            let skip = ["/dev/pts", "/dev/shm", "/dev/mqueue"];
            if !skip.iter().any(|s| path == Path::new(s)) {
                walk(&path, out, depth + 1);
            }
        } else if ft.is_char_device() || ft.is_block_device() {
            if path == Path::new("/dev/console") || path == Path::new("/dev/ptmx") {
                continue;
            }
            let rdev = meta.rdev();
            out.push(HostDevice {
                path: path.to_string_lossy().into_owned(),
                block: ft.is_block_device(),
                major: nix::sys::stat::major(rdev) as i64,
                minor: nix::sys::stat::minor(rdev) as i64,
                file_mode: meta.mode() & 0o7777,
                uid: meta.uid(),
                gid: meta.gid(),
            });
        }
    }
}
