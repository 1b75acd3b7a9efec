//! Table list benchmark (prints figures, never fails on them): the cost of turning N stored pods
//! (default 10,000; `BERTH_BENCH_PODS`) into the bytes of a `kubectl get pods` Table, written
//! row by row from the stored bytes ([`berth_shared::table::write_table`], what the API serves)
//! against the baseline of the same run: each object parsed whole, the Table built as one value
//! and then encoded (what the API served before), and the JSON list's splice of stored bytes.
//! Run it with `cargo bench -p berth-shared --bench table_list`.

use berth_shared::table::{IncludeObject, table_with, write_table};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const RUNS: usize = 10;

/// A stored pod as the API keeps one that `kubectl run` created and the scheduler has not yet
/// placed: defaulted spec, the create's managedFields, a Pending status.
fn stored_pod(i: usize) -> Vec<u8> {
    let name = format!("bench-{i:05}");
    let pod = json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": name, "namespace": "default", "uid": format!("5f0c8a52-0000-4000-8000-{i:012}"),
            "resourceVersion": (1000 + i).to_string(), "creationTimestamp": "2026-11-29T12:00:00Z",
            "labels": {"app": "bench", "run": name},
            "managedFields": [{
                "manager": "kubectl-run", "operation": "Update", "apiVersion": "v1",
                "time": "2026-11-29T12:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:run": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {".": {}, "f:command": {},
                        "f:image": {}, "f:imagePullPolicy": {}, "f:name": {}, "f:resources": {},
                        "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}}},
                        "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {},
                        "f:schedulerName": {}, "f:securityContext": {},
                        "f:terminationGracePeriodSeconds": {}}}
            }]
        },
        "spec": {
            "containers": [{"name": "main", "image": "busybox:1.28", "command": ["true"],
                "resources": {}, "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
            "serviceAccount": "default", "securityContext": {}, "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                    "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                    "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {"phase": "Pending", "qosClass": "BestEffort"}
    });
    serde_json::to_vec(&pod).unwrap_or_default()
}

/// The median of `RUNS` timings of `f`, and what the last run returned.
fn median<T>(mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut times = Vec::with_capacity(RUNS);
    let mut last = None;
    for _ in 0..RUNS {
        let start = Instant::now();
        last = Some(f());
        times.push(start.elapsed());
    }
    times.sort();
    (times[RUNS / 2], last.unwrap_or_else(f))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let n: usize = std::env::var("BERTH_BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let stored: Vec<Vec<u8>> = (0..n).map(stored_pod).collect();
    let bytes: usize = stored.iter().map(Vec::len).sum();
    let now = jiff::Timestamp::now();
    println!(
        "table_list bench: {n} pods, {:.1} MB stored ({} bytes a pod), median of {RUNS} runs",
        bytes as f64 / 1e6,
        bytes / n.max(1)
    );
    let (json, json_bytes) = median(|| {
        let mut out = Vec::with_capacity(bytes + n + 64);
        out.extend_from_slice(br#"{"kind":"PodList","apiVersion":"v1","metadata":{},"items":["#);
        for (i, s) in stored.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(s);
        }
        out.extend_from_slice(b"]}");
        out
    });
    let (built, built_bytes) = median(|| {
        let objects: Vec<Value> = stored
            .iter()
            .filter_map(|s| serde_json::from_slice(s).ok())
            .collect();
        table_with("Pod", &objects, Some("1"), now, IncludeObject::Metadata).to_string()
    });
    let (written, written_bytes) = median(|| {
        let mut out = Vec::with_capacity(512 + bytes);
        let rows = stored.iter().map(Vec::as_slice);
        match write_table(
            &mut out,
            "Pod",
            rows,
            Some("1"),
            None,
            now,
            IncludeObject::Metadata,
        ) {
            Ok(()) => out,
            Err(e) => panic!("write_table: {e}"),
        }
    });
    let same = built_bytes.as_bytes() == written_bytes.as_slice();
    println!(
        "  JSON list (stored bytes spliced)          {:8.1} ms  {:6.1} MB",
        ms(json),
        json_bytes.len() as f64 / 1e6
    );
    println!(
        "  Table, built as one value (baseline)      {:8.1} ms  {:6.1} MB",
        ms(built),
        built_bytes.len() as f64 / 1e6
    );
    println!(
        "  Table, written row by row (served)        {:8.1} ms  {:6.1} MB  ({:.2}x the baseline's time; same bytes: {same})",
        ms(written),
        written_bytes.len() as f64 / 1e6,
        ms(written) / ms(built)
    );
}
