//! Issue 31 acceptance 5: reserved resources and QoS cgroups. `--system-reserved` lowers the
//! Node's allocatable by exactly the reservation plus the hard memory threshold; pods run in the
//! kubelet's `kubepods` hierarchy (Guaranteed in `kubepods`, the others in their tier) under the
//! agent's cgroup root `/<containerd namespace>`, `kubepods` limited to capacity less the
//! reservation; containers carry the kubelet's OOM score adjustment; and `--pod-max-pids`
//! stops a fork bomb at its pod's limit while the node keeps serving.
//!
//! These machines run cgroup v1: the files read are under `/sys/fs/cgroup/<controller>/`.

use berth_tests::cluster::{AgentOptions, ClusterConfig};
use berth_tests::pod_specs::{SLEEP_FOREVER, bound_pod, sh_container, sh_pod};
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, secs};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const GI: i64 = 1 << 30;
const MI: i64 = 1 << 20;
/// The harness's `memory.available` hard threshold (`TEST_EVICTION_HARD`).
const HARD_MEMORY: i64 = 100 * MI;

fn cluster(extra: &[&str]) -> Cluster {
    Cluster::start_with(ClusterConfig {
        agents: vec![AgentOptions {
            extra_args: extra.iter().map(|s| s.to_string()).collect(),
            ..AgentOptions::default()
        }],
        ..ClusterConfig::agents(1)
    })
}

/// `/sys/fs/cgroup/<controller>/<rel>`.
fn cgroup(controller: &str, rel: &str) -> PathBuf {
    Path::new("/sys/fs/cgroup")
        .join(controller)
        .join(rel.trim_start_matches('/'))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_string()
}

/// An integer, or a panic naming `what`.
fn int(s: &str, what: &str) -> i64 {
    s.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{what}: {s:?} is not an integer"))
}

/// Bytes of a memory quantity as the Node prints it (`…Ki` or plain bytes).
fn bytes(q: &Value) -> i64 {
    let s = q.as_str().unwrap_or_else(|| panic!("not a quantity: {q}"));
    match s.strip_suffix("Ki") {
        Some(ki) => int(ki, "KiB") * 1024,
        None => int(s, "bytes"),
    }
}

fn millicores(q: &Value) -> i64 {
    let s = q.as_str().unwrap_or_else(|| panic!("not a quantity: {q}"));
    match s.strip_suffix('m') {
        Some(m) => int(m, "millicores"),
        None => int(s, "cores") * 1000,
    }
}

fn uid(c: &Cluster, name: &str) -> String {
    let pod = c
        .pod("default", name)
        .unwrap_or_else(|| panic!("no pod {name}"));
    pod["metadata"]["uid"]
        .as_str()
        .unwrap_or_else(|| panic!("pod {name} has no uid"))
        .to_string()
}

/// The pids of the running tasks of pod `name` (its containers' main processes).
fn task_pids(c: &Cluster, name: &str) -> Vec<u32> {
    let ids = c.ctr(
        0,
        &[
            "containers",
            "ls",
            "-q",
            &format!("labels.\"io.berth.pod.uid\"=={}", uid(c, name)),
        ],
    );
    let tasks = c.running_tasks(0);
    ids.lines()
        .filter_map(|id| tasks.get(id.trim()).copied())
        .collect()
}

/// The process's cgroup in the v1 `memory` hierarchy (from `/proc/<pid>/cgroup`).
fn memory_cgroup_of(pid: u32) -> String {
    read(Path::new(&format!("/proc/{pid}/cgroup")))
        .lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers
                .split(',')
                .any(|c| c == "memory")
                .then(|| path.to_string())
        })
        .unwrap_or_else(|| panic!("pid {pid} has no memory cgroup"))
}

fn oom_score_adj(pid: u32) -> i64 {
    int(
        &read(Path::new(&format!("/proc/{pid}/oom_score_adj"))),
        "oom_score_adj",
    )
}

