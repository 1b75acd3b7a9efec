//! Custom resource benchmark (issue 34; prints figures, never fails on them): the create
//! latency of a custom resource whose schema carries 30 CEL validation rules (and 30 typed,
//! bounded fields), against a ConfigMap of the same size, in the same run: creates alternate
//! between the two so a neighbour's load hits both alike. `BERTH_BENCH_CREATES` (default 500
//! of each); `BERTH_CONTROLLER_BIN` picks the controller (a release build gives the
//! meaningful figures).

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

fn main() {
    let creates = env_usize("BERTH_BENCH_CREATES", 500);
    let c = Controller::start();
    let api = c.admin_api();
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
