//! The baseline check upstream added in 1.34: probes and lifecycle handlers may not reach
//! another host (`httpGet.host` / `tcpSocket.host` other than empty, `127.0.0.1` or `::1`),
//! as the kubelet would make those requests from the node on the pod's behalf.
//! Planner: pure, no I/O.

use super::checks::{Check, Since, Violation, join_quote, pluralize};
use super::level::Level;
use k8s_openapi::api::core::v1::{Lifecycle, PodSpec, Probe};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeSet;

pub(super) const HOST_PROBES_AND_HOST_LIFECYCLE: Check = Check {
    id: "hostProbesAndHostLifecycle",
    level: Level::Baseline,
    versions: &[Since {
        since: 34,
        check: host_probes_and_host_lifecycle,
        overrides: &[],
    }],
};

const ALLOWED: [&str; 2] = ["127.0.0.1", "::1"];

/// The hosts a container's probes and lifecycle handlers name.
fn hosts<'a>(probes: [Option<&'a Probe>; 3], lifecycle: Option<&'a Lifecycle>) -> Vec<&'a str> {
    let handlers = [
        lifecycle.and_then(|l| l.post_start.as_ref()),
        lifecycle.and_then(|l| l.pre_stop.as_ref()),
    ];
    let mut out = Vec::new();
    for p in probes.into_iter().flatten() {
        out.extend(p.http_get.as_ref().and_then(|h| h.host.as_deref()));
        out.extend(p.tcp_socket.as_ref().and_then(|t| t.host.as_deref()));
    }
    for h in handlers.into_iter().flatten() {
        out.extend(h.http_get.as_ref().and_then(|g| g.host.as_deref()));
        out.extend(h.tcp_socket.as_ref().and_then(|t| t.host.as_deref()));
    }
    out
}

fn host_probes_and_host_lifecycle(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    // Init containers, containers, then ephemeral ones, as upstream visits them.
    let mut each: Vec<(&str, Vec<&str>)> = Vec::new();
    for c in spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
    {
        let probes = [&c.liveness_probe, &c.readiness_probe, &c.startup_probe];
        each.push((
            &c.name,
            hosts(probes.map(Option::as_ref), c.lifecycle.as_ref()),
        ));
    }
    for c in spec.ephemeral_containers.iter().flatten() {
        let probes = [&c.liveness_probe, &c.readiness_probe, &c.startup_probe];
        each.push((
            &c.name,
            hosts(probes.map(Option::as_ref), c.lifecycle.as_ref()),
        ));
    }
    let mut forbidden = BTreeSet::new();
    let mut names = Vec::new();
    for (name, hosts) in each {
        let bad: Vec<&str> = hosts
            .into_iter()
            .filter(|h| !h.is_empty() && !ALLOWED.contains(h))
            .collect();
        if !bad.is_empty() {
            names.push(name);
            forbidden.extend(bad);
        }
    }
    Violation::for_containers("hostProbesOrHostLifecycle", &names, || {
        format!(
            "{} {} {}",
            pluralize("uses", "use", names.len()),
            pluralize(
                "hostProbeOrHostLifecycle",
                "hostProbesOrHostLifecycles",
                forbidden.len()
            ),
            join_quote(forbidden)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> PodSpec {
        serde_json::from_value(v).expect("a pod spec")
    }

    #[test]
    fn probes_and_handlers_may_reach_only_the_pod_itself() {
        let ok = spec(json!({"containers": [{"name": "a",
            "livenessProbe": {"httpGet": {"port": 80, "host": "127.0.0.1"}},
            "readinessProbe": {"tcpSocket": {"port": 80, "host": ""}},
            "lifecycle": {"preStop": {"httpGet": {"port": 80, "host": "::1"}}}}]}));
        assert_eq!(
            host_probes_and_host_lifecycle(&ObjectMeta::default(), &ok),
            None
        );
        let bad = spec(json!({
            "initContainers": [{"name": "i",
                "startupProbe": {"tcpSocket": {"port": 1, "host": "db.internal"}}}],
            "containers": [{"name": "a",
                "livenessProbe": {"httpGet": {"port": 80, "host": "10.0.0.1"}},
                "lifecycle": {"postStart": {"httpGet": {"port": 80, "host": "db.internal"}}}},
                {"name": "b"}]}));
        let v = host_probes_and_host_lifecycle(&ObjectMeta::default(), &bad).expect("a violation");
        assert_eq!(v.reason, "hostProbesOrHostLifecycle");
        assert_eq!(
            v.detail,
            "containers \"i\", \"a\" use hostProbesOrHostLifecycles \"10.0.0.1\", \"db.internal\""
        );
    }
}
