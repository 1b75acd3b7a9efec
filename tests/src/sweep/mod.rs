//! Leaves the host as a test found it: removes network namespaces, bridges, iptables rules,
//! ipsets, mounts, cgroups and processes that a cluster's agents and containers may leave behind
//! when a test fails half-way. Every step is best effort: it reports what it could not undo on
//! stderr and never panics (it runs from `Drop`, possibly while a test is already unwinding).

pub mod ipset;
pub mod iptables;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::host::tool;
use crate::process::Run;

/// Where `ip netns` keeps its named namespaces.
pub const NETNS_DIR: &str = "/var/run/netns";

/// Notes one cleanup step: when it succeeded, `what` (its command line when `None`) joins
/// `removed`; when it failed, `failure` and the run go to stderr. Never panics.
pub fn note_step(r: Run, what: Option<String>, failure: &str, removed: &mut Vec<String>) {
    if r.success() {
        removed.push(what.unwrap_or(r.command));
    } else {
        eprintln!("berth-tests: {failure}\n{}", r.describe());
    }
}

/// Named network namespaces whose names start with `prefix`.
pub fn netns_with_prefix(prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(NETNS_DIR)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Deletes the named netns whose names start with `prefix`; returns their names.
pub fn delete_netns_with_prefix(prefix: &str) -> Vec<String> {
    let names = netns_with_prefix(prefix);
    for name in &names {
        let r = tool("ip", &["netns", "delete", name]);
        if !r.success() {
            eprintln!("berth-tests: cannot delete netns {name}\n{}", r.describe());
        }
    }
    names
}

/// Whether a network interface of that name exists in the host's namespace.
pub fn link_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

/// Deletes the interface (a bridge) if it exists; returns whether it did.
pub fn delete_link(name: &str) -> bool {
    if !link_exists(name) {
        return false;
    }
    let r = tool("ip", &["link", "delete", name]);
    if !r.success() {
        eprintln!("berth-tests: cannot delete link {name}\n{}", r.describe());
    }
    true
}

/// Decodes the octal escapes of `/proc/self/mountinfo` (`\040` is a space).
pub fn unescape_mount_path(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let v = (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Mount points at or under `dir` in `mountinfo` text, deepest first.
pub fn mounts_under(mountinfo: &str, dir: &Path) -> Vec<PathBuf> {
    let mut points: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape_mount_path(p)))
        .filter(|p| p.starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    points.dedup();
    points
}

/// Lazily unmounts everything mounted at or under `dir`; returns the mount points.
pub fn unmount_under(dir: &Path) -> Vec<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let points = mounts_under(&mountinfo, dir);
    for p in &points {
        let r = tool("umount", &["-l", &p.to_string_lossy()]);
        if !r.success() {
            eprintln!(
                "berth-tests: cannot unmount {}\n{}",
                p.display(),
                r.describe()
            );
        }
    }
    points
}

/// Process ids in `dir/cgroup.procs` and below.
fn cgroup_procs(dir: &Path, out: &mut Vec<i32>) {
    if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        out.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.path().is_dir() {
                cgroup_procs(&e.path(), out);
            }
        }
    }
}

fn remove_cgroup_tree(dir: &Path) -> bool {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.path().is_dir() {
                remove_cgroup_tree(&e.path());
            }
        }
    }
    std::fs::remove_dir(dir).is_ok() || !dir.exists()
}

/// Kills every process in the cgroups named `name` directly under each controller's root
/// (`/sys/fs/cgroup/<ctrl>/<name>`, where runc puts a containerd namespace's containers) and
/// removes those cgroup trees. Returns how many processes it killed.
pub fn kill_and_remove_cgroups(name: &str) -> usize {
    let roots: Vec<PathBuf> = std::fs::read_dir("/sys/fs/cgroup")
        .map(|e| e.flatten().map(|e| e.path().join(name)).collect())
        .unwrap_or_default();
    let roots: Vec<PathBuf> = std::iter::once(Path::new("/sys/fs/cgroup").join(name))
        .chain(roots)
        .filter(|p| p.is_dir())
        .collect();
    let mut pids = Vec::new();
    for r in &roots {
        cgroup_procs(r, &mut pids);
    }
    pids.sort_unstable();
    pids.dedup();
    for pid in &pids {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    // The kernel needs a moment to empty a cgroup after SIGKILL.
    let deadline = Instant::now() + Duration::from_secs(10);
    for r in &roots {
        while !remove_cgroup_tree(r) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if r.exists() {
            eprintln!("berth-tests: cannot remove cgroup {}", r.display());
        }
    }
    pids.len()
}

/// Processes whose command line contains every one of `needles` (NUL separators read as spaces).
pub fn processes_matching(needles: &[&str]) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if needles.iter().all(|n| cmdline.contains(n)) {
            found.push((pid, cmdline.trim_end().to_string()));
        }
    }
    found
}

/// SIGKILLs `pid` and waits (up to 5 s) for it to be gone; for processes that are not our
/// children (shims, container processes), which init reaps.
pub fn kill_pid(pid: i32) {
    let p = Pid::from_raw(pid);
    let _ = kill(p, Signal::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(5);
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        // A zombie waits for its parent; it no longer holds anything.
        if std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        }) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape_mount_path(r"/tmp/a\040b"), "/tmp/a b");
        assert_eq!(unescape_mount_path(r"/tmp/plain"), "/tmp/plain");
        assert_eq!(unescape_mount_path(r"/tmp/end\"), r"/tmp/end\");
    }

    #[test]
    fn mounts_under_a_dir_come_deepest_first_and_siblings_are_left_out() {
        let info = "\
36 35 0:31 / /tmp/berth-x rw - tmpfs tmpfs rw
37 36 0:32 / /tmp/berth-x/a/b rw - overlay overlay rw
38 36 0:33 / /tmp/berth-x/a rw - tmpfs tmpfs rw
39 35 0:34 / /tmp/berth-xy rw - tmpfs tmpfs rw
40 35 0:35 / /tmp/berth-x/with\\040space rw - tmpfs tmpfs rw
";
        let got = mounts_under(info, Path::new("/tmp/berth-x"));
        assert_eq!(got[0], PathBuf::from("/tmp/berth-x/a/b"));
        assert_eq!(got.last(), Some(&PathBuf::from("/tmp/berth-x")));
        assert!(got.contains(&PathBuf::from("/tmp/berth-x/with space")));
        assert!(!got.contains(&PathBuf::from("/tmp/berth-xy")));
        assert_eq!(got.len(), 4);
    }
}
