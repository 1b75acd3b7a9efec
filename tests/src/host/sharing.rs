//! Which real-container tests may share the host with another cluster, and which must run
//! alone: the classification behind [`super::lock::HostLock::acquire`].
//!
//! **Exclusive unless listed.** A test binary not in [`SHARED_BINARIES`] (a new suite, a
//! bench) takes the lock exclusively, as every test did before lanes existed: a new suite
//! that measures memory or disk on the host, times back-offs to the second or changes a
//! sysctl cannot be broken by a neighbour before anyone decided it may have one. A binary is
//! listed once its tests were read and found isolated: unique node, bridge, netns, containerd
//! namespace and cgroup-root names, a pod and service range leased per cluster
//! ([`super::tenancy`]), free ports, no fixed host paths. Tests of a listed binary share the
//! host unless [`EXCLUSIVE_TESTS`] names them, with the reason; a new test in a listed suite
//! shares it, so it must keep the suite's promise (its module doc says what that is) or be
//! added there. `BERTH_HOST_LOCK=exclusive` runs everything alone (to tell a concurrency
//! flake from a plain one).
//!
//! Planner: pure, no I/O (the running test's name is read by [`current_host_use`]).

use super::lock::HostUse;

/// Test binaries whose tests share the host unless [`EXCLUSIVE_TESTS`] says otherwise. Every
/// cluster in them names what it makes after its own suffix, takes its pod and service
/// ranges and test bed segments from a lease, and finds its ports free.
pub const SHARED_BINARIES: &[&str] = &[
    // berth-tests: clusters of real agents.
    "agent_api_aggregation",
    "agent_api_extensions",
    "agent_attach",
    "agent_certificates",
    "agent_config_volumes",
    "agent_crash",
    "agent_deletion",
    // Pods over their own local-storage limits, on a disk with room; its memory and
    // node-filesystem tests cross host-wide thresholds and run alone.
    "agent_eviction",
    "agent_failover",
    "agent_ha",
    "agent_ha_rollouts",
    "agent_harness",
    "agent_hostile_clients",
    // Its image filesystem is a tmpfs of its own: no neighbour fills it.
    "agent_image_gc",
    "agent_image_users",
    "agent_images",
    "agent_init",
    "agent_join_tokens",
    "agent_kubectl_compat",
    "agent_metrics",
    // Allocatable from the host's fixed capacity, cgroups under its own root; its fork bomb
    // runs alone.
    "agent_node_allocatable",
    "agent_network",
    "agent_node",
    // The OOM kill is its container's memory cgroup's (a 16Mi limit), not the host's.
    "agent_oom",
    "agent_port_forward",
    "agent_port_forward_ws",
    "agent_privileged",
    "agent_probes",
    "agent_proxy_subresources",
    "agent_pull_secrets",
    "agent_python_e2e",
    // Restart policies' outcomes; its two back-off tests, timed, run alone.
    "agent_restart",
    "agent_run",
    "agent_sandbox",
    "agent_seccomp",
    "agent_serviceaccount",
    "network_hosts",
    // The agents' ingress proxies listen on 80/443 inside the bed's host netns only; the
    // client is a host of the bed.
    "network_ingress",
    // Load-balancer addresses from a pool on its own bed segment, announced inside the bed's
    // host netns; the client is a host of the bed.
    "network_load_balancer",
    "network_localhost_node_ports",
    "network_pods",
    "node_lifecycle",
    "workloads_cronjob",
    "workloads_daemonset",
    "workloads_deployment",
    "workloads_disruption",
    "workloads_dns",
    "workloads_jobs",
    "workloads_pod_gc",
    "workloads_priority",
    "workloads_replicaset",
    "workloads_scheduling",
    "workloads_services",
    "workloads_statefulset",
    "workloads_volumes",
    // berth-agent's own integration tests: a private containerd or CNI networks of their own.
    "image",
    "network",
    "node_address",
    "runtime",
];

