//! Reads containers' cgroups: whether the OOM killer hit one, and what a cgroup (a container, a
//! pod, the whole node) has used — cumulative CPU time and the memory working set, as cAdvisor
//! reads them for the kubelet.
//!
//! Under cgroup v1 the OOM counter is `oom_kill` in `memory.oom_control` (kernel 4.13+), under
//! cgroup v2 `oom_kill` in `memory.events`. The cgroup stays readable after the task exits
//! until the task is deleted, so this works for a stopped task. CPU time is `cpuacct.usage`
//! (v1, nanoseconds) or `usage_usec` in `cpu.stat` (v2); the working set is the usage less the
//! inactive file cache (`memory.usage_in_bytes` less `total_inactive_file` under v1,
//! `memory.current` less `inactive_file` under v2). The v2 root has no `memory.current`: the
//! node's working set there comes from `/proc/meminfo` (used memory less inactive file pages).

use std::path::{Path, PathBuf};

const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// Whether the kernel OOM-killed a process in the cgroup at `cgroups_path` (the spec's
/// `linux.cgroupsPath`). Missing files mean "no".
pub(crate) fn oom_killed(cgroups_path: &str) -> bool {
    let rel = cgroups_path.trim_start_matches('/');
    let root = Path::new(CGROUP_ROOT);
    let (file, key): (PathBuf, &str) = if root.join("cgroup.controllers").exists() {
        (root.join(rel).join("memory.events"), "oom_kill")
    } else {
        (
            root.join("memory").join(rel).join("memory.oom_control"),
            "oom_kill",
        )
    };
    std::fs::read_to_string(file)
        .map(|text| counter(&text, key) > 0)
        .unwrap_or(false)
}

/// What a cgroup has used; `None` for what could not be read (no such cgroup, no controller).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Cumulative CPU time, in nanoseconds.
    pub cpu_ns: Option<u64>,
    /// Memory in use less the inactive file cache, in bytes.
    pub working_set: Option<u64>,
}

fn unified(root: &Path) -> bool {
    root.join("cgroup.controllers").exists()
}

