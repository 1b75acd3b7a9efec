//! Control-plane benchmark (prints figures, never fails on them): pod create latency
//! (sequential over one connection, and 8 concurrent clients), list latency of N pods (JSON and
//! Table), watch delivery latency, and the controller's RSS, each next to a baseline measured in
//! the same run. `BERTH_BENCH_PODS` sets N (default 10,000); `BERTH_CONTROLLER_BIN` picks the
//! binary (a release build gives the meaningful figures). The whole set runs twice in one
//! run: on the embedded store, then on a three-member etcd cluster (`--datastore-endpoint`);
//! `BERTH_BENCH_STORES=embedded` or `=etcd` runs one of them.

use std::time::{Duration, Instant};

use berth_tests::Controller;
use berth_tests::bench::{built, env_usize};
use berth_tests::client::{AsyncApi, Credentials, Req};
use berth_tests::controller::controller_binary;
use berth_tests::objects::{namespace, pod};
use berth_tests::stats::{Samples, megabytes};
use berth_tests::watch_delivery::must;

/// The goals the README sets for these figures.
const GOAL_CREATE: &str = "goal: p99 < 10 ms";
const GOAL_LIST: &str = "goal: < 300 ms";
const GOAL_WATCH: &str = "no goal set yet";
const GOAL_RSS: &str = "goal: < 100 MB";

const CONCURRENT_CLIENTS: usize = 8;
const LIST_RUNS: usize = 10;
const WATCH_WRITES: usize = 1000;
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

fn main() {
    let pods = env_usize("BERTH_BENCH_PODS", 10_000);
    let bin = controller_binary();
    println!("control_plane bench: {}, pods={pods}", built(&bin));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"));
    let stores = std::env::var("BERTH_BENCH_STORES").unwrap_or_else(|_| "embedded,etcd".into());
    for store in stores.split(',') {
        println!("== store: {store}");
        match store {
            "embedded" => {
                let c = Controller::start();
                rt.block_on(bench(&c, pods));
            }
            "etcd" => {
                let etcd = berth_tests::etcd::EtcdCluster::start(3);
                let c = Controller::start_with(&["--datastore-endpoint", &etcd.endpoints()]);
                rt.block_on(bench(&c, pods));
                drop(c);
                drop(etcd);
            }
            other => panic!("BERTH_BENCH_STORES: unknown store {other:?}"),
        }
    }
}

fn admin(c: &Controller) -> AsyncApi {
    AsyncApi::new(c.endpoint(Credentials::ClientCert(c.admin_identity())))
}

/// Creates pod `name` (label `bench=<label>`) in `ns` and returns how long the POST took.
async fn timed_create(api: &AsyncApi, ns: &str, name: &str, label: &str) -> Duration {
    let body = pod(name, &[("bench", label)]);
    let t = Instant::now();
    let path = format!("/api/v1/namespaces/{ns}/pods");
    must(api, Req::post(path, &body), 201).await;
    t.elapsed()
}

