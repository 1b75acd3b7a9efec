//! Issue 31, acceptance 4: node-pressure eviction. Memory: pods given 1.5Gi by
//! `--system-reserved` and `--eviction-hard memory.available<500Mi` (so
//! `allocatableMemory.available<500Mi` on the kubepods cgroup), a BestEffort pod filling a
//! memory-backed emptyDir is evicted (Failed/Evicted, upstream's message naming memory, DisruptionTarget,
//! an Evicted event) while a Guaranteed pod keeps running; the Node shows MemoryPressure and
//! its taint while the threshold is crossed, and both clear afterwards. Disk: containerd's and
//! the agent's roots on one small tmpfs, a pod filling an emptyDir past `nodefs.available` is
//! evicted once node-level reclaim (an unused image deleted) did not free enough, and its
//! emptyDir freed. Local storage: pods over an emptyDir `sizeLimit`, their `ephemeral-storage`
//! limits, or a container's own limit are evicted while the node has plenty of disk.

use berth_tests::fixtures::{Entry, RunConfig, write_layout};
use berth_tests::pod_specs::{SLEEP_FOREVER, bound_pod, sh_container};
use berth_tests::wait::ok_if;
use berth_tests::{AgentOptions, Cluster, ClusterConfig, ensure_for, secs, wait_for};
use serde_json::{Value, json};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

const MI: u64 = 1 << 20;

fn node(c: &Cluster) -> Value {
    let name = c.node_name(0).to_string();
    serde_json::from_str(&c.kubectl().ok(&["get", "node", &name, "-o", "json"])).expect("a Node")
}

fn condition(node: &Value, t: &str) -> String {
    node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == t)
        .and_then(|c| c["status"].as_str())
        .unwrap_or("")
        .to_string()
}

fn has_taint(node: &Value, key: &str) -> bool {
    node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["key"] == key && t["effect"] == "NoSchedule")
}

/// The Node's memory capacity in bytes (`status.capacity.memory`, in `Ki` as the agent writes it).
fn memory_capacity(node: &Value) -> u64 {
    let q = node["status"]["capacity"]["memory"]
        .as_str()
        .unwrap_or_default();
    q.strip_suffix("Ki")
        .and_then(|k| k.parse::<u64>().ok())
        .map(|k| k * 1024)
        .or_else(|| q.parse().ok())
        .unwrap_or_else(|| panic!("memory capacity {q:?}"))
}

/// The pod is Failed/Evicted with a message starting with `prefix`; returns the message.
fn wait_evicted(c: &Cluster, name: &str, prefix: &str, disruption: bool) -> String {
    let pod = c.wait_for_pod_phase("default", name, "Failed", secs(120));
    let status = &pod["status"];
    assert_eq!(status["reason"], "Evicted", "{status:#}");
    let message = status["message"].as_str().unwrap_or_default().to_string();
    assert!(message.starts_with(prefix), "{message:?}");
    let target = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "DisruptionTarget");
    if disruption {
        let t = target.unwrap_or_else(|| panic!("no DisruptionTarget: {status:#}"));
        assert_eq!(t["reason"], "TerminationByKubelet", "{t:#}");
        assert_eq!(t["status"], "True", "{t:#}");
    } else {
        assert!(target.is_none(), "{status:#}");
    }
    wait_for(secs(30), "an Evicted event", || {
        let reasons = c.pod_event_reasons("default", name);
        ok_if(reasons.iter().any(|r| r == "Evicted"), reasons)
    });
    message
}

fn guaranteed(name: &str, node: &str) -> Value {
    let mut main = sh_container("main", SLEEP_FOREVER);
    main["resources"] = json!({
        "requests": {"cpu": "100m", "memory": "64Mi"},
        "limits": {"cpu": "100m", "memory": "64Mi"}
    });
    bound_pod(name, node, json!({"containers": [main]}))
}

