//! The manager's passes against state-based fakes of its ports: signals that change when the
//! fake garbage collector frees space, pods with set usages, and a record of evictions.

use super::*;
use crate::eviction::config::join;
use crate::eviction::reclaim::ReclaimError;
use crate::eviction::usage::{Disk, PodUsage, Usages};
use crate::node::pressure::{Observed, Thresholds};
use futures::future::BoxFuture;
use jiff::SignedDuration;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Mutex;

const MI: i64 = 1 << 20;

/// The host: its signals (changed by the fake GC) and the pods' usage.
#[derive(Default)]
struct Host {
    signals: Mutex<Signals>,
    usages: Mutex<Usages>,
    /// The pods whose usage each `usage` call asked for.
    asked: Mutex<Vec<Vec<String>>>,
}

impl Host {
    fn set(&self, signal: Signal, available: i64) {
        self.signals.lock().unwrap().observed.insert(
            signal,
            Observed {
                available,
                capacity: 1000 * MI,
            },
        );
    }

    fn free(&self, signal: Signal, bytes: i64) {
        if let Some(o) = self.signals.lock().unwrap().observed.get_mut(&signal) {
            o.available += bytes;
        }
    }
}

impl Observer for Host {
    fn signals(&self) -> BoxFuture<'_, Signals> {
        let s = self.signals.lock().unwrap().clone();
        Box::pin(async move { s })
    }

    fn usage<'a>(&'a self, pods: &'a [Pod]) -> BoxFuture<'a, Usages> {
        let uids: Vec<String> = pods.iter().map(|p| uid(p).to_string()).collect();
        let u: Usages = self
            .usages
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| uids.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.asked.lock().unwrap().push(uids);
        Box::pin(async move { u })
    }
}

/// A garbage collector that frees what it was given, and records the steps asked of it.
struct Gc {
    host: Arc<Host>,
    containers: i64,
    images: i64,
    steps: Mutex<Vec<String>>,
}

impl NodeReclaim for Gc {
    fn delete_dead_containers(&self) -> BoxFuture<'_, Result<u64, ReclaimError>> {
        self.steps.lock().unwrap().push("containers".into());
        self.host.free(Signal::NodeFsAvailable, self.containers);
        let freed = self.containers as u64;
        Box::pin(async move { Ok(freed) })
    }

    fn free_image_space(&self, bytes: u64) -> BoxFuture<'_, Result<u64, ReclaimError>> {
        self.steps
            .lock()
            .unwrap()
            .push(format!("images {}", bytes / MI as u64));
        self.host.free(Signal::NodeFsAvailable, self.images);
        let freed = self.images as u64;
        Box::pin(async move { Ok(freed) })
    }
}

#[derive(Default)]
struct Pods {
    pods: Vec<Pod>,
    evicted: Mutex<Vec<(String, Eviction)>>,
}

impl NodePods for Pods {
    fn active_pods(&self) -> Vec<Pod> {
        let evicted = self.evicted.lock().unwrap();
        self.pods
            .iter()
            .filter(|p| !evicted.iter().any(|(u, _)| u == uid(p)))
            .cloned()
            .collect()
    }

    fn evict<'a>(&'a self, uid: &'a str, eviction: Eviction) -> BoxFuture<'a, ()> {
        self.evicted
            .lock()
            .unwrap()
            .push((uid.to_string(), eviction));
        Box::pin(async {})
    }

    fn stopped<'a>(&'a self, _uid: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async { true })
    }
}

fn pod(name: &str, priority: i32, memory_request: Option<&str>, grace: i64) -> Pod {
    let resources = memory_request
        .map(|m| json!({"requests": {"memory": m}, "limits": {"memory": m}}))
        .unwrap_or(json!({}));
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"priority": priority, "terminationGracePeriodSeconds": grace,
                 "containers": [{"name": "c", "image": "busybox", "resources": resources}],
                 "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "10Mi"}}]}
    }))
    .unwrap()
}

fn memory(m: i64) -> PodUsage {
    PodUsage {
        memory: Some(m),
        ..PodUsage::default()
    }
}

fn scratch(bytes: i64) -> PodUsage {
    PodUsage {
        volumes: BTreeMap::from([("scratch".to_string(), Disk { bytes, inodes: 1 })]),
        ..PodUsage::default()
    }
}

struct Rig {
    manager: Manager,
    host: Arc<Host>,
    gc: Arc<Gc>,
    pods: Arc<Pods>,
    pressures: watch::Receiver<Pressures>,
}

/// A rig with only the hard threshold `threshold` and a garbage collector that frees nothing.
fn hard(threshold: &str, pods: Vec<Pod>) -> Rig {
    rig(threshold, "", "", pods, (0, 0))
}