fn read(path: PathBuf) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn number(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// What the cgroup at `cgroups_path` (a container's `linux.cgroupsPath`, or a pod's parent of
/// those) has used.
pub(crate) fn usage(cgroups_path: &str) -> Usage {
    let rel = cgroups_path.trim_start_matches('/');
    let root = Path::new(CGROUP_ROOT);
    if unified(root) {
        let dir = root.join(rel);
        Usage {
            cpu_ns: read(dir.join("cpu.stat"))
                .and_then(|t| key_value(&t, "usage_usec"))
                .map(|us| us.saturating_mul(1000)),
            working_set: working_set(
                read(dir.join("memory.current")).as_deref(),
                read(dir.join("memory.stat")).as_deref(),
                "inactive_file",
            ),
        }
    } else {
        Usage {
            cpu_ns: read(root.join("cpuacct").join(rel).join("cpuacct.usage"))
                .and_then(|t| number(&t)),
            working_set: working_set(
                read(root.join("memory").join(rel).join("memory.usage_in_bytes")).as_deref(),
                read(root.join("memory").join(rel).join("memory.stat")).as_deref(),
                "total_inactive_file",
            ),
        }
    }
}

/// What the whole node has used (the root cgroup; `/proc/meminfo` for memory under v2).
pub(crate) fn node_usage() -> Usage {
    let root = Path::new(CGROUP_ROOT);
    if unified(root) {
        Usage {
            cpu_ns: read(root.join("cpu.stat"))
                .and_then(|t| key_value(&t, "usage_usec"))
                .map(|us| us.saturating_mul(1000)),
            working_set: read(PathBuf::from("/proc/meminfo")).and_then(|t| meminfo_working_set(&t)),
        }
    } else {
        usage("/")
    }
}

/// How many tasks (processes and threads) the cgroup at `cgroups_path` holds, from the pids
/// controller's `pids.current` (what the kubelet's eviction manager ranks pods by under PID
/// pressure); `None` without the controller or the cgroup.
pub(crate) fn pids(cgroups_path: &str) -> Option<u64> {
    let rel = cgroups_path.trim_start_matches('/');
    let root = Path::new(CGROUP_ROOT);
    let dir = if unified(root) {
        root.join(rel)
    } else {
        root.join("pids").join(rel)
    };
    read(dir.join("pids.current")).and_then(|t| number(&t))
}

/// `usage` less the inactive file pages named `inactive_key` in `stat`, as cAdvisor computes
/// the working set; `None` without a usage.
fn working_set(usage: Option<&str>, stat: Option<&str>, inactive_key: &str) -> Option<u64> {
    let usage = number(usage?)?;
    let inactive = stat.and_then(|s| key_value(s, inactive_key)).unwrap_or(0);
    Some(usage.saturating_sub(inactive))
}

/// The node's working set from `/proc/meminfo`: `MemTotal - MemFree - Inactive(file)`, in bytes.
fn meminfo_working_set(text: &str) -> Option<u64> {
    let kib = |key: &str| {
        text.lines().find_map(|l| {
            let rest = l.strip_prefix(key)?.strip_prefix(':')?;
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    let used = kib("MemTotal")?.saturating_sub(kib("MemFree")?);
    Some(used.saturating_sub(kib("Inactive(file)").unwrap_or(0)) * 1024)
}

/// The value of `key` in a `name value` per line file, if there.
fn key_value(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .filter_map(|line| line.split_once(' '))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.trim().parse().ok())
}

/// The value of `key` in a `name value` per line file.
fn counter(text: &str, key: &str) -> u64 {
    text.lines()
        .filter_map(|line| line.split_once(' '))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::{counter, key_value, meminfo_working_set, working_set};

    #[test]
    fn the_working_set_is_the_usage_less_inactive_file_pages() {
        let v1_stat = "cache 100\ninactive_file 7\ntotal_inactive_file 300\n";
        let v2_stat = "anon 10\nfile 50\ninactive_file 40\n";
        let cases = [
            (
                "v1 counts the hierarchy's inactive file pages",
                Some("1000\n"),
                Some(v1_stat),
                "total_inactive_file",
                Some(700),
            ),
            (
                "v2 counts its own",
                Some("1000\n"),
                Some(v2_stat),
                "inactive_file",
                Some(960),
            ),
            (
                "no stat file: the usage alone",
                Some("1000\n"),
                None,
                "inactive_file",
                Some(1000),
            ),
            (
                "never below zero",
                Some("10\n"),
                Some(v1_stat),
                "total_inactive_file",
                Some(0),
            ),
            (
                "no usage: nothing",
                None,
                Some(v2_stat),
                "inactive_file",
                None,
            ),
            (
                "garbage usage: nothing",
                Some("max\n"),
                Some(v2_stat),
                "inactive_file",
                None,
            ),
        ];
        for (name, usage, stat, key, want) in cases {
            assert_eq!(working_set(usage, stat, key), want, "{name}");
        }
    }

    #[test]
    fn v2_cpu_time_is_read_from_cpu_stat() {
        let stat = "usage_usec 123456\nuser_usec 100000\nsystem_usec 23456\n";
        assert_eq!(key_value(stat, "usage_usec"), Some(123_456));
        assert_eq!(key_value("user_usec 1\n", "usage_usec"), None);
    }

    #[test]
    fn the_v2_nodes_working_set_comes_from_meminfo() {
        let meminfo = "MemTotal:       24000000 kB\nMemFree:         4000000 kB\nMemAvailable:   20000000 kB\nInactive(file):  6000000 kB\n";
        assert_eq!(meminfo_working_set(meminfo), Some(14_000_000 * 1024));
        assert_eq!(meminfo_working_set("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn oom_counter_is_read_from_the_key_value_file() {
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n";
        assert_eq!(counter(v1, "oom_kill"), 1);
        assert_eq!(counter("oom_kill_disable 0\nunder_oom 0\n", "oom_kill"), 0);
        assert_eq!(
            counter("low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\n", "oom_kill"),
            2
        );
        assert_eq!(counter("", "oom_kill"), 0);
    }
}
