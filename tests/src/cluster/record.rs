//! A cluster's record on the host: which processes, containerd namespaces, CNI networks,
//! bridges, test bed and directories it owns, kept in `/run/berth-tests/` while it runs. A test process
//! killed outright (nextest's timeout, a SIGKILL) never runs its Drop; the next cluster to start
//! finds the record of a dead owner and removes exactly what it lists (processes only if their
//! executable is still the recorded one, so a reused PID is never hit).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Cluster;
use crate::agent::Agent;
use crate::containerd::shim_socket;
use crate::host::tenancy::alive;
use crate::sweep::{self, iptables};
use crate::testbed::{Leftovers, TestBed};

/// Where records live (tmpfs: a reboot clears them along with what they describe).
pub const RECORD_DIR: &str = "/run/berth-tests";

/// Everything a cluster must remove when it goes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The test process that owns the cluster.
    pub owner: u32,
    /// (pid, executable) of the agents, controller, registry and containerd.
    pub processes: Vec<(u32, PathBuf)>,
    pub containerd_socket: PathBuf,
    pub namespaces: Vec<String>,
    pub networks: Vec<String>,
    pub bridges: Vec<String>,
    /// Temporary directories (unmounted below, then removed).
    pub dirs: Vec<PathBuf>,
    /// The test bed the agents ran in, if any (removed after the agents' pods).
    #[serde(default)]
    pub testbed: Option<Leftovers>,
}

/// The executable of a running process.
pub fn executable(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe")).ok()
}

impl Record {
    fn path(&self, name: &str) -> PathBuf {
        Path::new(RECORD_DIR).join(format!("{name}.json"))
    }

    /// Writes (or rewrites) the record as `<RECORD_DIR>/<name>.json`; failures are reported,
    /// not raised: the record only matters if the test process dies.
    pub fn save(&self, name: &str) {
        let path = self.path(name);
        let write = std::fs::create_dir_all(RECORD_DIR).and_then(|()| {
            let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, text)?;
            std::fs::rename(&tmp, &path)
        });
        if let Err(e) = write {
            eprintln!("berth-tests: cannot write {}: {e}", path.display());
        }
    }

    /// Removes the record (and the record directory once empty).
    pub fn forget(&self, name: &str) {
        let _ = std::fs::remove_file(self.path(name));
        let _ = std::fs::remove_dir(RECORD_DIR);
    }

    /// Removes everything the record lists; returns one line per thing removed.
    pub fn sweep(&self) -> Vec<String> {
        let mut removed = Vec::new();
        for (pid, exe) in &self.processes {
            if executable(*pid).as_deref() == Some(exe.as_path()) {
                sweep::kill_pid(i32::try_from(*pid).unwrap_or(i32::MAX));
                removed.push(format!("process {pid} ({})", exe.display()));
            }
        }
        let socket = self.containerd_socket.to_string_lossy().into_owned();
        for (pid, cmdline) in sweep::processes_matching(&["containerd-shim", &socket]) {
            sweep::kill_pid(pid);
            if let Some(s) = shim_socket(&cmdline) {
                let _ = std::fs::remove_file(s);
            }
            removed.push(format!("shim {pid}"));
        }
        for ns in &self.namespaces {
            let n = sweep::kill_and_remove_cgroups(ns);
            if n > 0 {
                removed.push(format!("container processes {n} in {ns}"));
            }
            let _ = std::fs::remove_dir_all(Path::new("/run/containerd/runc").join(ns));
            let _ = std::fs::remove_dir_all(Path::new("/run/berth").join(ns));
        }
        for net in &self.networks {
            for ns in sweep::delete_netns_with_prefix(&format!("{net}-")) {
                removed.push(format!("netns {ns}"));
            }
        }
        for bridge in &self.bridges {
            if sweep::delete_link(bridge) {
                removed.push(format!("bridge {bridge}"));
            }
        }
        if !self.networks.is_empty() {
            removed.extend(iptables::sweep_networks(&self.networks));
            removed.extend(sweep::ipset::sweep_networks(&self.networks));
        }
        if let Some(bed) = &self.testbed {
            removed.extend(bed.remove());
        }
        for dir in &self.dirs {
            sweep::unmount_under(dir);
            if std::fs::remove_dir_all(dir).is_ok() {
                removed.push(format!("dir {}", dir.display()));
            }
        }
        // The host's shared state (sysctls, portmap's chains) is the tenants' business: the
        // dead owner's tenancy is dropped by `host::tenancy::release_dead`.
        removed
    }
}