fn rig(hard: &str, soft: &str, grace: &str, pods: Vec<Pod>, gc_frees: (i64, i64)) -> Rig {
    let host = Arc::new(Host::default());
    let gc = Arc::new(Gc {
        host: host.clone(),
        containers: gc_frees.0,
        images: gc_frees.1,
        steps: Mutex::new(Vec::new()),
    });
    let settings = Settings {
        thresholds: crate::eviction::config::add_allocatable_thresholds(
            join(
                &Thresholds::parse(hard).unwrap(),
                &Thresholds::parse(soft).unwrap(),
                &crate::eviction::config::parse_grace_periods(grace).unwrap(),
                &BTreeMap::new(),
            )
            .unwrap(),
        ),
        max_pod_grace_seconds: 20,
        transition_period: SignedDuration::from_secs(30),
        interval: Duration::from_secs(10),
    };
    let pods = Arc::new(Pods {
        pods,
        ..Pods::default()
    });
    let slot: PodsSlot = Default::default();
    let _ = slot.set(pods.clone());
    let (manager, pressures) = Manager::new(settings, host.clone(), gc.clone(), slot);
    let manager = manager.with_clock(Arc::new(|| Timestamp::from_second(1_700_000_000).unwrap()));
    Rig {
        manager,
        host,
        gc,
        pods,
        pressures,
    }
}

/// A hard memory threshold of 100Mi; a pod within its 200Mi request using 150Mi, and a hog
/// without a request using 600Mi.
fn hog_beside_a_guaranteed_pod() -> Rig {
    let pods = vec![
        pod("guaranteed", 0, Some("200Mi"), 30),
        pod("hog", 0, None, 30),
    ];
    let r = hard("memory.available<100Mi", pods);
    *r.host.usages.lock().unwrap() = Usages::from([
        ("guaranteed".into(), memory(150 * MI)),
        ("hog".into(), memory(600 * MI)),
    ]);
    r
}

#[tokio::test]
async fn memory_pressure_evicts_the_pod_over_its_request_and_raises_the_condition() {
    let mut r = hog_beside_a_guaranteed_pod();
    r.host.set(Signal::MemoryAvailable, 500 * MI);
    assert_eq!(
        r.manager.synchronize().await,
        None,
        "no pressure, no eviction"
    );
    assert!(!r.pressures.borrow().memory);

    r.host.set(Signal::MemoryAvailable, 80 * MI);
    assert_eq!(r.manager.synchronize().await.as_deref(), Some("hog"));
    assert!(r.pressures.borrow().memory);
    let evicted = r.pods.evicted.lock().unwrap().clone();
    let (_, e) = &evicted[0];
    assert_eq!(
        e.grace,
        Duration::from_secs(1),
        "hard: upstream's immediate grace"
    );
    assert!(e.disruption_condition);
    assert!(
        e.message.starts_with(
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. "
        ),
        "{}",
        e.message
    );
    assert!(
        r.gc.steps.lock().unwrap().is_empty(),
        "memory is never reclaimed at node level"
    );
}

