//! Scheduler throughput: registers N hollow nodes straight through the registry, creates
//! 10,000 unbound pods, then starts the controllers and the scheduler and measures the time
//! until every pod is bound. Prints `scheduler_throughput pods_per_s=…` per node count, for
//! pods without priorities (the baseline) and for pods of ten PriorityClasses (no preemption
//! needed). Then the preemption path: `--preempt-nodes` nodes (default 1,000) each filled
//! with four 1-cpu pods of low priority, and 100 high-priority 1-cpu pods that must each
//! preempt one; printed next to the same 100 pods placed on the same nodes left empty.
//!
//! `cargo bench -p berth-controller --bench scheduler -- [--nodes 1000,5000] [--pods 10000]
//! [--preempt-nodes 1000] [--dir PATH]` (the store goes in a temporary directory under PATH,
//! default the system temporary directory; every store write is fsync'd, so the disk under
//! PATH matters). `--datastore-endpoint URL[,URL…]` keeps the store in etcd instead (under a
//! key prefix of its own per run).

use berth_cluster_controllers as cluster_controllers;
use berth_controllers as controllers;
use berth_registry::{Registry, WriteOptions, prefix};
use berth_runtime::informer::Informers;
use berth_runtime::{Clock, Context, ControllerMetrics};
use berth_scheduler as scheduler;
use berth_shared::resource::{ResourceType, by_plural};
use berth_store::{EtcdConfig, RedbBackend, Store};
use serde_json::json;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

struct Args {
    nodes: Vec<usize>,
    pods: usize,
    preempt_nodes: usize,
    dir: PathBuf,
    binders: usize,
    etcd: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        nodes: vec![1000, 5000],
        pods: 10_000,
        preempt_nodes: 1000,
        dir: std::env::temp_dir(),
        binders: scheduler::Config::default().binders,
        etcd: None,
    };
    let mut binders_given = false;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--nodes" => {
                a.nodes = it
                    .next()
                    .unwrap_or_default()
                    .split(',')
                    .filter_map(|n| n.trim().parse().ok())
                    .collect();
            }
            "--pods" => a.pods = it.next().and_then(|n| n.parse().ok()).unwrap_or(a.pods),
            "--preempt-nodes" => {
                a.preempt_nodes = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(a.preempt_nodes)
            }
            "--dir" => a.dir = it.next().map(PathBuf::from).unwrap_or(a.dir),
            "--datastore-endpoint" => a.etcd = it.next(),
            "--binders" => {
                a.binders = it.next().and_then(|n| n.parse().ok()).unwrap_or(a.binders);
                binders_given = true;
            }
            _ => {} // `--bench` and friends from cargo
        }
    }
    if a.etcd.is_some() && !binders_given {
        // The controller's default on etcd (`scheduler::Config::for_store`).
        a.binders = 16;
    }
    a
}

fn rt(plural: &str) -> &'static ResourceType {
    by_plural("", "v1", plural)
        .or_else(|| by_plural("scheduling.k8s.io", "v1", plural))
        .expect("resource")
}

/// PriorityClasses `p0` … `p9` (values 0 … 900), `low` (0) and `high` (1,000).
fn create_classes(registry: &Registry) {
    let classes = (0..10)
        .map(|i| (format!("p{i}"), i * 100))
        .chain([("low".to_string(), 0), ("high".to_string(), 1000)]);
    for (name, value) in classes {
        create(
            registry,
            "priorityclasses",
            None,
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name}, "value": value}),
        );
    }
}

fn create(registry: &Registry, plural: &str, ns: Option<&str>, obj: serde_json::Value) {
    registry
        .create(rt(plural), ns, obj, &WriteOptions::default())
        .expect("create");
}

/// Creates `pod` in the `default` namespace.
fn create_pod(registry: &Registry, pod: serde_json::Value) {
    create(registry, "pods", Some("default"), pod);
}

/// Nodes like `berth-hollow-nodes` registers: Ready, 4 cpu / 16Gi / 110 pods, three zones.
fn register_nodes(registry: &Registry, n: usize) {
    for i in 0..n {
        let name = format!("hollow-{i}");
        let res = json!({"cpu": "4", "memory": "16Gi", "pods": "110"});
        create(
            registry,
            "nodes",
            None,
            json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": format!("zone-{}", i % 3)}},
            "spec": {"podCIDR": format!("10.{}.{}.0/24", 128 + i / 256, i % 256)},
            "status": {"capacity": res, "allocatable": res,
                "conditions": [{"type": "Ready", "status": "True"}]}}),
        );
    }
}