/// Tests that run alone although their binary is listed, or whose whole binary must (the
/// test name `*`), with the reason.
pub const EXCLUSIVE_TESTS: &[(&str, &str, &str)] = &[
    (
        "agent_eviction",
        "a_besteffort_pod_eating_memory_is_evicted_and_a_guaranteed_one_stays",
        "memory.available is the host's: another cluster's pods move it across the threshold",
    ),
    (
        "agent_eviction",
        "a_pod_filling_the_node_filesystem_is_evicted_after_node_reclaim_and_its_empty_dir_freed",
        "nodefs.available crossed on purpose, with node-level reclaim timed against it",
    ),
    (
        "agent_node_allocatable",
        "a_fork_bomb_stops_at_the_pod_pid_limit_and_the_node_keeps_serving",
        "a fork bomb under --pod-max-pids fills the host's CPUs and process table",
    ),
    (
        "agent_gc",
        "*",
        "ten crashes under a 1 s back-off cap and 50 MiB of followed logs, timed",
    ),
    (
        "agent_restart",
        "a_crashing_container_backs_off_10s_then_20s",
        "back-offs of 10 s, then 20 s measured to the second",
    ),
    (
        "agent_restart",
        "a_container_whose_command_does_not_exist_backs_off_10s_20s_then_40s",
        "back-offs of 10 s, 20 s, 40 s measured to the second",
    ),
    (
        "agent_teardown",
        "*",
        "asserts ip_forward and route_localnet are back to what the host had, which holds \
         only when no other cluster runs",
    ),
    (
        "agent_crash",
        "a_restarted_agent_adopts_running_containers_and_catches_up",
        "failed when paired (run 2 of the lanes): under load the pod that must fail once was \
         seen Ready before its first run exited, restartCount 0",
    ),
    (
        "agent_harness",
        "the_host_sweep_removes_tagged_netns_bridges_and_rules_only",
        "compares the host's whole iptables before and after",
    ),
    (
        "workloads_autoscaling",
        "*",
        "busy-looping pods fill both cores (disturbing every neighbour) and the scaling \
         follows their measured CPU",
    ),
    (
        "workloads_jobs",
        "failing_jobs_back_off_and_their_policies_decide_how_they_end",
        "retries after 10 s then 20 s, measured from the pods' timestamps",
    ),
    (
        "workloads_host_path",
        "*",
        "fixed host paths (/var/log, /var/lib/docker/containers) made and removed",
    ),
    (
        "node_lifecycle",
        "a_disk_pressure_threshold_above_the_free_space_taints_the_node_until_the_agent_drops_it",
        "a disk-pressure threshold just above the host's free space, which neighbours move",
    ),
];

/// How test `test` of binary `binary` uses the host; `None` for a name not known (a thread of
/// its own, `main`): exclusive, the safe side.
pub fn host_use(binary: &str, test: Option<&str>) -> HostUse {
    let named = |pattern: &str| pattern == "*" || test == Some(pattern);
    if EXCLUSIVE_TESTS
        .iter()
        .any(|(b, t, _)| *b == binary && named(t))
    {
        return HostUse::Exclusive;
    }
    if test.is_some() && SHARED_BINARIES.contains(&binary) {
        HostUse::Shared
    } else {
        HostUse::Exclusive
    }
}

/// The binary's name without cargo's `-<hash>` suffix (`agent_run-0123456789abcdef`).
pub fn binary_name(file_stem: &str) -> &str {
    match file_stem.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()) => {
            name
        }
        _ => file_stem,
    }
}

/// The test a process runs: the name after `--exact` (how nextest runs one test per process),
/// else the current thread's (libtest names each test's thread after it).
pub fn test_name(args: &[String], thread: Option<&str>) -> Option<String> {
    if args.iter().any(|a| a == "--exact") {
        return args.iter().skip(1).find(|a| !a.starts_with('-')).cloned();
    }
    thread.filter(|t| *t != "main").map(str::to_string)
}

