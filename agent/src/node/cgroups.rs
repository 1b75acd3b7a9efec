//! Writes the agent's cgroups: makes a cgroup and sets its limits, removes one (and what is
//! left below it). The only module that writes under `/sys/fs/cgroup`.
//!
//! cgroup v1 (controllers on their own hierarchies): a cgroup is made in the `memory`, `cpu`
//! and `pids` hierarchies, the ones its limits live in; runc makes the container cgroups below
//! it in every hierarchy, so removal walks every mounted hierarchy. cgroup v2 (one unified
//! tree, `cgroup.controllers` at the root): each ancestor made here gets `+cpu +memory +pids`
//! in its `cgroup.subtree_control` (those its parent offers), so the limits' files exist in
//! the child. Paths use cgroupfs naming, as the containers' `linux.cgroupsPath` does.

use super::cgroup_layout::{self, CgroupLimits};
use crate::dir_listing::{subdirectories, subdirectory_names};
use std::path::{Path, PathBuf};

/// The host's cgroup mount point.
pub const CGROUP_MOUNT: &str = "/sys/fs/cgroup";
const V1_CONTROLLERS: [&str; 3] = ["memory", "cpu", "pids"];
const V2_CONTROLLERS: [&str; 3] = ["cpu", "memory", "pids"];

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: still busy (processes or child cgroups left)")]
    Busy { path: PathBuf },
}