/// What the pods of one run are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Workload {
    /// scheduler_perf's default pod, no priority.
    Plain,
    /// The same, of ten PriorityClasses in turn.
    Prioritised,
    /// Nodes full of low-priority 1-cpu pods, high-priority 1-cpu pods to place.
    Preempting,
    /// The same 1-cpu high-priority pods on the nodes left empty.
    EmptyNodes,
}

/// Pods like scheduler_perf's default pod: one container asking 100m cpu and 500Mi.
fn create_pods(registry: &Registry, n: usize, workload: Workload) {
    for i in 0..n {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("pod-{i}"), "namespace": "default"},
            "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}});
        match workload {
            Workload::Plain => {}
            Workload::Prioritised => {
                pod["spec"]["priorityClassName"] = json!(format!("p{}", i % 10))
            }
            Workload::Preempting | Workload::EmptyNodes => {
                pod["spec"]["priorityClassName"] = json!("high");
                pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("1");
            }
        }
        create_pod(registry, pod);
    }
}

/// Fills every node with four 1-cpu pods of low priority that go at once when deleted.
fn fill_nodes(registry: &Registry, nodes: usize) {
    for n in 0..nodes {
        for k in 0..4 {
            create_pod(
                registry,
                json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("filler-{n}-{k}"), "namespace": "default"},
                "spec": {"nodeName": format!("hollow-{n}"), "priorityClassName": "low",
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "1", "memory": "500Mi"}}}]}}),
            );
        }
    }
}

/// Pods per node, and how many pods have no node yet.
fn placement(registry: &Registry) -> (HashMap<String, usize>, usize) {
    let (_, pods, _) = registry
        .store()
        .list(&prefix(rt("pods"), None), None, None, |_| true);
    let mut per_node = HashMap::new();
    let mut unbound = 0;
    for p in &pods {
        match p.index.field("spec.nodeName") {
            Some(n) if !n.is_empty() => *per_node.entry(n.to_string()).or_insert(0) += 1,
            _ => unbound += 1,
        }
    }
    (per_node, unbound)
}

/// Nanoseconds of the wall clock, to tell runs' etcd prefixes apart.
fn setup_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() % 1_000_000)
        .unwrap_or(0)
}