/// How the running test uses the host (see the module doc).
pub fn current_host_use() -> HostUse {
    if std::env::var("BERTH_HOST_LOCK").is_ok_and(|v| v == "exclusive") {
        return HostUse::Exclusive;
    }
    let exe = std::env::current_exe().ok();
    let stem = exe
        .as_ref()
        .and_then(|p| p.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let args: Vec<String> = std::env::args().collect();
    let thread = std::thread::current();
    let test = test_name(&args, thread.name());
    host_use(binary_name(&stem), test.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tests_share_the_host_only_when_their_binary_is_listed_and_they_are_not_excepted() {
        let cases = [
            ("agent_run", Some("a_pod_runs"), HostUse::Shared),
            ("agent_run", None, HostUse::Exclusive),
            ("agent_gc", Some("anything"), HostUse::Exclusive),
            (
                "agent_eviction",
                Some("a_besteffort_pod_eating_memory_is_evicted_and_a_guaranteed_one_stays"),
                HostUse::Exclusive,
            ),
            (
                "agent_eviction",
                Some("pods_over_their_local_storage_limits_are_evicted_while_the_disk_has_room"),
                HostUse::Shared,
            ),
            ("a_new_suite", Some("anything"), HostUse::Exclusive),
            ("service_proxy", Some("bench"), HostUse::Exclusive),
            (
                "agent_harness",
                Some("the_host_sweep_removes_tagged_netns_bridges_and_rules_only"),
                HostUse::Exclusive,
            ),
            (
                "agent_harness",
                Some("a_cluster_without_agents_starts_and_stops_cleanly"),
                HostUse::Shared,
            ),
            (
                "workloads_jobs",
                Some("failing_jobs_back_off_and_their_policies_decide_how_they_end"),
                HostUse::Exclusive,
            ),
            (
                "workloads_cronjob",
                Some("with_jobs::a_job_runs"),
                HostUse::Shared,
            ),
            ("network", Some("setup_and_teardown_times"), HostUse::Shared),
        ];
        for (binary, test, want) in cases {
            assert_eq!(host_use(binary, test), want, "{binary} {test:?}");
        }
    }

    #[test]
    fn no_binary_is_both_listed_as_shared_and_wholly_exclusive() {
        for (b, t, _) in EXCLUSIVE_TESTS {
            assert!(
                !(*t == "*" && SHARED_BINARIES.contains(b)),
                "{b} is listed shared and wholly exclusive"
            );
        }
    }

    #[test]
    fn nextest_starts_every_exclusive_test_in_its_first_block() {
        // The harness enforces the classification; nextest's order only keeps an exclusive
        // test from waiting behind a long shared one (and being killed by its timeout).
        let config = include_str!("../../../.config/nextest.toml");
        let block = config
            .split("[[profile.default.overrides]]")
            .find(|b| b.contains("binary(agent_eviction)"))
            .expect("an override naming the exclusive tests");
        assert!(block.contains("priority = 100"), "{block}");
        for (binary, test, _) in EXCLUSIVE_TESTS {
            assert!(
                block.contains(&format!("binary({binary})")),
                "{binary} is missing from the exclusive override"
            );
            if *test != "*" {
                assert!(block.contains(&format!("test(={test})")), "{test}");
            }
        }
    }

    #[test]
    fn cargo_hashes_are_stripped_from_binary_names() {
        assert_eq!(binary_name("agent_run-0123456789abcdef"), "agent_run");
        assert_eq!(
            binary_name("node_lifecycle-fedcba9876543210"),
            "node_lifecycle"
        );
        assert_eq!(binary_name("agent_run"), "agent_run");
        assert_eq!(binary_name("port-forward"), "port-forward");
    }

    #[test]
    fn the_test_name_comes_from_exact_or_the_thread() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            test_name(
                &args(&["bin", "--exact", "clock::a", "--nocapture"]),
                Some("x")
            ),
            Some("clock::a".to_string())
        );
        assert_eq!(
            test_name(&args(&["bin", "--ignored", "--exact", "helper"]), None),
            Some("helper".to_string())
        );
        assert_eq!(
            test_name(&args(&["bin"]), Some("a_test")),
            Some("a_test".to_string())
        );
        assert_eq!(test_name(&args(&["bin"]), Some("main")), None);
        assert_eq!(test_name(&args(&["bin"]), None), None);
    }
}
