//! Reads a container's memory cgroup to tell whether the OOM killer hit it.
//!
//! Under cgroup v1 the counter is `oom_kill` in `memory.oom_control` (kernel 4.13+), under
//! cgroup v2 `oom_kill` in `memory.events`. The cgroup stays readable after the task exits
//! until the task is deleted, so this works for a stopped task.

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
    use super::counter;

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
