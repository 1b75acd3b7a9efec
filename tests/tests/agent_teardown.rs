//! The harness's promise: a cluster leaves the host as it found it, even when its test fails.
//! A two-agent cluster with running pods is dropped while a panic unwinds; afterwards no agent,
//! shim or container process of it is alive, and its netns, bridges, tagged iptables rules,
//! cgroups, mounts and temporary directories are gone, and `net.ipv4.ip_forward` and
//! `route_localnet` (set by the agents for localhost NodePorts) are back. And
//! when a test process is killed outright (no Drop runs), the next cluster to start removes
//! what it left, from its record. Clusters running at once leave `ip_forward` to the last of
//! them. These tests run alone on the host (`host::sharing`).

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use berth_tests::cluster::record::{RECORD_DIR, Record};
use berth_tests::host::{HostLock, ip_forward, route_localnet, tool_ok};
use berth_tests::pod_specs::{SLEEP_FOREVER, nginx_pod, sh_pod};
use berth_tests::process::alive;
use berth_tests::sweep::{link_exists, mounts_under, netns_with_prefix};
use berth_tests::{Cluster, ClusterConfig, secs, wait_for};

/// What the cluster had, to look for afterwards.
#[derive(Debug, Default)]
struct Footprint {
    pids: Vec<u32>,
    networks: Vec<String>,
    bridges: Vec<String>,
    namespaces: Vec<String>,
    dirs: Vec<PathBuf>,
}

#[test]
fn a_failing_test_still_leaves_the_host_as_it_found_it() {
    // Alone on the host for the whole test (`host::sharing` classifies it exclusive): another
    // cluster running would keep ip_forward and route_localnet from being put back.
    let _host = HostLock::acquire();
    let (forward_before, localnet_before) = (ip_forward(), route_localnet());
    let mut footprint = Footprint::default();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let c = Cluster::start(2);
        c.apply(&nginx_pod("web", c.node_name(0), "nginx:1.14.2"));
        c.apply(&sh_pod("shell", c.node_name(1), SLEEP_FOREVER));
        c.wait_for_pod_ready("default", "web", secs(90));
        c.wait_for_pod_ready("default", "shell", secs(90));
        for (i, a) in c.agents().iter().enumerate() {
            footprint.pids.extend(a.pid());
            footprint.networks.push(a.network_name());
            footprint.bridges.push(a.bridge().to_string());
            footprint.namespaces.push(a.namespace().to_string());
            footprint.dirs.push(a.dir().to_path_buf());
            assert!(!c.netns(i).is_empty(), "agent {i} has no pod netns");
            for t in c.containerd().tasks(a.namespace()) {
                footprint.pids.push(t.pid);
            }
        }
        footprint
            .pids
            .extend(c.containerd().shims().iter().map(|(p, _)| *p as u32));
        footprint.pids.extend(c.containerd().pid());
        footprint.pids.extend(c.controller().pid());
        footprint.dirs.push(c.containerd().dir().to_path_buf());
        footprint.dirs.push(c.scratch().to_path_buf());
        panic!("a test failing with its pods running");
    }));
    assert!(outcome.is_err(), "the closure must have panicked");
    assert!(footprint.pids.len() >= 6, "{footprint:?}");

    let _lock = HostLock::acquire();
    for pid in &footprint.pids {
        assert!(!alive(*pid), "process {pid} outlived its cluster");
    }
    for net in &footprint.networks {
        assert_eq!(netns_with_prefix(&format!("{net}-")), Vec::<String>::new());
        for table in ["filter", "nat"] {
            let rules = tool_ok("iptables-save", &["-t", table]);
            assert!(
                !rules.contains(&format!("\\\"{net}\\\""))
                    && !rules.contains(&format!("berth:{net} ")),
                "{table} still has rules of {net}:\n{rules}"
            );
        }
    }
    for bridge in &footprint.bridges {
        assert!(!link_exists(bridge), "bridge {bridge} is still there");
    }
    for ns in &footprint.namespaces {
        for ctrl in ["memory", "pids", "cpu", "blkio"] {
            let cg = Path::new("/sys/fs/cgroup").join(ctrl).join(ns);
            assert!(!cg.exists(), "{} is still there", cg.display());
        }
        assert!(!Path::new("/run/containerd/runc").join(ns).exists());
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    for dir in &footprint.dirs {
        assert_eq!(mounts_under(&mountinfo, dir), Vec::<PathBuf>::new());
        assert!(!dir.exists(), "{} is still there", dir.display());
    }
    assert_eq!(ip_forward(), forward_before);
    assert_eq!(route_localnet(), localnet_before);
}

/// Writes `net.ipv4.ip_forward` back to what it was when dropped.
struct ForwardGuard(Option<String>);

impl Drop for ForwardGuard {
    fn drop(&mut self) {
        if let Some(v) = &self.0 {
            let _ = std::fs::write("/proc/sys/net/ipv4/ip_forward", v);
        }
    }
}