async fn bench(c: &Controller, pods: usize) {
    let api = admin(c);

    // Baseline: an authenticated TLS round trip that touches no storage.
    let mut healthz = Samples::new();
    let mut version = String::new();
    for _ in 0..200 {
        let t = Instant::now();
        let reply = api
            .send(&Req::get("/healthz"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        healthz.push(t.elapsed());
        version = reply.http_version;
    }
    println!(
        "healthz_latency_ms {} (n=200, {version}; baseline: a round trip without the store)",
        healthz.p50_p99_ms()
    );
    let rss_empty = c.rss_kib();

    for ns in ["bench-seq", "bench-conc", "bench-watch"] {
        must(&api, Req::post("/api/v1/namespaces", &namespace(ns)), 201).await;
    }

    // Sequential creates over one connection.
    let mut create = Samples::new();
    let start = Instant::now();
    for i in 0..pods {
        create.push(timed_create(&api, "bench-seq", &format!("p-{i:05}"), "seq").await);
    }
    let rate = pods as f64 / start.elapsed().as_secs_f64();
    println!(
        "create_pod_latency_ms {} (n={pods}, sequential, one {version} connection, {rate:.0} pods/s; {GOAL_CREATE})",
        create.p50_p99_ms()
    );

    // At rest before the lists: what ten JSON and ten Table lists leave behind is measured
    // against it once they finish (the goal: within 20 %).
    let rss_before_lists = c.rss_at_rest_kib();
    list_peak_memory(c, &api, pods).await;
    list_latencies(&api, pods).await;
    println!(
        "controller_rss_mb {} (at rest after {LIST_RUNS} JSON and {LIST_RUNS} Table lists of {pods} pods; baseline: {} MB at rest before them; goal: within 20 %)",
        megabytes(c.rss_at_rest_kib()),
        megabytes(rss_before_lists)
    );
    watch_latency(&api, WATCH_WRITES.min(pods.max(1))).await;

    let rss_rest = c.rss_at_rest_kib();
    println!(
        "controller_rss_mb {} (at rest with {pods} pods; baseline: {} MB with an empty store; {GOAL_RSS})",
        megabytes(rss_rest),
        megabytes(rss_empty)
    );

    // Concurrent creates: separate clients, so separate connections.
    let per_client = pods.div_ceil(CONCURRENT_CLIENTS);
    let start = Instant::now();
    let tasks: Vec<_> = (0..CONCURRENT_CLIENTS)
        .map(|client| {
            let api = admin(c);
            tokio::spawn(async move {
                let mut samples = Samples::new();
                for i in (client * per_client)..((client + 1) * per_client).min(pods) {
                    let name = format!("c-{i:05}");
                    samples.push(timed_create(&api, "bench-conc", &name, "conc").await);
                }
                samples
            })
        })
        .collect();
    let mut concurrent = Samples::new();
    for task in tasks {
        concurrent.extend(task.await.unwrap_or_else(|e| panic!("client task: {e}")));
    }
    let rate = concurrent.len() as f64 / start.elapsed().as_secs_f64();
    println!(
        "create_pod_latency_ms {} (n={}, {CONCURRENT_CLIENTS} concurrent clients, {rate:.0} pods/s; {GOAL_CREATE})",
        concurrent.p50_p99_ms(),
        concurrent.len()
    );
    println!(
        "controller_rss_mb {} (after the concurrent run, {} pods stored)",
        megabytes(c.rss_at_rest_kib()),
        pods + concurrent.len()
    );
}

/// One list of the `bench-seq` pods in the form `accept` asks for: its time and size.
async fn list_once(
    api: &AsyncApi,
    pods: usize,
    accept: &str,
    form: &str,
    check: bool,
) -> (Duration, usize) {
    let req = Req::get("/api/v1/namespaces/bench-seq/pods").header("Accept", accept);
    let t = Instant::now();
    let reply = api.send(&req).await.unwrap_or_else(|e| panic!("{e}"));
    let took = t.elapsed();
    if reply.status != 200 {
        panic!("list ({form}): {}", reply.describe());
    }
    if check {
        let body = reply.json();
        let count = body["items"]
            .as_array()
            .or(body["rows"].as_array())
            .map_or(0, Vec::len);
        if count != pods {
            println!("WARNING: the {form} list returned {count} entries, not {pods}");
        }
    }
    (took, reply.body.len())
}

fn p50_secs(s: &mut Samples) -> f64 {
    s.percentile(50.0).map_or(0.0, |d| d.as_secs_f64())
}

/// The memory one list adds while it is served: the controller's peak RSS during one JSON list
/// and then one Table list, each from rest, against the response's size (issue 32's goal: at
/// most twice the response).
async fn list_peak_memory(c: &Controller, api: &AsyncApi, pods: usize) {
    for (accept, form) in [("application/json", "JSON"), (TABLE, "Table")] {
        let Some(rest) = c.rss_at_rest_kib() else {
            println!("WARNING: no RSS for the controller");
            return;
        };
        if !c.reset_peak_rss() {
            println!("WARNING: cannot reset the controller's peak RSS (clear_refs)");
            return;
        }
        let (_, bytes) = list_once(api, pods, accept, form, false).await;
        let added = c.peak_rss_kib().unwrap_or(rest).saturating_sub(rest) as f64 * 1024.0;
        println!(
            "list_pods_peak_added_mb {:.1} ({form}, one list of {pods} pods; baseline: the response, {:.1} MB: {:.2}x; goal: at most 2x)",
            added / 1e6,
            bytes as f64 / 1e6,
            added / (bytes as f64).max(1.0)
        );
    }
}

/// JSON and Table lists of the pods, taken in turns (a JSON list, then a Table list, ten
/// times) so that both see the same machine; the JSON list is the Table's baseline.
async fn list_latencies(api: &AsyncApi, pods: usize) {
    let (mut json, mut table) = (Samples::new(), Samples::new());
    let (mut json_bytes, mut table_bytes) = (0, 0);
    for run in 0..LIST_RUNS {
        let (t, b) = list_once(api, pods, "application/json", "JSON", run == 0).await;
        json.push(t);
        json_bytes = b;
        let (t, b) = list_once(api, pods, TABLE, "Table", run == 0).await;
        table.push(t);
        table_bytes = b;
    }
    println!(
        "list_pods_latency_ms {} (n={LIST_RUNS} lists of {pods} pods, JSON, {:.1} MB each; {GOAL_LIST})",
        json.p50_p99_ms(),
        json_bytes as f64 / 1e6
    );
    println!(
        "list_pods_table_latency_ms {} (n={LIST_RUNS} lists of {pods} pods, Table, {:.1} MB each, each after a JSON list; {GOAL_LIST})",
        table.p50_p99_ms(),
        table_bytes as f64 / 1e6
    );
    println!(
        "list_pods_table_to_json {:.2}x (p50 against p50, same run; goal: at most 2x)",
        p50_secs(&mut table) / p50_secs(&mut json).max(f64::MIN_POSITIVE)
    );
}

/// Writes `writes` configmaps one after another while a watch on their namespace runs; the
/// latency of each is the time from the write's response to its event's arrival (0 when the
/// event came first).
async fn watch_latency(api: &AsyncApi, writes: usize) {
    let mut delivery =
        berth_tests::watch_delivery::measure(api, "bench-watch", "w", writes, Duration::ZERO).await;
    println!(
        "watch_delivery_latency_ms {} ({GOAL_WATCH})",
        delivery.describe()
    );
}
