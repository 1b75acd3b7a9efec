//! The image filesystem's capacity and free space (statfs on the snapshotter's root).

use std::path::Path;

use super::GcError;
use super::plan::images::DiskUsage;

/// statvfs of `dir`: blocks × fragment size, and the blocks available to unprivileged users
/// (as the kubelet's cadvisor reports `available`).
pub fn usage(dir: &Path) -> Result<DiskUsage, GcError> {
    let s = nix::sys::statvfs::statvfs(dir)
        .map_err(|e| GcError::ImageFs(format!("{}: {e}", dir.display())))?;
    let block = s.fragment_size();
    let capacity = s.blocks().saturating_mul(block);
    if capacity == 0 {
        return Err(GcError::NoCapacity);
    }
    Ok(DiskUsage {
        capacity,
        available: s.blocks_available().saturating_mul(block),
    })
}