#[tokio::test]
async fn pods_over_their_allocatable_memory_are_evicted_while_the_node_has_plenty() {
    let mut r = hog_beside_a_guaranteed_pod();
    r.host.set(Signal::MemoryAvailable, 4000 * MI);
    r.host.set(Signal::AllocatableMemoryAvailable, 300 * MI);
    assert_eq!(r.manager.synchronize().await, None);
    assert!(!r.pressures.borrow().memory);

    // Other processes on the host do not matter; the pods' own share does.
    r.host.set(Signal::AllocatableMemoryAvailable, 60 * MI);
    assert_eq!(r.manager.synchronize().await.as_deref(), Some("hog"));
    assert!(r.pressures.borrow().memory, "MemoryPressure, as upstream");
    let evicted = r.pods.evicted.lock().unwrap().clone();
    assert!(
        evicted[0].1.message.starts_with(
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 60Mi. "
        ),
        "{}",
        evicted[0].1.message
    );
    assert!(r.gc.steps.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_quiet_node_reads_the_usage_of_limited_pods_only() {
    let mut plain = pod("plain", 0, None, 30);
    if let Some(s) = plain.spec.as_mut() {
        s.volumes = None;
    }
    let mut r = hard(
        "memory.available<100Mi",
        vec![plain, pod("limited", 0, None, 30)],
    );
    r.host.set(Signal::MemoryAvailable, 500 * MI);
    *r.host.usages.lock().unwrap() = Usages::from([
        ("plain".into(), memory(600 * MI)),
        ("limited".into(), memory(100 * MI)),
    ]);
    assert_eq!(r.manager.synchronize().await, None);
    assert_eq!(
        *r.host.asked.lock().unwrap(),
        [vec!["limited".to_string()]],
        "only the pod with a local storage limit"
    );

    // Under pressure every pod is ranked, so every pod's usage is read.
    r.host.set(Signal::MemoryAvailable, 50 * MI);
    assert_eq!(r.manager.synchronize().await.as_deref(), Some("plain"));
    assert_eq!(
        r.host.asked.lock().unwrap().last().cloned(),
        Some(vec!["plain".to_string(), "limited".to_string()])
    );
}

#[tokio::test]
async fn disk_pressure_reclaims_containers_then_images_before_evicting() {
    type Case = (
        &'static str,
        (i64, i64),
        Vec<&'static str>,
        Option<&'static str>,
    );
    let cases: Vec<Case> = vec![
        (
            "dead containers free enough",
            (100 * MI, 0),
            vec!["containers", "images 50"],
            None,
        ),
        (
            "images free the rest",
            (20 * MI, 100 * MI),
            vec!["containers", "images 50"],
            None,
        ),
        (
            "not enough: the biggest user of the disk goes",
            (10 * MI, 10 * MI),
            vec!["containers", "images 50"],
            Some("filler"),
        ),
    ];
    for (name, frees, steps, evicted) in cases {
        let mut r = rig(
            "nodefs.available<100Mi",
            "",
            "",
            vec![pod("quiet", 0, None, 30), pod("filler", 0, None, 30)],
            frees,
        );
        r.host.set(Signal::NodeFsAvailable, 50 * MI);
        *r.host.usages.lock().unwrap() = Usages::from([
            ("quiet".into(), scratch(MI)),
            ("filler".into(), scratch(9 * MI)),
        ]);
        assert_eq!(r.manager.synchronize().await.as_deref(), evicted, "{name}");
        assert_eq!(*r.gc.steps.lock().unwrap(), steps, "{name}");
        assert!(r.pressures.borrow().disk, "{name}");
    }
}

#[tokio::test]
async fn a_dedicated_image_filesystem_leaves_node_pressure_to_evictions() {
    let mut r = rig(
        "nodefs.available<100Mi",
        "",
        "",
        vec![pod("filler", 0, None, 30)],
        (500 * MI, 500 * MI),
    );
    r.host.set(Signal::NodeFsAvailable, 50 * MI);
    r.host.signals.lock().unwrap().dedicated_imagefs = true;
    *r.host.usages.lock().unwrap() = Usages::from([("filler".into(), scratch(MI))]);
    assert_eq!(r.manager.synchronize().await.as_deref(), Some("filler"));
    assert!(r.gc.steps.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_soft_threshold_waits_its_grace_period_and_limits_the_pods_grace() {
    let mut r = rig(
        "",
        "memory.available<300Mi",
        "memory.available=1m",
        vec![pod("hog", 0, None, 5), pod("slow", 0, None, 60)],
        (0, 0),
    );
    r.host.set(Signal::MemoryAvailable, 200 * MI);
    *r.host.usages.lock().unwrap() = Usages::from([
        ("hog".into(), memory(500 * MI)),
        ("slow".into(), memory(400 * MI)),
    ]);
    assert_eq!(
        r.manager.synchronize().await,
        None,
        "grace period not yet over"
    );
    assert!(r.pressures.borrow().memory, "the condition does not wait");
    r.manager.clock = Arc::new(|| Timestamp::from_second(1_700_000_060).unwrap());
    assert_eq!(r.manager.synchronize().await.as_deref(), Some("hog"));
    assert_eq!(r.manager.synchronize().await.as_deref(), Some("slow"));
    let evicted = r.pods.evicted.lock().unwrap().clone();
    assert_eq!(
        evicted[0].1.grace,
        Duration::from_secs(5),
        "the pod's own, shorter"
    );
    assert_eq!(
        evicted[1].1.grace,
        Duration::from_secs(20),
        "--eviction-max-pod-grace-period"
    );
}

#[tokio::test]
async fn critical_pods_are_never_evicted() {
    let mut r = hard(
        "memory.available<100Mi",
        vec![pod("critical", 2_000_000_000, None, 30)],
    );
    r.host.set(Signal::MemoryAvailable, 10 * MI);
    *r.host.usages.lock().unwrap() = Usages::from([("critical".into(), memory(900 * MI))]);
    assert_eq!(r.manager.synchronize().await, None);
    assert!(r.pods.evicted.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_pod_over_its_local_storage_limit_goes_while_the_node_has_plenty() {
    let mut r = hard(
        "nodefs.available<100Mi",
        vec![pod("small", 0, None, 30), pod("over", 0, None, 30)],
    );
    r.host.set(Signal::NodeFsAvailable, 900 * MI);
    *r.host.usages.lock().unwrap() = Usages::from([
        ("small".into(), scratch(MI)),
        ("over".into(), scratch(11 * MI)),
    ]);
    assert_eq!(r.manager.synchronize().await.as_deref(), Some("over"));
    let evicted = r.pods.evicted.lock().unwrap().clone();
    assert_eq!(
        evicted[0].1.message,
        "Usage of EmptyDir volume \"scratch\" exceeds the limit \"10Mi\". "
    );
    assert!(
        !evicted[0].1.disruption_condition,
        "as upstream: no condition for these"
    );
    assert!(!r.pressures.borrow().disk);
}