/// The OOM score adjustment a container gets for `wanted` on this host: without
/// `CAP_SYS_RESOURCE` (bit 24 of the bounding set) a score cannot go below the agent's own
/// (containerd's `restrict_oom_score_adj`), which is this process's here.
fn on_this_host(wanted: i64) -> i64 {
    let status = read(Path::new("/proc/self/status"));
    let bounding = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(u64::MAX);
    if bounding & (1 << 24) != 0 {
        wanted
    } else {
        wanted.max(oom_score_adj(std::process::id()))
    }
}

fn pod_with(name: &str, node: &str, resources: Value) -> Value {
    let mut main = sh_container("main", SLEEP_FOREVER);
    main["resources"] = resources;
    bound_pod(name, node, json!({"containers": [main]}))
}

#[test]
fn reserved_resources_shape_allocatable_and_the_qos_cgroups() {
    let mut c = cluster(&["--system-reserved", "memory=1Gi,cpu=500m"]);
    let node = c.node_name(0).to_string();
    let ns = c.agent(0).namespace().to_string();

    // Allocatable = capacity − system-reserved − the hard memory threshold.
    let n = c
        .get(&format!("/api/v1/nodes/{node}"))
        .unwrap_or_else(|| panic!("no node {node}"));
    let (cap, alloc) = (&n["status"]["capacity"], &n["status"]["allocatable"]);
    let capacity_memory = bytes(&cap["memory"]);
    assert_eq!(
        capacity_memory - bytes(&alloc["memory"]),
        GI + HARD_MEMORY,
        "{:#}",
        n["status"]
    );
    assert_eq!(
        millicores(&cap["cpu"]) - millicores(&alloc["cpu"]),
        500,
        "{:#}",
        n["status"]
    );

    // kubepods: capacity − reserved (no eviction threshold), as the kubelet's
    // enforce-node-allocatable=pods; the kernel keeps whole pages of the limit.
    let kubepods = format!("{ns}/kubepods");
    let limit = int(
        &read(&cgroup("memory", &kubepods).join("memory.limit_in_bytes")),
        "kubepods memory.limit_in_bytes",
    );
    assert_eq!(limit, (capacity_memory - GI) / 4096 * 4096);
    let allocatable_cpu = millicores(&alloc["cpu"]);
    assert_eq!(
        read(&cgroup("cpu", &kubepods).join("cpu.shares")),
        (allocatable_cpu * 1024 / 1000).to_string()
    );
    assert_eq!(
        read(&cgroup("cpu", &format!("{kubepods}/besteffort")).join("cpu.shares")),
        "2"
    );

    let guaranteed = json!({"requests": {"cpu": "100m", "memory": "32Mi"},
                            "limits": {"cpu": "100m", "memory": "32Mi"}});
    c.apply(&pod_with("guaranteed", &node, guaranteed));
    c.apply(&sh_pod("besteffort", &node, SLEEP_FOREVER));
    c.apply(&pod_with(
        "burstable",
        &node,
        json!({"requests": {"cpu": "200m", "memory": "64Mi"}}),
    ));
    for p in ["guaranteed", "besteffort", "burstable"] {
        c.wait_for_pod_ready("default", p, secs(90));
    }

    let expect = [
        (
            "guaranteed",
            format!("/{kubepods}/pod{}/", uid(&c, "guaranteed")),
            -997,
        ),
        (
            "besteffort",
            format!("/{kubepods}/besteffort/pod{}/", uid(&c, "besteffort")),
            1000,
        ),
        (
            "burstable",
            format!("/{kubepods}/burstable/pod{}/", uid(&c, "burstable")),
            // Upstream's policy: 1000 − 1000 × request / memory capacity.
            1000 - 1000 * 64 * MI / capacity_memory,
        ),
    ];
    for (pod, parent, adj) in &expect {
        let pids = task_pids(&c, pod);
        assert_eq!(pids.len(), 1, "{pod}: one running container");
        let cg = memory_cgroup_of(pids[0]);
        assert!(cg.starts_with(parent), "{pod}: in {cg}, not under {parent}");
        assert_eq!(
            oom_score_adj(pids[0]),
            on_this_host(*adj),
            "{pod}'s oom_score_adj"
        );
    }
    // The Burstable tier's shares are its pods' cpu requests; the pod cgroups carry theirs.
    let burstable_tier = cgroup("cpu", &format!("{kubepods}/burstable"));
    assert_eq!(read(&burstable_tier.join("cpu.shares")), "204");
    let guaranteed_pod = cgroup(
        "memory",
        &format!("{kubepods}/pod{}", uid(&c, "guaranteed")),
    );
    assert_eq!(
        read(&guaranteed_pod.join("memory.limit_in_bytes")),
        (32 * MI).to_string()
    );

    // A pod that goes takes its cgroup along and its share of the tier.
    let burstable_pod = cgroup(
        "cpu",
        &format!("{kubepods}/burstable/pod{}", uid(&c, "burstable")),
    );
    c.delete_pod("default", "burstable");
    c.wait_pod_gone("default", "burstable", secs(60));
    c.wait_for(secs(30), "the burstable pod's cgroup to go", || {
        let shares = read(&burstable_tier.join("cpu.shares"));
        if burstable_pod.exists() || shares != "2" {
            Err(format!(
                "{} exists: {}, tier shares {shares}",
                burstable_pod.display(),
                burstable_pod.exists()
            ))
        } else {
            Ok(())
        }
    });

    // `berth-agent uninstall` removes the agent's cgroups with its containers.
    c.agent_mut(0).terminate();
    let run = c.agent(0).uninstall();
    assert!(run.success(), "{}", run.describe());
    for controller in ["memory", "cpu", "pids", "freezer"] {
        let root = cgroup(controller, &ns);
        assert!(!root.exists(), "{} is left after uninstall", root.display());
    }
}

