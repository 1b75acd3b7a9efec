//! Upstream `ValidatePodSpec` and `ValidatePodTemplateSpec`: the containers and init
//! containers, volumes, policies and the pod-level fields, for Pods and every pod template.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, PodSecurityContext, PodSpec, PodTemplateSpec};

use super::affinity::{validate_affinity, validate_topology_spread};
use super::container::{host_port_conflicts, validate_container_common};
use super::field::{FieldError, Path, validate_choice, validate_optional_choice};
use super::meta::{validate_annotations, validate_labels};
use super::names::{
    dns1123_label, dns1123_subdomain, each_invalid, inclusive_range_error, qualified_name,
};
use super::probe::{ProbeKind, validate_lifecycle, validate_probe};
use super::resources::validate_id;
use super::scheduling::{
    validate_dns_config, validate_host_aliases, validate_scheduling_gates, validate_tolerations,
};
use super::volume::validate_volumes;

const NOT_FOR_PLAIN_INIT: &str = "may not be set for init containers without restartPolicy=Always";

/// Where the spec lives: a Pod gets stricter host-network port checks than a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpecOwner {
    Pod,
    Template,
}

/// Upstream `ValidatePodTemplateSpec`: template labels (reported at `<path>.labels`),
/// annotations and the pod spec; templates may not carry ephemeral containers.
pub(crate) fn validate_pod_template(t: &PodTemplateSpec, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(meta) = &t.metadata {
        if let Some(l) = &meta.labels {
            errs.extend(validate_labels(l, &path.child("labels")));
        }
        if let Some(a) = &meta.annotations {
            errs.extend(validate_annotations(a, &path.child("annotations")));
        }
    }
    let default_spec = PodSpec::default();
    let spec = t.spec.as_ref().unwrap_or(&default_spec);
    errs.extend(validate_pod_spec(
        spec,
        SpecOwner::Template,
        &path.child("spec"),
    ));
    if spec
        .ephemeral_containers
        .as_ref()
        .is_some_and(|e| !e.is_empty())
    {
        errs.push(FieldError::forbidden(
            &path.child("spec").child("ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        ));
    }
    errs
}

/// Upstream `ValidatePodSpec`.
pub(crate) fn validate_pod_spec(spec: &PodSpec, owner: SpecOwner, path: &Path) -> Vec<FieldError> {
    let grace = spec.termination_grace_period_seconds;
    let (volumes, mut errs) = validate_volumes(
        spec.volumes.as_deref().unwrap_or_default(),
        &path.child("volumes"),
    );
    errs.extend(validate_containers(
        &spec.containers,
        &volumes,
        grace,
        &path.child("containers"),
    ));
    let inits = spec.init_containers.as_deref().unwrap_or_default();
    errs.extend(validate_init_containers(
        inits,
        &spec.containers,
        &volumes,
        grace,
        &path.child("initContainers"),
    ));
    if spec.host_network == Some(true) {
        errs.extend(validate_host_network_ports(
            &spec.containers,
            owner,
            &path.child("containers"),
        ));
    }
    errs.extend(validate_choice(
        spec.restart_policy.as_deref(),
        &["Always", "OnFailure", "Never"],
        &path.child("restartPolicy"),
    ));
    let dns_policy = spec.dns_policy.as_deref().unwrap_or_default();
    errs.extend(validate_choice(
        Some(dns_policy),
        &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        &path.child("dnsPolicy"),
    ));
    if let Some(ns) = &spec.node_selector {
        errs.extend(validate_labels(ns, &path.child("nodeSelector")));
    }
    if let Some(sc) = &spec.security_context {
        errs.extend(validate_pod_security_context(
            sc,
            &path.child("securityContext"),
        ));
    }
    if spec.share_process_namespace == Some(true) && spec.host_pid == Some(true) {
        errs.push(FieldError::invalid(
            &path.child("securityContext").child("shareProcessNamespace"),
            true,
            "ShareProcessNamespace and HostPID cannot both be enabled",
        ));
    }
    if let Some(a) = &spec.affinity {
        errs.extend(validate_affinity(a, &path.child("affinity")));
    }
    errs.extend(validate_dns_config(
        spec.dns_config.as_ref(),
        dns_policy,
        &path.child("dnsConfig"),
    ));
    for (i, g) in spec.readiness_gates.iter().flatten().enumerate() {
        let p = path.child("readinessGates").index(i).child("conditionType");
        errs.extend(each_invalid(
            &p,
            &g.condition_type,
            qualified_name(&g.condition_type),
        ));
    }
    errs.extend(validate_scheduling_gates(
        spec.scheduling_gates.as_deref().unwrap_or_default(),
        &path.child("schedulingGates"),
    ));
    errs.extend(validate_topology_spread(
        spec.topology_spread_constraints
            .as_deref()
            .unwrap_or_default(),
        &path.child("topologySpreadConstraints"),
    ));
    errs.extend(validate_named_fields(spec, path));
    if let Some(v) = spec.active_deadline_seconds
        && !(1..=i64::from(i32::MAX)).contains(&v)
    {
        errs.push(FieldError::invalid(
            &path.child("activeDeadlineSeconds"),
            v,
            inclusive_range_error(1, i32::MAX.into()),
        ));
    }
    if let Some(v) = spec.termination_grace_period_seconds.filter(|v| *v < 0) {
        errs.push(FieldError::invalid(
            &path.child("terminationGracePeriodSeconds"),
            v,
            "must be greater than or equal to 0",
        ));
    }
    errs.extend(validate_tolerations(
        spec.tolerations.as_deref().unwrap_or_default(),
        &path.child("tolerations"),
    ));
    errs.extend(validate_host_aliases(
        spec.host_aliases.as_deref().unwrap_or_default(),
        &path.child("hostAliases"),
    ));
    if let Some(p) = spec.preemption_policy.as_deref() {
        errs.extend(validate_choice(
            Some(p),
            &["PreemptLowerPriority", "Never"],
            &path.child("preemptionPolicy"),
        ));
    }
    errs.extend(validate_optional_choice(
        spec.os.as_ref().map(|os| os.name.as_str()),
        &["linux", "windows"],
        &path.child("os").child("name"),
    ));
    errs
}

/// Pod-level names: service account, node, hostname, subdomain, priority and runtime classes.
fn validate_named_fields(spec: &PodSpec, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let subdomains = [
        ("serviceAccountName", &spec.service_account_name),
        ("nodeName", &spec.node_name),
        ("priorityClassName", &spec.priority_class_name),
        ("runtimeClassName", &spec.runtime_class_name),
    ];
    for (field, v) in subdomains {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
            errs.extend(each_invalid(&path.child(field), v, dns1123_subdomain(v)));
        }
    }
    for (field, v) in [("hostname", &spec.hostname), ("subdomain", &spec.subdomain)] {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
            errs.extend(each_invalid(&path.child(field), v, dns1123_label(v)));
        }
    }
    errs
}

fn validate_pod_security_context(sc: &PodSecurityContext, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (field, id) in [
        ("fsGroup", sc.fs_group),
        ("runAsUser", sc.run_as_user),
        ("runAsGroup", sc.run_as_group),
    ] {
        errs.extend(validate_id(id, &path.child(field)));
    }
    for (i, g) in sc.supplemental_groups.iter().flatten().enumerate() {
        errs.extend(validate_id(
            Some(*g),
            &path.child("supplementalGroups").index(i),
        ));
    }
    errs.extend(validate_optional_choice(
        sc.fs_group_change_policy.as_deref(),
        &["OnRootMismatch", "Always"],
        &path.child("fsGroupChangePolicy"),
    ));
    errs
}

fn validate_probes_and_hooks(c: &Container, grace: Option<i64>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(lc) = &c.lifecycle {
        errs.extend(validate_lifecycle(lc, grace, &path.child("lifecycle")));
    }
    let probes = [
        ("livenessProbe", &c.liveness_probe, ProbeKind::Liveness),
        ("readinessProbe", &c.readiness_probe, ProbeKind::Readiness),
        ("startupProbe", &c.startup_probe, ProbeKind::Startup),
    ];
    for (field, probe, kind) in probes {
        if let Some(p) = probe {
            errs.extend(validate_probe(p, kind, grace, &path.child(field)));
        }
    }
    errs
}

fn validate_containers(
    containers: &[Container],
    volumes: &BTreeSet<String>,
    grace: Option<i64>,
    path: &Path,
) -> Vec<FieldError> {
    if containers.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let mut errs = Vec::new();
    let mut names = BTreeSet::new();
    for (i, c) in containers.iter().enumerate() {
        let ip = path.index(i);
        errs.extend(validate_container_common(c, volumes, &ip));
        if !names.insert(c.name.as_str()) {
            errs.push(FieldError::duplicate(&ip.child("name"), c.name.as_str()));
        }
        errs.extend(validate_probes_and_hooks(c, grace, &ip));
        if c.restart_policy.is_some() {
            errs.push(FieldError::forbidden(
                &ip.child("restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
    }
    errs.extend(host_port_conflicts(
        containers.iter().enumerate(),
        path,
        &mut BTreeSet::new(),
    ));
    errs
}

fn validate_init_containers(
    inits: &[Container],
    regular: &[Container],
    volumes: &BTreeSet<String>,
    grace: Option<i64>,
    path: &Path,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names: BTreeSet<&str> = regular.iter().map(|c| c.name.as_str()).collect();
    for (i, c) in inits.iter().enumerate() {
        let ip = path.index(i);
        errs.extend(validate_container_common(c, volumes, &ip));
        let mut sidecar = false;
        if let Some(rp) = c.restart_policy.as_deref() {
            if rp == "Always" {
                sidecar = true;
            } else {
                errs.push(FieldError::not_supported(
                    &ip.child("restartPolicy"),
                    rp,
                    &["Always"],
                ));
            }
        }
        if names.contains(c.name.as_str()) {
            errs.push(FieldError::duplicate(&ip.child("name"), c.name.as_str()));
        } else if !c.name.is_empty() {
            names.insert(c.name.as_str());
        }
        // Init containers run one at a time, so only ports within one container can clash.
        errs.extend(host_port_conflicts(
            std::iter::once((i, c)),
            path,
            &mut BTreeSet::new(),
        ));
        if sidecar {
            errs.extend(validate_probes_and_hooks(c, grace, &ip));
        } else {
            let forbidden = [
                ("lifecycle", c.lifecycle.is_some()),
                ("livenessProbe", c.liveness_probe.is_some()),
                ("readinessProbe", c.readiness_probe.is_some()),
                ("startupProbe", c.startup_probe.is_some()),
            ];
            for (field, set) in forbidden {
                if set {
                    errs.push(FieldError::forbidden(&ip.child(field), NOT_FOR_PLAIN_INIT));
                }
            }
        }
        if c.resize_policy.as_ref().is_some_and(|r| !r.is_empty()) {
            let v = serde_json::to_value(&c.resize_policy).unwrap_or_default();
            errs.push(FieldError::invalid(
                &ip.child("resizePolicy"),
                v,
                "must not be set for init containers",
            ));
        }
    }
    errs
}

/// With host networking a port's hostPort must equal its containerPort (Pods default it).
fn validate_host_network_ports(
    containers: &[Container],
    owner: SpecOwner,
    path: &Path,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, c) in containers.iter().enumerate() {
        for (j, p) in c.ports.iter().flatten().enumerate() {
            let host = p.host_port.unwrap_or(0);
            if (owner == SpecOwner::Pod || host != 0) && host != p.container_port {
                let fp = path.index(i).child("ports").index(j).child("hostPort");
                errs.push(FieldError::invalid(
                    &fp,
                    host,
                    "must match `containerPort` when `hostNetwork` is true",
                ));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::defaults::default_pod_spec;
    use crate::admission::field::error_messages;
    use serde_json::json;

    fn check(v: serde_json::Value) -> Vec<String> {
        let mut s: PodSpec = serde_json::from_value(v).unwrap();
        default_pod_spec(&mut s);
        error_messages(&validate_pod_spec(
            &s,
            SpecOwner::Template,
            &Path::new("spec"),
        ))
    }

    #[test]
    fn a_minimal_spec_is_valid() {
        assert!(check(json!({"containers": [{"name": "c", "image": "nginx"}]})).is_empty());
    }

    #[test]
    fn pod_spec_rules_report_upstream_messages() {
        let c = json!([{"name": "c", "image": "x"}]);
        let cases = [
            (json!({"containers": []}), "spec.containers: Required value"),
            (
                json!({"containers": [{"name": "c", "image": "x"}, {"name": "c", "image": "y"}]}),
                "spec.containers[1].name: Duplicate value: \"c\"",
            ),
            (
                json!({"containers": c, "initContainers": [{"name": "c", "image": "x"}]}),
                "spec.initContainers[0].name: Duplicate value: \"c\"",
            ),
            (
                json!({"containers": c, "restartPolicy": "Sometimes"}),
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            ),
            (
                json!({"containers": c, "dnsPolicy": "Google"}),
                "spec.dnsPolicy: Unsupported value: \"Google\": supported values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\"",
            ),
            (
                json!({"containers": c, "initContainers": [{"name": "i", "image": "x", "restartPolicy": "Never"}]}),
                "spec.initContainers[0].restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
            ),
            (
                json!({"containers": c, "initContainers": [{"name": "i", "image": "x", "readinessProbe": {"exec": {"command": ["x"]}}}]}),
                "spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always",
            ),
            (
                json!({"containers": [{"name": "c", "image": "x", "restartPolicy": "Always"}]}),
                "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers",
            ),
            (
                json!({"containers": c, "activeDeadlineSeconds": 0}),
                "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive",
            ),
            (
                json!({"containers": c, "terminationGracePeriodSeconds": -5}),
                "spec.terminationGracePeriodSeconds: Invalid value: -5: must be greater than or equal to 0",
            ),
            (
                json!({"containers": c, "nodeSelector": {"disk": "-ssd"}}),
                "spec.nodeSelector: Invalid value: \"-ssd\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ),
            (
                json!({"containers": c, "hostname": "a.b"}),
                "spec.hostname: Invalid value: \"a.b\": must not contain dots",
            ),
            (
                json!({"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80, "hostPort": 81}]}], "hostNetwork": true}),
                "spec.containers[0].ports[0].hostPort: Invalid value: 81: must match `containerPort` when `hostNetwork` is true",
            ),
            (
                json!({"containers": c, "securityContext": {"fsGroup": -1}}),
                "spec.securityContext.fsGroup: Invalid value: -1: must be between 0 and 2147483647, inclusive",
            ),
        ];
        for (v, want) in cases {
            let errs = check(v.clone());
            assert!(errs.iter().any(|e| e == want), "{v}: {errs:?}");
        }
    }

    #[test]
    fn sidecars_may_have_probes() {
        let errs = check(
            json!({"containers": [{"name": "c", "image": "x"}], "initContainers": [
            {"name": "s", "image": "x", "restartPolicy": "Always", "readinessProbe": {"exec": {"command": ["x"]}}}]}),
        );
        assert!(errs.is_empty(), "{errs:?}");
    }

    #[test]
    fn templates_with_ephemeral_containers_are_refused() {
        let t: PodTemplateSpec = serde_json::from_value(json!({"spec": {"containers": [{"name": "c", "image": "x",
            "terminationMessagePolicy": "File", "imagePullPolicy": "Always"}], "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            "ephemeralContainers": [{"name": "e", "image": "x"}]}})).unwrap();
        let errs = validate_pod_template(&t, &Path::new("spec").child("template"));
        assert_eq!(
            errs[0].message(),
            "spec.template.spec.ephemeralContainers: Forbidden: ephemeral containers not allowed in pod template"
        );
    }
}