/// Waits until the Node's MemoryPressure condition and its memory-pressure taint are `want`.
fn wait_memory_pressure(c: &Cluster, want: (&str, bool), timeout: Duration, what: &str) {
    wait_for(timeout, what, || {
        let nd = node(c);
        let seen = (
            condition(&nd, "MemoryPressure"),
            has_taint(&nd, "node.kubernetes.io/memory-pressure"),
        );
        ok_if(seen.0 == want.0 && seen.1 == want.1, seen)
    });
}

/// Pod `name` on `node` whose container `name` writes `files` files of `mib` MiB, one a second,
/// into emptyDir `volume` (with `source`'s fields) mounted at `/<volume>`, then sleeps.
fn writer_pod(
    name: &str,
    node: &str,
    (volume, source): (&str, Value),
    (files, mib): (u32, u32),
) -> Value {
    let script = format!(
        "i=0; while [ $i -lt {files} ]; do dd if=/dev/zero of=/{volume}/f$i bs=1M count={mib} 2>/dev/null; \
         i=$((i+1)); sleep 1; done; sleep 3600"
    );
    let mut writer = sh_container(name, &script);
    writer["volumeMounts"] = json!([{"name": volume, "mountPath": format!("/{volume}")}]);
    let volumes = json!([{"name": volume, "emptyDir": source}]);
    bound_pod(
        name,
        node,
        json!({"containers": [writer], "volumes": volumes}),
    )
}

#[test]
fn a_besteffort_pod_eating_memory_is_evicted_and_a_guaranteed_one_stays() {
    let mut c = Cluster::start(1);
    let n = c.node_name(0).to_string();
    c.apply(&guaranteed("steady", &n));
    c.wait_for_pod_ready("default", "steady", secs(90));

    // Pods get 1.5Gi of the node (the kubepods cgroup's limit) whatever the host has, and
    // are evicted past 1.5Gi − 500Mi = 1Gi through allocatableMemory.available, which
    // --eviction-hard memory.available adds (upstream's --enforce-node-allocatable=pods).
    // What other processes on the host use does not enter: memory.available stays far above
    // 500Mi on any CI machine with a few GiB.
    let reserved = memory_capacity(&node(&c)) - 1536 * MI;
    c.restart_agent_with(
        0,
        &[
            "--system-reserved",
            &format!("memory={}Mi", reserved / MI),
            "--eviction-hard",
            "memory.available<500Mi,nodefs.available<100Mi,imagefs.available<100Mi",
            "--housekeeping-interval",
            "1s",
            "--eviction-pressure-transition-period",
            "10s",
        ],
    );
    assert_eq!(condition(&node(&c), "MemoryPressure"), "False");
    // 32Mi a second into a memory-backed emptyDir (charged to the pod's cgroup), 1280Mi at
    // most: past the 1Gi threshold after ~32 s, never up to the kubepods limit (1.5Gi), so
    // only an eviction can stop it (without one it would sit there and the test fail).
    let memory = json!({"medium": "Memory"});
    c.apply(&writer_pod("hog", &n, ("mem", memory), (40, 32)));

    // The node reports the pressure and the controller taints it while it lasts.
    wait_memory_pressure(
        &c,
        ("True", true),
        secs(120),
        "MemoryPressure=True and its taint",
    );
    let message = wait_evicted(
        &c,
        "hog",
        "The node was low on resource: memory. Threshold quantity: 500Mi, available: ",
        true,
    );
    assert!(
        message.contains("Container hog was using ")
            && message.ends_with("request is 0, has larger consumption of memory. "),
        "{message:?}"
    );
    // Its memory-backed emptyDir was freed with it, so the pressure goes.
    wait_memory_pressure(
        &c,
        ("False", false),
        secs(90),
        "MemoryPressure=False and no taint",
    );
    let steady = c.pod("default", "steady").unwrap();
    assert_eq!(
        steady["status"]["phase"], "Running",
        "{:#}",
        steady["status"]
    );
    assert_eq!(
        steady["status"]["containerStatuses"][0]["restartCount"], 0,
        "{:#}",
        steady["status"]
    );
}