#[test]
fn a_fork_bomb_stops_at_the_pod_pid_limit_and_the_node_keeps_serving() {
    let c = cluster(&["--pod-max-pids", "100"]);
    let node = c.node_name(0).to_string();
    let ns = c.agent(0).namespace().to_string();
    // busybox's sh exits when a fork fails; the outer loop starts the bomb again from the slot
    // its exit frees, so the pod keeps pressing against its limit.
    c.apply(&sh_pod(
        "forker",
        &node,
        "while true; do sh -c 'while true; do sleep 1000 & done' 2>/dev/null; done",
    ));
    c.wait_for_pod_phase("default", "forker", "Running", secs(90));
    let pod_cgroup = cgroup(
        "pids",
        &format!("{ns}/kubepods/besteffort/pod{}", uid(&c, "forker")),
    );
    assert_eq!(read(&pod_cgroup.join("pids.max")), "100");
    let current = |p: &Path| -> i64 { int(&read(&p.join("pids.current")), "pids.current") };
    // pids.current is hierarchical: the pod's containers' tasks. (Where a refused fork is
    // counted in pids.events differs between kernels, so it is not read.)
    c.wait_for(secs(60), "the fork bomb to reach its limit", || {
        let now = current(&pod_cgroup);
        if now >= 95 {
            Ok(())
        } else {
            let pod = c.pod("default", "forker").unwrap_or_default();
            Err(format!(
                "{now} tasks; {:#}",
                pod["status"]["containerStatuses"]
            ))
        }
    });
    let peak = pod_cgroup.join("pids.peak");
    c.ensure_for(secs(5), "the pod to stay within 100 tasks", || {
        let now = current(&pod_cgroup);
        let most = if peak.exists() {
            read(&peak).parse().unwrap_or(now)
        } else {
            now
        };
        ok_if(now <= 100 && most <= 100, (now, most))
    });

    // The node still starts pods and runs exec in them.
    c.apply(&sh_pod("neighbour", &node, SLEEP_FOREVER));
    c.wait_for_pod_ready("default", "neighbour", secs(90));
    let out = c.exec_ok("default", "neighbour", None, &["echo", "still here"]);
    assert_eq!(out.trim(), "still here");

    c.delete_pod("default", "forker");
    c.wait_pod_gone("default", "forker", secs(90));
    c.wait_for(secs(30), "the fork bomb's cgroup to go", || {
        if pod_cgroup.exists() {
            Err(pod_cgroup.display().to_string())
        } else {
            Ok(())
        }
    });
}