/// One run; returns the pods bound per second.
async fn run(
    nodes: usize,
    pods: usize,
    base: &std::path::Path,
    binders: usize,
    workload: Workload,
    etcd: Option<&str>,
) -> f64 {
    let dir = tempfile::tempdir_in(base).expect("temporary directory");
    let store = match etcd {
        Some(endpoints) => {
            let mut config = EtcdConfig::new(endpoints.split(',').map(str::to_string).collect());
            config.prefix = format!(
                "/bench-{}",
                std::process::id() as u128 * 1_000_000 + setup_nanos()
            );
            tokio::task::block_in_place(|| Store::open_etcd(config, 100_000)).expect("etcd store")
        }
        None => {
            let backend = RedbBackend::open(&dir.path().join("store.redb")).expect("store");
            Store::open(Box::new(backend), 100_000).expect("store")
        }
    };
    let registry = Registry::new(store);
    let setup = Instant::now();
    let r = registry.clone();
    tokio::task::spawn_blocking(move || {
        for ns in ["default", "kube-system", "kube-node-lease", "kube-public"] {
            create(
                &r,
                "namespaces",
                None,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            );
        }
        create_classes(&r);
        register_nodes(&r, nodes);
        if workload == Workload::Preempting {
            fill_nodes(&r, nodes);
        }
        create_pods(&r, pods, workload);
    })
    .await
    .expect("setup");
    let setup = setup.elapsed();

    let stop = CancellationToken::new();
    let cidr = cluster_controllers::nodeipam::plan::Cidr::parse("10.42.0.0/16").expect("cidr");
    // Count bindings from the store's events rather than polling lists.
    let mut watch = registry
        .store()
        .watch(registry.store().current_revision())
        .expect("watch");
    let started = Instant::now();
    let ctx = Context {
        registry: registry.clone(),
        informers: Informers::new(Arc::new(registry.store().clone()), stop.clone()),
        metrics: ControllerMetrics::default(),
        clock: Clock::system(),
    };
    // The bench's nodes post no heartbeats: they must not go Unknown while it runs.
    let lifecycle = controllers::nodelifecycle::Config {
        grace: controllers::nodelifecycle::plan::Grace {
            monitor: Duration::from_secs(3600),
            startup: Duration::from_secs(3600),
        },
    };
    let mut tasks = controllers::start(&ctx, lifecycle, stop.clone());
    tasks.extend(cluster_controllers::start(
        &ctx,
        cidr,
        String::new(),
        cluster_controllers::podgc::Config::default(),
        stop.clone(),
    ));
    let config = scheduler::Config {
        binders,
        ..scheduler::Config::default()
    };
    tasks.push(scheduler::start_with(&ctx, config, stop.clone()));
    let mut bound = 0;
    while bound < pods {
        let ev = tokio::select! {
            ev = watch.live.recv() => ev,
            _ = tokio::time::sleep(Duration::from_secs(30)) => break,
        };
        match ev {
            Ok(ev) => {
                let was = ev
                    .prev_index
                    .as_ref()
                    .and_then(|i| i.field("spec.nodeName"));
                let is = ev.object.index.field("spec.nodeName");
                if ev.key.starts_with("/core/pods/") && was.is_none() && is.is_some() {
                    bound += 1;
                }
            }
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                bound = pods - placement(&registry).1;
            }
            Err(_) => break,
        }
    }
    let elapsed = started.elapsed();
    let count_events = || {
        registry
            .store()
            .count(&prefix(rt("events"), Some("default")))
    };
    let events = count_events();
    // Events yield to bindings; see how long they take to catch up.
    let drain = Instant::now();
    while count_events() < bound && drain.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let drained = (count_events(), drain.elapsed());
    stop.cancel();
    for t in tasks {
        let _ = t.await;
    }
    let (per_node, unbound) = placement(&registry);
    let bound = pods - unbound;
    let busiest = per_node.values().copied().max().unwrap_or(0);
    let rate = bound as f64 / elapsed.as_secs_f64();
    let what = match workload {
        Workload::Plain => "no priorities",
        Workload::Prioritised => "ten PriorityClasses, no preemption",
        Workload::Preempting => "each preempts one pod of a full node",
        Workload::EmptyNodes => "the same pods on empty nodes",
    };
    println!(
        "scheduler_throughput pods_per_s={rate:.0} ({pods} pods, {nodes} nodes, {what}; goal ≥ 1000)"
    );
    if matches!(workload, Workload::Preempting | Workload::EmptyNodes) {
        println!(
            "  {pods} high-priority pods placed in {:.2}s",
            elapsed.as_secs_f64()
        );
        return rate;
    }
    println!(
        "  bound {bound}/{pods} in {:.2}s on {} nodes (busiest node {busiest} pods); \
         {events} events written by then, {} {:.1}s later; setup {:.1}s; store under {}",
        elapsed.as_secs_f64(),
        per_node.len(),
        drained.0,
        drained.1.as_secs_f64(),
        setup.as_secs_f64(),
        base.display()
    );
    let r = registry.clone();
    let ceiling = tokio::task::spawn_blocking(move || store_baseline(&r, binders))
        .await
        .expect("baseline");
    println!(
        "  baseline: registry.bind straight from {binders} threads, no scheduler: \
         {ceiling:.0} binds/s (the store's ceiling on this disk)"
    );
    rate
}

/// Binds pods straight through the registry from `threads` threads: the most the store
/// allows, with no scheduling at all.
fn store_baseline(registry: &Registry, threads: usize) -> f64 {
    const PODS: usize = 2000;
    for i in 0..PODS {
        create_pod(
            registry,
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("baseline-{i}"), "namespace": "default"},
            "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}}),
        );
    }
    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads.max(1) {
            s.spawn(move || {
                for i in (t..PODS).step_by(threads.max(1)) {
                    let node = format!("hollow-{}", i % 100);
                    registry
                        .bind("default", &format!("baseline-{i}"), &node)
                        .expect("bind");
                }
            });
        }
    });
    PODS as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let a = args();
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    for &n in &a.nodes {
        let measure = |pods, workload| {
            runtime.block_on(run(n, pods, &a.dir, a.binders, workload, a.etcd.as_deref()))
        };
        let plain = measure(a.pods, Workload::Plain);
        let prio = measure(a.pods, Workload::Prioritised);
        println!(
            "  with priorities: {prio:.0} pods/s against {plain:.0} without ({:+.1} %)",
            (prio / plain - 1.0) * 100.0
        );
    }
    if a.preempt_nodes > 0 {
        let n = a.preempt_nodes;
        let measure = |workload| {
            runtime.block_on(run(n, 100, &a.dir, a.binders, workload, a.etcd.as_deref()))
        };
        let empty = measure(Workload::EmptyNodes);
        let full = measure(Workload::Preempting);
        println!("  preemption path: {full:.0} pods/s against {empty:.0} on empty nodes");
    }
}