/// Bytes available on the filesystem holding `dir` (what the agent's statfs sees).
fn available(dir: &Path) -> u64 {
    let s = nix::sys::statvfs::statvfs(dir).expect("statvfs");
    s.blocks_available() * s.fragment_size()
}

/// `n` random bytes (incompressible).
fn random_bytes(n: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    std::fs::File::open("/dev/urandom")
        .and_then(|f| f.take(n).read_to_end(&mut bytes))
        .expect("reading /dev/urandom");
    bytes
}

#[test]
fn a_pod_filling_the_node_filesystem_is_evicted_after_node_reclaim_and_its_empty_dir_freed() {
    // One small filesystem for everything, as on a single-disk host: containerd's root
    // (images, writable layers) on a 320 MiB tmpfs, and the agent's root and logs moved onto
    // it. nodefs and imagefs are then one, so the eviction manager reclaims dead containers
    // and unused images before it evicts for nodefs.available.
    let mut c = Cluster::start_with(ClusterConfig {
        containerd_root_size: Some(320 * MI),
        ..ClusterConfig::agents(1)
    });
    let n = c.node_name(0).to_string();
    let fs: PathBuf = c.containerd().root();
    let (root, logs) = (fs.join("agent-root"), fs.join("agent-logs"));

    // An image no pod uses: one 8 MiB random layer.
    let unused = "docker.io/library/evict-unused:1";
    let dir = c.scratch().join("evict-unused");
    let layer = vec![Entry::file("payload", random_bytes(8 * MI), 0o644)];
    write_layout(
        &dir,
        &[layer],
        &RunConfig::default(),
        unused,
        "evict-unused",
    )
    .unwrap();
    c.registry()
        .push(&dir, "evict-unused", "library/evict-unused", "1");

    // The node's identity (certificates, its join secret) moves with the root dir.
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(c.agent(0).root_dir())
        .arg(&root)
        .status()
        .unwrap();
    assert!(copied.success(), "copying the agent's root dir");
    c.restart_agent_with(
        0,
        &[
            "--root-dir",
            &root.display().to_string(),
            "--log-dir",
            &logs.display().to_string(),
            "--eviction-hard",
            "nodefs.available<150Mi,imagefs.available<100Mi,memory.available<100Mi",
            "--housekeeping-interval",
            "1s",
            "--eviction-pressure-transition-period",
            "5s",
            // The periodic image GC off (100 %) and no minimum age: only the eviction
            // manager's reclaim can delete the unused image.
            "--image-gc-high-threshold",
            "100",
            "--image-gc-low-threshold",
            "100",
            "--image-minimum-gc-age",
            "1s",
        ],
    );
    c.wait_node_ready(0);
    c.apply(&guaranteed("steady", &n));
    c.wait_for_pod_ready("default", "steady", secs(90));
    let r = c.agent(0).subcommand(&["image", "pull", unused]);
    assert!(r.success(), "pulling {unused}: {}", r.describe());
    let images = |c: &Cluster| c.containerd().images(c.agent(0).namespace());
    assert!(images(&c).iter().any(|i| i == unused), "{:?}", images(&c));
    let before = available(&fs);
    assert!(before > 250 * MI, "{}", before / MI);

    // 16 MiB a second into an emptyDir: under the threshold after ~8 s.
    c.apply(&writer_pod("filler", &n, ("scratch", json!({})), (20, 16)));
    let message = wait_evicted(
        &c,
        "filler",
        "The node was low on resource: ephemeral-storage. Threshold quantity: 150Mi, available: ",
        true,
    );
    // (No "Container filler was using" part: upstream counts a container's writable layer
    // and logs there, and the filler writes to its emptyDir only.)
    eprintln!("{message}");
    // Node-level reclaim came first: the unused image went (and said so on the Node), the
    // image of the running pod stayed.
    let now = images(&c);
    assert!(!now.iter().any(|i| i == unused), "{now:?}");
    assert!(
        now.iter().any(|i| i == "docker.io/library/busybox:1.28"),
        "{now:?}"
    );
    let events = c.node_event_messages(&n, "FreedDiskSpace");
    assert!(events.iter().any(|m| m.contains(unused)), "{events:?}");
    // The evicted pod's emptyDir is freed (the pod object stays, Failed).
    let uid = c.pod("default", "filler").unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let empty_dir = root.join("pods").join(&uid).join("volumes/empty-dir");
    wait_for(secs(30), "the emptyDir freed", || {
        let free = available(&fs);
        ok_if(
            !empty_dir.exists() && free > 200 * MI,
            (empty_dir.exists(), free / MI),
        )
    });
    wait_for(secs(60), "DiskPressure=False", || {
        let s = condition(&node(&c), "DiskPressure");
        if s == "False" { Ok(()) } else { Err(s) }
    });
    let steady = c.pod("default", "steady").unwrap();
    assert_eq!(
        steady["status"]["phase"], "Running",
        "{:#}",
        steady["status"]
    );
}

