//! Custom resource benchmark (issue 34; prints figures, never fails on them): how long a new
//! definition takes to be `Established` and served (acceptance: within 1 s), over
//! `BERTH_BENCH_DEFINITIONS` definitions (default 20), beside a ConfigMap's create-and-read
//! round trip in the same run; and the create latency of a custom resource whose schema
//! carries 30 CEL validation rules (and 30 typed, bounded fields), against a ConfigMap of the
//! same size, in the same run: creates alternate between the two so a neighbour's load hits
//! both alike. `BERTH_BENCH_CREATES` (default 500 of each); `BERTH_CONTROLLER_BIN` picks the
//! controller (a release build gives the meaningful figures).

use std::time::{Duration, Instant};

use berth_tests::Controller;
use berth_tests::bench::env_usize;
use berth_tests::stats::Samples;
use serde_json::{Value, json};

const GOAL: &str = "≤ 2× the ConfigMap's (issue 34)";
const FIELDS: usize = 30;

/// A definition with `FIELDS` bounded integer fields and one CEL rule over each.
fn definition() -> Value {
    let mut properties = serde_json::Map::new();
    let mut rules = Vec::new();
    for i in 0..FIELDS {
        properties.insert(
            format!("f{i}"),
            json!({"type": "integer", "minimum": 0, "maximum": 1_000_000}),
        );
        rules.push(json!({"rule": format!("self.f{i} % 7 != 3"), "message": format!("f{i} must not be 3 modulo 7")}));
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "samples.bench.example.com"},
        "spec": {"group": "bench.example.com", "scope": "Namespaced",
                 "names": {"plural": "samples", "kind": "Sample"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                         "spec": {"type": "object", "required": (0..FIELDS).map(|i| format!("f{i}")).collect::<Vec<_>>(),
                                  "properties": properties, "x-kubernetes-validations": rules}}}}}]}
    })
}

fn sample(i: usize) -> Value {
    let spec: serde_json::Map<String, Value> = (0..FIELDS)
        .map(|f| (format!("f{f}"), json!(100_000 + i * 7 + f % 3)))
        .collect();
    json!({"apiVersion": "bench.example.com/v1", "kind": "Sample",
           "metadata": {"name": format!("s-{i}")}, "spec": spec})
}

/// A ConfigMap whose JSON is as long as `custom`'s.
fn config_map(i: usize, custom: &Value) -> Value {
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("c-{i}")}, "data": {"d": ""}});
    let pad = custom
        .to_string()
        .len()
        .saturating_sub(cm.to_string().len());
    cm["data"]["d"] = Value::String("x".repeat(pad));
    cm
}

/// A small definition of its own group, `n`.
fn small_definition(n: usize) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.g{n}.bench.example.com")},
        "spec": {"group": format!("g{n}.bench.example.com"), "scope": "Namespaced",
                 "names": {"plural": "widgets", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                         "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}
    })
}

fn established(crd: &Value) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        })
}

/// Creates definitions one at a time and times each until the API says `Established`, and until
/// a list of its resources answers 200 (both polled without pause); and a ConfigMap's create
/// and first read, as the baseline of the same run.
fn time_establishing(api: &berth_tests::Api, definitions: usize) {
    let (mut to_established, mut to_served, mut baseline) =
        (Samples::new(), Samples::new(), Samples::new());
    let deadline = Duration::from_secs(30);
    for n in 0..definitions {
        let started = Instant::now();
        api.create(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &small_definition(n),
        );
        let path = format!(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.g{n}.bench.example.com"
        );
        while !established(&api.get_ok(&path)) {
            assert!(started.elapsed() < deadline, "{path} never Established");
        }
        to_established.push(started.elapsed());
        let list = format!("/apis/g{n}.bench.example.com/v1/widgets");
        while api.get(&list).status != 200 {
            assert!(started.elapsed() < deadline, "{list} never served");
        }
        to_served.push(started.elapsed());
        let started = Instant::now();
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("established-{n}")}});
        api.create("/api/v1/namespaces/default/configmaps", &cm);
        api.get_ok(&format!(
            "/api/v1/namespaces/default/configmaps/established-{n}"
        ));
        baseline.push(started.elapsed());
    }
    println!(
        "definition created to Established ({definitions} definitions): {}; goal ≤ 1 s (issue 34)",
        to_established.p50_p99_ms()
    );
    println!(
        "definition created to its resources served: {}",
        to_served.p50_p99_ms()
    );
    println!(
        "ConfigMap create and read back, same run (baseline): {}",
        baseline.p50_p99_ms()
    );
}

fn main() {
    let creates = env_usize("BERTH_BENCH_CREATES", 500);
    let definitions = env_usize("BERTH_BENCH_DEFINITIONS", 20);
    let c = Controller::start();
    let api = c.admin_api();
    time_establishing(&api, definitions);
    api.create(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &definition(),
    );
    c.wait_for(Duration::from_secs(10), "the definition served", || {
        let r = api.get("/apis/bench.example.com/v1/samples");
        if r.status == 200 {
            Ok(())
        } else {
            Err(r.status)
        }
    });
    let (mut custom, mut plain) = (Samples::new(), Samples::new());
    for i in 0..creates {
        let cr = sample(i);
        let cm = config_map(i, &cr);
        let started = Instant::now();
        api.create("/apis/bench.example.com/v1/namespaces/default/samples", &cr);
        custom.push(started.elapsed());
        let started = Instant::now();
        api.create("/api/v1/namespaces/default/configmaps", &cm);
        plain.push(started.elapsed());
    }
    let ratio = |a: &mut Samples, b: &mut Samples, p: f64| {
        let (a, b) = (a.percentile(p), b.percentile(p));
        a.zip(b)
            .map_or(f64::NAN, |(a, b)| a.as_secs_f64() / b.as_secs_f64())
    };
    let (r50, r99) = (
        ratio(&mut custom, &mut plain, 50.0),
        ratio(&mut custom, &mut plain, 99.0),
    );
    println!(
        "custom resource create, {FIELDS} CEL rules ({creates} creates): {}",
        custom.p50_p99_ms()
    );
    println!(
        "ConfigMap of the same size, same run (baseline): {}",
        plain.p50_p99_ms()
    );
    println!("ratio p50 {r50:.2}x, p99 {r99:.2}x; goal {GOAL}");
}
