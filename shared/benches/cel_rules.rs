//! CEL validation rules benchmark (prints figures, never fails on them): the time to check one
//! custom resource against a schema carrying 30 `x-kubernetes-validations` rules (at the root,
//! on `spec`, on map values and on list items, with transition rules on update), next to the
//! baseline of the same run: parsing the object's JSON bytes once. The first check compiles
//! the rules (then cached); the figures after it are the steady state every write pays.
//! Run it with `cargo bench -p berth-shared --bench cel_rules`.

use std::time::{Duration, Instant};

use berth_shared::cel::rules;
use serde_json::{Value, json};

const RUNS: usize = 2000;

fn schema() -> Value {
    let port_rules = json!([
        {"rule": "self.port > 0 && self.port < 65536", "message": "port out of range"},
        {"rule": "self.name.matches('^[a-z][a-z0-9-]*$')", "message": "bad port name"},
        {"rule": "!has(self.protocol) || self.protocol in ['TCP', 'UDP', 'SCTP']"},
        {"rule": "self.port == oldSelf.port || self.name.startsWith('new-')", "message": "ports are fixed"}
    ]);
    let spec_rules = json!([
        {"rule": "self.minReplicas <= self.maxReplicas", "message": "min must not exceed max"},
        {"rule": "self.replicas >= self.minReplicas && self.replicas <= self.maxReplicas"},
        {"rule": "self.image.contains(':')", "message": "image needs a tag"},
        {"rule": "!self.image.endsWith(':latest')", "message": "no latest tag"},
        {"rule": "self.mode in ['Auto', 'Manual']"},
        {"rule": "self.mode == 'Manual' || !has(self.schedule)"},
        {"rule": "self.ports.all(p, p.port != 22)", "message": "ssh is not allowed"},
        {"rule": "self.ports.map(p, p.name).size() == self.ports.size()"},
        {"rule": "self.ports.exists(p, p.name == 'http')", "message": "needs an http port"},
        {"rule": "size(self.labels) <= 16"},
        {"rule": "self.labels.all(k, k.size() <= 63)"},
        {"rule": "quantity(self.memory).isLessThan(quantity('64Gi'))"},
        {"rule": "quantity(self.cpu).compareTo(quantity('100m')) >= 0"},
        {"rule": "isURL(self.endpoint) && url(self.endpoint).getScheme() == 'https'"},
        {"rule": "self.tags.isSorted()", "messageExpression": "'tags must be sorted: ' + self.tags.join(',')"},
        {"rule": "self.replicas >= oldSelf.replicas || self.mode == 'Manual'", "message": "cannot scale down in Auto"},
        {"rule": "self.image == oldSelf.image || self.mode == 'Manual'", "message": "image is immutable in Auto"},
        {"rule": "self.tags.filter(t, t.startsWith('x-')).size() == 0"},
        {"rule": "self.ports.map(p, p.port).max() < 10000"},
        {"rule": "self.maxReplicas - self.minReplicas <= 100", "message": "range too wide"},
        {"rule": "self.labels.exists(k, k == 'app')", "message": "needs an app label"}
    ]);
    json!({
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.metadata.name.size() <= 40", "message": "name too long"},
            {"rule": "!has(self.status) || self.status.ready <= self.spec.replicas"}
        ],
        "properties": {
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "x-kubernetes-validations": spec_rules,
                "properties": {
                    "replicas": {"type": "integer"}, "minReplicas": {"type": "integer"},
                    "maxReplicas": {"type": "integer"}, "image": {"type": "string"},
                    "mode": {"type": "string"}, "schedule": {"type": "string"},
                    "memory": {"type": "string"}, "cpu": {"type": "string"},
                    "endpoint": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "labels": {"type": "object", "additionalProperties": {
                        "type": "string",
                        "x-kubernetes-validations": [
                            {"rule": "self.size() <= 63"},
                            {"rule": "!self.contains(' ')"}
                        ]
                    }},
                    "ports": {
                        "type": "array", "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "x-kubernetes-validations": port_rules,
                            "properties": {"name": {"type": "string"}, "port": {"type": "integer"},
                                "protocol": {"type": "string"}}}
                    }
                }
            },
            "status": {"type": "object", "properties": {"ready": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.ready >= 0"}]}
        }
    })
}

fn object(replicas: i64) -> Value {
    let ports: Vec<Value> = ["http", "https", "metrics", "admin"]
        .iter()
        .enumerate()
        .map(|(i, n)| json!({"name": n, "port": 8080 + i, "protocol": "TCP"}))
        .collect();
    json!({
        "apiVersion": "bench.berth.dev/v1", "kind": "Widget",
        "metadata": {"name": "widget-1", "namespace": "default"},
        "spec": {
            "replicas": replicas, "minReplicas": 1, "maxReplicas": 10,
            "image": "registry.example/widget:1.2.3", "mode": "Auto",
            "memory": "512Mi", "cpu": "250m", "endpoint": "https://widget.example:8443/api",
            "tags": ["a", "b", "c"],
            "labels": {"app": "widget", "tier": "backend", "team": "platform"},
            "ports": ports
        },
        "status": {"ready": 2}
    })
}

fn count_rules(schema: &Value) -> usize {
    match schema {
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| match (k.as_str(), v) {
                ("x-kubernetes-validations", Value::Array(rules)) => rules.len(),
                _ => count_rules(v),
            })
            .sum(),
        Value::Array(items) => items.iter().map(count_rules).sum(),
        _ => 0,
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time(mut f: impl FnMut()) -> Duration {
    let samples = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    median(samples)
}

fn main() {
    let schema = schema();
    let new = object(3);
    let old = object(2);
    let bytes = serde_json::to_vec(&new).unwrap_or_default();
    println!(
        "cel_rules: {} rules in the schema, object {} bytes (3 label values and 4 ports \
         run their nodes' rules once each)",
        count_rules(&schema),
        bytes.len()
    );

    let start = Instant::now();
    let first = rules::check(&schema, &new, None);
    println!("first check (compiles the rules): {:?}", start.elapsed());
    assert!(
        first.is_empty(),
        "the bench object must be valid: {first:?}"
    );

    let create = time(|| {
        std::hint::black_box(rules::check(&schema, &new, None));
    });
    let update = time(|| {
        std::hint::black_box(rules::check(&schema, &new, Some(&old)));
    });
    let parse = time(|| {
        std::hint::black_box(serde_json::from_slice::<Value>(&bytes).ok());
    });
    println!("check on create (median of {RUNS}): {create:?}");
    println!("check on update, with transition rules (median of {RUNS}): {update:?}");
    println!("baseline, parsing the object's JSON once (median of {RUNS}): {parse:?}");
}