#[test]
fn pods_over_their_local_storage_limits_are_evicted_while_the_disk_has_room() {
    let c = Cluster::start_with(ClusterConfig {
        agents: vec![AgentOptions {
            extra_args: ["--housekeeping-interval", "2s"].map(String::from).to_vec(),
            ..AgentOptions::default()
        }],
        ..ClusterConfig::default()
    });
    let n = c.node_name(0).to_string();
    let write = |mb: u32, to: &str| {
        format!("dd if=/dev/zero of={to} bs=1M count={mb} 2>/dev/null; {SLEEP_FOREVER}")
    };
    // An emptyDir over its sizeLimit.
    let mut a = sh_container("main", &write(3, "/scratch/f"));
    a["volumeMounts"] = json!([{"name": "scratch", "mountPath": "/scratch"}]);
    // Each pod: its containers and its `scratch` emptyDir (with a sizeLimit or not).
    let with_scratch = |name: &str, containers: Value, scratch: Value| {
        let spec = json!({"containers": containers, "volumes": [{"name": "scratch", "emptyDir": scratch}]});
        c.apply(&bound_pod(name, &n, spec));
    };
    with_scratch("over-size-limit", json!([a]), json!({"sizeLimit": "1Mi"}));
    // The pod over its containers' summed limits (2Mi + 2Mi).
    let limited = |name: &str, script: &str, limit: &str| {
        let mut c = sh_container(name, script);
        c["resources"] = json!({"limits": {"ephemeral-storage": limit}});
        c["volumeMounts"] = json!([{"name": "scratch", "mountPath": "/scratch"}]);
        c
    };
    let over = limited("a", &write(6, "/scratch/f"), "2Mi");
    let under = limited("b", SLEEP_FOREVER, "2Mi");
    with_scratch("over-pod-limit", json!([over, under]), json!({}));
    // One container over its own limit in its writable layer.
    let over = limited("x", &write(4, "/f"), "2Mi");
    let under = limited("y", SLEEP_FOREVER, "20Mi");
    with_scratch("over-container-limit", json!([over, under]), json!({}));
    // Within every limit.
    let within = limited("main", &write(1, "/scratch/f"), "8Mi");
    with_scratch("within", json!([within]), json!({"sizeLimit": "4Mi"}));

    assert_eq!(
        wait_evicted(&c, "over-size-limit", "", false),
        "Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\". "
    );
    assert_eq!(
        wait_evicted(&c, "over-pod-limit", "", false),
        "Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. "
    );
    assert_eq!(
        wait_evicted(&c, "over-container-limit", "", false),
        "Container x exceeded its local ephemeral storage limit \"2Mi\". "
    );
    assert_eq!(condition(&node(&c), "DiskPressure"), "False");
    ensure_for(secs(6), "the pod within its limits keeps running", || {
        let p = c.pod("default", "within").unwrap();
        ok_if(p["status"]["phase"] == "Running", p["status"].clone())
    });
}