impl Cluster {
    /// What this cluster owns on the host, as its record lists it.
    pub fn record(&self) -> Record {
        let mut processes = Vec::new();
        let pids = self.agents.iter().map(Agent::pid).chain([
            self.controller.pid(),
            self.registry.pid(),
            self.containerd.pid(),
        ]);
        for pid in pids.flatten() {
            if let Some(exe) = executable(pid) {
                processes.push((pid, exe));
            }
        }
        let mut dirs: Vec<PathBuf> = self.agents.iter().map(|a| a.dir().to_path_buf()).collect();
        dirs.extend([
            self.controller.scratch().to_path_buf(),
            self.registry.dir().to_path_buf(),
            self.containerd.dir().to_path_buf(),
            self.scratch().to_path_buf(),
        ]);
        Record {
            owner: std::process::id(),
            processes,
            containerd_socket: self.containerd.socket().to_path_buf(),
            namespaces: self
                .agents
                .iter()
                .map(|a| a.namespace().to_string())
                .collect(),
            networks: self.agents.iter().map(Agent::network_name).collect(),
            bridges: self.agents.iter().map(|a| a.bridge().to_string()).collect(),
            dirs,
            testbed: self.bed.as_ref().map(TestBed::leftovers),
        }
    }

    pub(super) fn save_record(&self) {
        self.record().save(&self.record_name);
    }
}

/// Sweeps the records of clusters whose test process is gone (call inside
/// `host::tenancy::critical`, so that two clusters starting at once do not both sweep one).
pub fn recover_abandoned() {
    let Ok(entries) = std::fs::read_dir(RECORD_DIR) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let Some(record) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<Record>(&t).ok())
        else {
            continue;
        };
        if alive(record.owner) {
            continue;
        }
        let removed = record.sweep();
        eprintln!(
            "berth-tests: removed what a killed test (pid {}) left: {}",
            record.owner,
            if removed.is_empty() {
                "nothing".to_string()
            } else {
                removed.join(", ")
            }
        );
        let _ = std::fs::remove_file(&path);
    }
    let _ = std::fs::remove_dir(RECORD_DIR);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_survives_a_round_trip_through_json() {
        let r = Record {
            owner: 42,
            processes: vec![(43, PathBuf::from("/usr/bin/containerd"))],
            containerd_socket: PathBuf::from("/tmp/x/containerd.sock"),
            namespaces: vec!["berth-test-abc-a".into()],
            networks: vec!["berth-node-a-abc".into()],
            bridges: vec!["btabca".into()],
            dirs: vec![PathBuf::from("/tmp/berth-agent-x")],
            testbed: Some(Leftovers {
                routes: vec![vec![
                    "172.31.8.0/24".into(),
                    "via".into(),
                    "172.31.7.254".into(),
                ]],
                links: vec!["bvabca".into(), "tbabc".into()],
                netns: vec!["bhabca".into(), "brabc".into()],
                forward_rule: None,
            }),
        };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), r);
    }

    #[test]
    fn a_record_written_before_test_beds_existed_still_reads() {
        let r = Record {
            owner: 42,
            ..Record::default()
        };
        let mut json = serde_json::to_value(&r).unwrap();
        json.as_object_mut().unwrap().remove("testbed");
        assert_eq!(serde_json::from_value::<Record>(json).unwrap(), r);
    }

    #[test]
    fn a_record_of_a_cluster_that_restored_sysctls_itself_still_reads() {
        let json = serde_json::json!({
            "owner": 42, "processes": [], "containerd_socket": "/x.sock", "namespaces": [],
            "networks": [], "bridges": [], "dirs": [],
            "iptables_before": {"nat": ["POSTROUTING"]}, "ip_forward": "0",
            "route_localnet": "0"
        });
        let r = serde_json::from_value::<Record>(json).unwrap();
        assert_eq!(r.owner, 42);
    }

    #[test]
    fn our_own_process_is_alive_and_has_an_executable() {
        assert!(alive(std::process::id()));
        assert!(executable(std::process::id()).is_some());
    }
}