/// Clusters running at once hold `ip_forward` in common: the first in records it, and only
/// the last one out puts it back, so a cluster finishing first does not switch forwarding off
/// under one still running (each used to restore what it alone had found).
#[test]
fn only_the_last_cluster_out_puts_ip_forward_back() {
    let _host = HostLock::acquire();
    // A session whose last cluster was killed is closed first (its originals put back), so
    // that the value written below is what the first cluster finds.
    berth_tests::host::tenancy::release_dead();
    let _restore = ForwardGuard(ip_forward());
    std::fs::write("/proc/sys/net/ipv4/ip_forward", "0").unwrap();
    let first = Cluster::start_with(ClusterConfig::agents(0));
    // What a pod on the first cluster's bridge does (the CNI bridge plugin turns it on).
    std::fs::write("/proc/sys/net/ipv4/ip_forward", "1").unwrap();
    let second = Cluster::start_with(ClusterConfig::agents(0));
    assert_ne!(first.cluster_cidr(), second.cluster_cidr());
    assert_ne!(first.service_cidr(), second.service_cidr());
    drop(first);
    assert_eq!(
        ip_forward().as_deref(),
        Some("1"),
        "the second cluster still runs: forwarding stays on"
    );
    drop(second);
    assert_eq!(
        ip_forward().as_deref(),
        Some("0"),
        "the last one out puts back what the first one found"
    );
}

/// Set for the child process of the killed-test scenario: the file to write once its cluster
/// runs pods.
const HELPER_ENV: &str = "BERTH_TEST_HELPER_READY";

/// Not a test on its own: the child that the test below kills. Starts a cluster with a pod,
/// says so, then blocks on stdin until it is killed.
#[test]
#[ignore = "run by a_killed_test_process_is_cleaned_up_by_the_next_cluster"]
fn helper_cluster_that_gets_killed() {
    let Some(ready) = std::env::var_os(HELPER_ENV) else {
        return;
    };
    let c = Cluster::start(1);
    c.apply(&sh_pod("orphan", c.node_name(0), SLEEP_FOREVER));
    c.wait_for_pod_ready("default", "orphan", secs(90));
    std::fs::write(&ready, std::process::id().to_string()).unwrap();
    let mut byte = [0u8; 1];
    let _ = std::io::stdin().read(&mut byte);
}

#[test]
fn a_killed_test_process_is_cleaned_up_by_the_next_cluster() {
    // Held alone from the child's start to the sweep: a test taking the lock between the
    // child's death and the checks below would sweep its orphans first (or find its agent
    // turning ip_forward on under it).
    let _host = HostLock::exclusive();
    let ready = tempfile::tempdir().unwrap();
    let ready_file = ready.path().join("ready");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "helper_cluster_that_gets_killed",
            "--nocapture",
        ])
        .env(HELPER_ENV, &ready_file)
        .env(berth_tests::host::lock::LENT_ENV, "exclusive")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let child_pid = child.id();
    let found = wait_for(secs(120), "the helper's cluster running a pod", || {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the helper exited with {status} before its cluster was ready");
        }
        if !ready_file.exists() {
            return Err("no ready file yet".to_string());
        }
        let path = Path::new(RECORD_DIR).join(format!("{child_pid}-"));
        let prefix = path.to_string_lossy().into_owned();
        std::fs::read_dir(RECORD_DIR)
            .map_err(|e| e.to_string())?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().starts_with(&prefix))
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| serde_json::from_str::<Record>(&t).ok())
            .ok_or_else(|| "no record of the helper yet".to_string())
    });
    child.kill().unwrap();
    child.wait().unwrap();
    // Its agent, controller, registry and containerd outlive it: nothing ran its Drop.
    let orphans: Vec<u32> = found
        .processes
        .iter()
        .map(|(pid, _)| *pid)
        .filter(|pid| alive(*pid))
        .collect();
    assert_eq!(orphans.len(), found.processes.len(), "{found:#?}");
    assert!(!netns_with_prefix(&format!("{}-", found.networks[0])).is_empty());

    // The next cluster sweeps them up before it starts.
    drop(Cluster::start_with(ClusterConfig::agents(0)));
    for (pid, exe) in &found.processes {
        assert!(!alive(*pid), "{} ({pid}) is still running", exe.display());
    }
    assert!(
        found.processes.len() >= 4,
        "agent, controller, registry, containerd: {found:#?}"
    );
    assert_eq!(
        netns_with_prefix(&format!("{}-", found.networks[0])),
        Vec::<String>::new()
    );
    assert!(!link_exists(&found.bridges[0]));
    for dir in &found.dirs {
        assert!(!dir.exists(), "{} is still there", dir.display());
    }
    let shims = berth_tests::sweep::processes_matching(&[
        "containerd-shim",
        &found.containerd_socket.to_string_lossy(),
    ]);
    assert!(shims.is_empty(), "{shims:?}");
    let cg = Path::new("/sys/fs/cgroup/memory").join(&found.namespaces[0]);
    assert!(!cg.exists(), "{} is still there", cg.display());
}