impl CgroupError {
    /// Whether trying again later may succeed (a cgroup emptied by the kernel a moment late).
    pub fn is_transient(&self) -> bool {
        matches!(self, CgroupError::Busy { .. })
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CgroupError + '_ {
    move |source| CgroupError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Which cgroup hierarchy the host runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hierarchy {
    V1,
    V2,
}

/// The cgroup filesystem at `mount`.
#[derive(Debug, Clone)]
pub struct CgroupFs {
    mount: PathBuf,
    hierarchy: Hierarchy,
}

impl CgroupFs {
    /// The host's, its version told by `cgroup.controllers` at the mount point.
    pub fn host() -> CgroupFs {
        CgroupFs::at(Path::new(CGROUP_MOUNT))
    }

    /// The cgroup filesystem mounted at `mount` (tests pass a directory of recorded files).
    pub fn at(mount: &Path) -> CgroupFs {
        let hierarchy = if mount.join("cgroup.controllers").exists() {
            Hierarchy::V2
        } else {
            Hierarchy::V1
        };
        CgroupFs {
            mount: mount.to_path_buf(),
            hierarchy,
        }
    }

    pub fn hierarchy(&self) -> Hierarchy {
        self.hierarchy
    }

    /// Makes the cgroup `path` (relative, `berth/kubepods/burstable`) with its ancestors, and
    /// writes `limits`.
    pub fn apply(&self, path: &str, limits: &CgroupLimits) -> Result<(), CgroupError> {
        let rel = path.trim_matches('/');
        match self.hierarchy {
            Hierarchy::V1 => {
                for controller in V1_CONTROLLERS {
                    let dir = self.mount.join(controller).join(rel);
                    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
                }
                for (controller, file, value) in cgroup_layout::v1_files(limits) {
                    let f = self.mount.join(controller).join(rel).join(file);
                    std::fs::write(&f, value).map_err(io(&f))?;
                }
            }
            Hierarchy::V2 => {
                let mut dir = self.mount.clone();
                for part in rel.split('/').filter(|p| !p.is_empty()) {
                    self.enable_controllers(&dir)?;
                    dir.push(part);
                    if !dir.exists() {
                        std::fs::create_dir(&dir).map_err(io(&dir))?;
                    }
                }
                for (file, value) in cgroup_layout::v2_files(limits) {
                    let f = dir.join(file);
                    std::fs::write(&f, value).map_err(io(&f))?;
                }
            }
        }
        Ok(())
    }

    /// v2: lets the children of `dir` use the controllers the limits need (those `dir` has).
    fn enable_controllers(&self, dir: &Path) -> Result<(), CgroupError> {
        let available = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
        let enabled =
            std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
        let missing: Vec<String> = V2_CONTROLLERS
            .iter()
            .filter(|c| available.split_whitespace().any(|a| a == **c))
            .filter(|c| !enabled.split_whitespace().any(|e| e == **c))
            .map(|c| format!("+{c}"))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let f = dir.join("cgroup.subtree_control");
        std::fs::write(&f, missing.join(" ")).map_err(io(&f))
    }

    /// The hierarchies a cgroup path may exist in: every v1 hierarchy mounted under the mount
    /// point (runc makes container cgroups in all), or the unified root.
    fn roots(&self) -> Vec<PathBuf> {
        match self.hierarchy {
            Hierarchy::V2 => vec![self.mount.clone()],
            Hierarchy::V1 => subdirectories(&self.mount),
        }
    }

    /// Whether the cgroup `path` exists (in the memory hierarchy under v1).
    pub fn exists(&self, path: &str) -> bool {
        let rel = path.trim_matches('/');
        match self.hierarchy {
            Hierarchy::V1 => self.mount.join("memory").join(rel).is_dir(),
            Hierarchy::V2 => self.mount.join(rel).is_dir(),
        }
    }

    /// Removes the cgroup `path` and every cgroup below it, in every hierarchy; a missing one
    /// is fine. Fails [`CgroupError::Busy`] while a process is left in one.
    pub fn remove(&self, path: &str) -> Result<(), CgroupError> {
        let rel = path.trim_matches('/');
        if rel.is_empty() {
            return Ok(());
        }
        for root in self.roots() {
            remove_tree(&root.join(rel))?;
        }
        Ok(())
    }

    /// The names of the child cgroups of `path` (in the memory hierarchy under v1).
    pub fn children(&self, path: &str) -> Vec<String> {
        let rel = path.trim_matches('/');
        let dir = match self.hierarchy {
            Hierarchy::V1 => self.mount.join("memory").join(rel),
            Hierarchy::V2 => self.mount.join(rel),
        };
        subdirectory_names(&dir)
    }
}

/// The node's pid capacity: `kernel.pid_max` (the kubelet's `pid` capacity), or `-1` when it
/// cannot be read (no limit then).
pub fn pid_capacity() -> i64 {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(-1)
}

/// rmdir of `dir`'s subtree, deepest first. cgroup directories hold only the kernel's files,
/// which go with the directory.
fn remove_tree(dir: &Path) -> Result<(), CgroupError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(dir)(e)),
    };
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&e.path())?;
        }
    }
    let mut removed = std::fs::remove_dir(dir);
    if removed
        .as_ref()
        .is_err_and(|e| e.kind() == std::io::ErrorKind::DirectoryNotEmpty)
    {
        // Not a cgroupfs (which never says so: its files go with the directory) but a plain
        // directory of recorded files: they go first.
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_file()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
        removed = std::fs::remove_dir(dir);
    }
    match removed {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) if e.raw_os_error() == Some(nix::libc::EBUSY) => Err(CgroupError::Busy {
            path: dir.to_path_buf(),
        }),
        Err(e) => Err(io(dir)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(p: PathBuf) -> String {
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    #[test]
    fn v1_limits_go_to_their_controllers_hierarchies() {
        let mount = tempfile::tempdir().unwrap();
        let fs = CgroupFs::at(mount.path());
        assert_eq!(fs.hierarchy(), Hierarchy::V1);
        let limits = CgroupLimits {
            memory: Some(1 << 30),
            cpu_shares: Some(2),
            cpu_quota: None,
            pids: Some(100),
        };
        fs.apply("/berth/kubepods/besteffort/", &limits).unwrap();
        let at = |c: &str, f: &str| {
            read(
                mount
                    .path()
                    .join(c)
                    .join("berth/kubepods/besteffort")
                    .join(f),
            )
        };
        assert_eq!(at("memory", "memory.limit_in_bytes"), "1073741824");
        assert_eq!(at("cpu", "cpu.shares"), "2");
        assert_eq!(at("pids", "pids.max"), "100");
        assert!(fs.exists("berth/kubepods/besteffort"));
        assert_eq!(fs.children("berth/kubepods"), ["besteffort"]);
    }

    #[test]
    fn v2_ancestors_hand_their_controllers_down() {
        let mount = tempfile::tempdir().unwrap();
        // A recorded v2 root: what the kernel offers and what systemd enabled.
        std::fs::write(
            mount.path().join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )
        .unwrap();
        std::fs::write(mount.path().join("cgroup.subtree_control"), "memory pids\n").unwrap();
        let fs = CgroupFs::at(mount.path());
        assert_eq!(fs.hierarchy(), Hierarchy::V2);
        // The kernel would fill a new cgroup's cgroup.controllers; here the test does.
        std::fs::create_dir(mount.path().join("berth")).unwrap();
        std::fs::write(
            mount.path().join("berth/cgroup.controllers"),
            "cpu memory pids\n",
        )
        .unwrap();
        let limits = CgroupLimits {
            memory: Some(4096),
            cpu_shares: Some(1024),
            cpu_quota: Some(50_000),
            pids: Some(-1),
        };
        fs.apply("berth/kubepods", &limits).unwrap();
        assert_eq!(read(mount.path().join("cgroup.subtree_control")), "+cpu");
        assert_eq!(
            read(mount.path().join("berth/cgroup.subtree_control")),
            "+cpu +memory +pids"
        );
        let at = |f: &str| read(mount.path().join("berth/kubepods").join(f));
        assert_eq!(at("memory.max"), "4096");
        assert_eq!(at("cpu.weight"), "39");
        assert_eq!(at("cpu.max"), "50000 100000");
        assert_eq!(at("pids.max"), "max");
    }

    #[test]
    fn removal_takes_the_subtree_in_every_hierarchy() {
        let mount = tempfile::tempdir().unwrap();
        for c in ["memory", "cpu", "pids", "freezer"] {
            std::fs::create_dir_all(mount.path().join(c).join("ns/kubepods/podu1/c1")).unwrap();
        }
        let fs = CgroupFs::at(mount.path());
        fs.remove("ns/kubepods/podu1").unwrap();
        for c in ["memory", "cpu", "pids", "freezer"] {
            assert!(
                !mount.path().join(c).join("ns/kubepods/podu1").exists(),
                "{c}"
            );
            assert!(mount.path().join(c).join("ns/kubepods").exists(), "{c}");
        }
        fs.remove("ns/kubepods/podu1").unwrap();
    }
}
