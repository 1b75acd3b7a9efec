//! Issue 31, acceptance 2: image garbage collection on a real image filesystem. containerd's
//! root (content store and snapshots, what the agent's image GC statfs's) lies on a small tmpfs
//! of its own; the image GC thresholds are set just above the usage measured with one image in
//! use, so that pulling three unused images of known, incompressible size pushes it over. The
//! least recently used of them (the first pulled: never used, detected first) must be deleted
//! within 30 s, the other two and the image of the running pod kept, and a `FreedDiskSpace`
//! event on the Node must name what was freed.
//!
//! Arithmetic (MiB): each test image is one layer of 16 MiB of random bytes, which takes about
//! 32 MiB of the filesystem (the gzipped blob in the content store plus the unpacked snapshot)
//! and counts as 16 MiB (its compressed size, as upstream counts it). With `used0` measured and
//! one pull adding `2 × 16`, usage after three pulls is about `used0 + 96`, after two
//! `used0 + 64`. The threshold (high = low) is put at `used0 + 88`: two pulls stay under it,
//! three cross it by about 8 MiB, which is less than one image frees, so exactly one image (the
//! oldest) is deleted and usage falls back under the threshold. Each side has a margin of about
//! 8 MiB against the estimate.

use std::io::Read as _;

use berth_tests::cluster::{AgentOptions, ClusterConfig};
use berth_tests::fixtures::{Entry, RunConfig, write_layout};
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_pod};
use berth_tests::{Cluster, secs};

const MIB: u64 = 1 << 20;
/// The image filesystem (containerd's root).
const FS_SIZE: u64 = 160 * MIB;
/// The random payload of each test image.
const LAYER: u64 = 16 * MIB;
/// Eviction must not reclaim images on this small filesystem before the image GC does: only
/// an almost full image filesystem is pressure here.
const EVICTION_HARD: &str =
    "memory.available<100Mi,nodefs.available<100Mi,imagefs.available<1Mi,nodefs.inodesFree<1%";

/// Used bytes and capacity of the filesystem holding `dir` (what the agent's statfs sees).
fn fs_usage(dir: &std::path::Path) -> (u64, u64) {
    let s = nix::sys::statvfs::statvfs(dir)
        .unwrap_or_else(|e| panic!("statvfs {}: {e}", dir.display()));
    let block = s.fragment_size();
    let capacity = s.blocks() * block;
    (capacity - s.blocks_available() * block, capacity)
}

/// `n` random bytes (incompressible, unlike anything else a layer could hold).
fn random_bytes(n: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    std::fs::File::open("/dev/urandom")
        .and_then(|f| f.take(n).read_to_end(&mut bytes))
        .unwrap_or_else(|e| panic!("reading /dev/urandom: {e}"));
    bytes
}

/// Names of images in agent 0's containerd namespace.
fn images(c: &Cluster) -> Vec<String> {
    c.containerd().images(c.agent(0).namespace())
}

#[test]
fn the_least_recently_used_unused_image_is_deleted_when_the_image_fs_passes_the_threshold() {
    let mut c = Cluster::start_with(ClusterConfig {
        agents: vec![AgentOptions {
            extra_args: ["--eviction-hard", EVICTION_HARD]
                .map(String::from)
                .to_vec(),
            ..AgentOptions::default()
        }],
        containerd_root_size: Some(FS_SIZE),
        ..ClusterConfig::agents(1)
    });
    let node = c.node_name(0).to_string();
    let root = c.containerd().root();

    // The image in use: busybox, run by a pod that stays.
    c.apply(&sh_pod("keeper", &node, SLEEP_FOREVER));
    c.wait_for_pod_ready("default", "keeper", secs(60));
    let busybox = "docker.io/library/busybox:1.28";
    assert!(images(&c).iter().any(|i| i == busybox), "{:?}", images(&c));

    // Three images of one random layer each, in the registry.
    let names: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|n| format!("docker.io/library/gc-{n}:1"))
        .collect();
    for (i, name) in names.iter().enumerate() {
        let dir = c.scratch().join(format!("gc-image-{i}"));
        let layer = vec![Entry::file("payload", random_bytes(LAYER), 0o644)];
        let reference = format!("gc-{i}");
        write_layout(&dir, &[layer], &RunConfig::default(), name, &reference)
            .unwrap_or_else(|e| panic!("writing {name}: {e}"));
        let repository = name
            .trim_start_matches("docker.io/")
            .trim_end_matches(":1")
            .to_string();
        c.registry().push(&dir, &reference, &repository, "1");
    }

    // Thresholds from the usage now (see the module doc), the agent restarted with them.
    let (used0, capacity) = fs_usage(&root);
    let threshold = ((used0 + 88 * MIB) * 100).div_ceil(capacity);
    eprintln!(
        "image fs: {} of {} MiB used; threshold {threshold}%",
        used0 / MIB,
        capacity / MIB
    );
    let threshold = threshold.to_string();
    c.restart_agent_with(
        0,
        &[
            "--eviction-hard",
            EVICTION_HARD,
            "--image-gc-high-threshold",
            &threshold,
            "--image-gc-low-threshold",
            &threshold,
            "--image-minimum-gc-age",
            "1s",
        ],
    );
    c.wait_node_ready(0);

    // Pulled one after another: the first is the least recently used.
    for name in &names {
        let r = c.agent(0).subcommand(&["image", "pull", name]);
        assert!(r.success(), "pulling {name}: {}", r.describe());
    }
    let (used3, _) = fs_usage(&root);
    eprintln!(
        "image fs after three pulls: {} MiB used ({}%)",
        used3 / MIB,
        used3 * 100 / capacity
    );

    let started = std::time::Instant::now();
    c.wait_for(secs(30), "the least recently used image deleted", || {
        let now = images(&c);
        if now.contains(&names[0]) {
            Err(now)
        } else {
            Ok(())
        }
    });
    eprintln!("deleted {:?} after the pulls", started.elapsed());
    let kept = images(&c);
    for name in [busybox, &names[1], &names[2]] {
        assert!(
            kept.iter().any(|i| i == name),
            "{name} was deleted: {kept:?}"
        );
    }
    let events = c.wait_for(secs(10), "a FreedDiskSpace event on the Node", || {
        let events = c.node_event_messages(&node, "FreedDiskSpace");
        if events.is_empty() {
            Err(())
        } else {
            Ok(events)
        }
    });
    assert!(
        events
            .iter()
            .any(|m| m.contains(&names[0]) && !m.contains(&names[1]) && !m.contains(&names[2])),
        "the event names the deleted image only: {events:?}"
    );
    // Back under the threshold: the next passes (every 10 s) delete nothing else, and the pod
    // using busybox runs on.
    c.ensure_for(secs(12), "the other images kept", || {
        let now = images(&c);
        if [busybox, &names[1], &names[2]]
            .iter()
            .all(|n| now.iter().any(|i| i == n))
        {
            Ok(())
        } else {
            Err(now)
        }
    });
    let keeper = c.pod("default", "keeper").expect("the keeper pod");
    assert_eq!(keeper["status"]["phase"], "Running");
    assert_eq!(
        c.node_event_messages(&node, "FreedDiskSpace").len(),
        events.len(),
        "{events:?}"
    );
}
