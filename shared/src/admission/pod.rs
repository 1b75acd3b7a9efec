//! The Pod kind: Pod-only defaults (requests from limits, service links, host-network ports),
//! what create adds (phase, QoS class, priority, default tolerations, service account), and
//! the create and update validation, including which spec fields an update may change.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodCondition, PodSpec, Toleration};
use serde_json::Value;

use super::Operation;
use super::defaults::default_pod_spec;
use super::field::{FieldError, Path};
use super::meta::{validate_object_meta, validate_object_meta_update};
use super::pod_spec::{SpecOwner, validate_pod_spec};
use super::scheduling::validate_tolerations;
use berth_api::qos::qos_class;

/// Seconds pods tolerate a not-ready or unreachable node before eviction (upstream admission).
const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// Defaults applied to every Pod body, then the create-time additions.
pub(crate) fn default_pod(pod: &mut Pod, op: Operation) {
    let spec = pod.spec.get_or_insert_with(Default::default);
    default_pod_spec(spec);
    super::ephemeral::default_ephemeral_containers(spec);
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        requests_from_limits(c);
    }
    spec.enable_service_links.get_or_insert(true);
    if spec.host_network == Some(true) {
        for c in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            for p in c.ports.iter_mut().flatten() {
                if p.host_port.unwrap_or(0) == 0 {
                    p.host_port = Some(p.container_port);
                }
            }
        }
    }
    if op == Operation::Create {
        admit_new_pod_spec(spec);
        let qos = qos_class(spec);
        let gated = spec
            .scheduling_gates
            .as_ref()
            .is_some_and(|g| !g.is_empty());
        let status = pod.status.get_or_insert_with(Default::default);
        status.phase.get_or_insert_with(|| "Pending".to_string());
        status.qos_class.get_or_insert_with(|| qos.to_string());
        if gated {
            let conditions = status.conditions.get_or_insert_with(Vec::new);
            if !conditions.iter().any(|c| c.type_ == "PodScheduled") {
                conditions.push(PodCondition {
                    type_: "PodScheduled".into(),
                    status: "False".into(),
                    reason: Some("SchedulingGated".into()),
                    message: Some("Scheduling is blocked due to non-empty scheduling gates".into()),
                    ..Default::default()
                });
            }
        }
    }
}

/// Limits without a matching request become the request (Pods only, not templates).
fn requests_from_limits(c: &mut Container) {
    let Some(res) = c.resources.as_mut() else {
        return;
    };
    let Some(limits) = res.limits.clone() else {
        return;
    };
    let requests = res.requests.get_or_insert_with(BTreeMap::new);
    for (k, v) in limits {
        requests.entry(k).or_insert(v);
    }
}

/// What upstream's admission plugins add to a new pod: the `default` service account, the
/// priority, and tolerations for not-ready/unreachable nodes. The controller's Priority plugin
/// (which reads the stored PriorityClasses) has set the priority before this runs; the
/// built-in classes here only serve admission run on its own.
fn admit_new_pod_spec(spec: &mut PodSpec) {
    if spec
        .service_account_name
        .as_deref()
        .is_none_or(str::is_empty)
    {
        spec.service_account_name = Some("default".into());
        spec.service_account = Some("default".into());
    }
    if spec.priority.is_none() {
        spec.priority = match spec.priority_class_name.as_deref().unwrap_or_default() {
            "" => Some(0),
            "system-node-critical" => Some(2_000_001_000),
            "system-cluster-critical" => Some(2_000_000_000),
            _ => None,
        };
    }
    spec.preemption_policy
        .get_or_insert_with(|| "PreemptLowerPriority".into());
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = tolerations.iter().any(|t| {
            let k = t.key.as_deref().unwrap_or_default();
            let e = t.effect.as_deref().unwrap_or_default();
            (k == key || k.is_empty()) && (e == "NoExecute" || e.is_empty())
        });
        if !tolerated {
            tolerations.push(Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: Some("NoExecute".into()),
                toleration_seconds: Some(DEFAULT_TOLERATION_SECONDS),
                ..Default::default()
            });
        }
    }
}

/// Upstream `validateContainersOnlyForPod`: a pod's images (containers and init containers)
/// have no leading or trailing whitespace.
fn validate_images_trimmed(spec: &PodSpec, spec_path: &Path) -> Vec<FieldError> {
    let lists = [
        ("containers", spec.containers.as_slice()),
        (
            "initContainers",
            spec.init_containers.as_deref().unwrap_or_default(),
        ),
    ];
    let mut errs = Vec::new();
    for (field, list) in lists {
        for (i, c) in list.iter().enumerate() {
            let image = c.image.as_deref().unwrap_or_default();
            if image.trim() != image {
                errs.push(FieldError::invalid(
                    &spec_path.child(field).index(i).child("image"),
                    image,
                    "must not have leading or trailing whitespace",
                ));
            }
        }
    }
    errs
}

/// Create: metadata, the spec, and the create-only rules.
pub(crate) fn validate_pod_create(pod: &Pod) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&pod.metadata, "Pod", true);
    let spec_path = Path::new("spec");
    let default_spec = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&default_spec);
    errs.extend(validate_pod_spec(spec, SpecOwner::Pod, &spec_path));
    errs.extend(validate_images_trimmed(spec, &spec_path));
    let non_empty = |len: Option<usize>| len.is_some_and(|n| n > 0);
    let create_only = [
        (
            non_empty(spec.ephemeral_containers.as_ref().map(Vec::len)),
            "ephemeralContainers",
            "cannot be set on create",
        ),
        (
            non_empty(spec.node_name.as_ref().map(String::len))
                && non_empty(spec.scheduling_gates.as_ref().map(Vec::len)),
            "nodeName",
            "cannot be set until all schedulingGates have been cleared",
        ),
    ];
    for (_, field, detail) in create_only.into_iter().filter(|(refused, ..)| *refused) {
        errs.push(FieldError::forbidden(&spec_path.child(field), detail));
    }
    errs
}

const UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// Upstream `ValidatePodUpdate`: only images, a shrinking activeDeadlineSeconds, added
/// tolerations and removed scheduling gates may change.
pub(crate) fn validate_pod_update(new: &Pod, old: &Pod) -> Vec<FieldError> {
    let mut errs = validate_object_meta_update(&new.metadata, &old.metadata);
    let spec_path = Path::new("spec");
    let (default_new, default_old) = (PodSpec::default(), PodSpec::default());
    let ns = new.spec.as_ref().unwrap_or(&default_new);
    let os = old.spec.as_ref().unwrap_or(&default_old);
    errs.extend(validate_pod_spec(ns, SpecOwner::Pod, &spec_path));
    let pairs = [
        (
            "containers",
            ns.containers.as_slice(),
            os.containers.as_slice(),
        ),
        (
            "initContainers",
            ns.init_containers.as_deref().unwrap_or_default(),
            os.init_containers.as_deref().unwrap_or_default(),
        ),
    ];
    for (field, n, o) in pairs {
        let p = spec_path.child(field);
        if n.len() != o.len() {
            errs.push(FieldError::forbidden(
                &p,
                "pod updates may not add or remove containers",
            ));
            return errs;
        }
        for (i, c) in n.iter().enumerate() {
            if c.image.as_deref().unwrap_or_default().is_empty() {
                errs.push(FieldError::required(&p.index(i).child("image"), ""));
            }
        }
    }
    errs.extend(validate_images_trimmed(ns, &spec_path));
    let adp = spec_path.child("activeDeadlineSeconds");
    match (ns.active_deadline_seconds, os.active_deadline_seconds) {
        (Some(n), _) if !(0..=i64::from(i32::MAX)).contains(&n) => {
            errs.push(FieldError::invalid(
                &adp,
                n,
                super::names::inclusive_range_error(0, i32::MAX.into()),
            ));
            return errs;
        }
        (Some(n), Some(o)) if o < n => {
            errs.push(FieldError::invalid(
                &adp,
                n,
                "must be less than or equal to previous value",
            ));
            return errs;
        }
        (None, Some(_)) => errs.push(FieldError::invalid(
            &adp,
            Value::Null,
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }
    errs.extend(validate_added_tolerations(
        ns,
        os,
        &spec_path.child("tolerations"),
    ));
    let old_gates: std::collections::HashSet<&str> = os
        .scheduling_gates
        .iter()
        .flatten()
        .map(|g| g.name.as_str())
        .collect();
    for g in ns.scheduling_gates.iter().flatten() {
        if !old_gates.contains(&g.name.as_str()) {
            errs.push(FieldError::forbidden(
                &spec_path.child("schedulingGates"),
                format!(
                    "only deletion is allowed, but found new scheduling gate '{}'",
                    g.name
                ),
            ));
        }
    }
    errs.extend(super::ephemeral::validate_ephemeral_containers(ns, os));
    let munged = munge_mutable_fields(ns, os);
    if munged != *os {
        let diff = spec_diff(os, &munged);
        errs.push(FieldError::forbidden(
            &spec_path,
            format!("{UPDATE_FORBIDDEN}\n{diff}"),
        ));
    }
    errs
}

fn validate_added_tolerations(ns: &PodSpec, os: &PodSpec, path: &Path) -> Vec<FieldError> {
    // Tolerations compared without their seconds, through a set: a scan per old toleration
    // made an update with tens of thousands of them take minutes.
    let without_seconds = |t: &Toleration| {
        let mut t = t.clone();
        t.toleration_seconds = None;
        super::codec::encode(&t).to_string()
    };
    let new = ns.tolerations.as_deref().unwrap_or_default();
    let kept_set: std::collections::HashSet<String> = new.iter().map(without_seconds).collect();
    for old in os.tolerations.iter().flatten() {
        let kept = kept_set.contains(&without_seconds(old));
        if !kept {
            return vec![FieldError::forbidden(
                path,
                "existing toleration can not be modified except its tolerationSeconds",
            )];
        }
    }
    validate_tolerations(new, path)
}

/// The new spec with every mutable field reset to the old value.
fn munge_mutable_fields(ns: &PodSpec, os: &PodSpec) -> PodSpec {
    let mut m = ns.clone();
    for (c, o) in m.containers.iter_mut().zip(&os.containers) {
        c.image.clone_from(&o.image);
    }
    if let (Some(cs), Some(olds)) = (m.init_containers.as_mut(), os.init_containers.as_ref()) {
        for (c, o) in cs.iter_mut().zip(olds) {
            c.image.clone_from(&o.image);
        }
    }
    m.active_deadline_seconds = os.active_deadline_seconds;
    // Validated on their own (the ephemeralcontainers subresource is their only way in).
    m.ephemeral_containers.clone_from(&os.ephemeral_containers);
    m.scheduling_gates.clone_from(&os.scheduling_gates);
    m.tolerations.clone_from(&os.tolerations);
    if os.termination_grace_period_seconds.is_some_and(|g| g < 0)
        && m.termination_grace_period_seconds == Some(1)
    {
        m.termination_grace_period_seconds = os.termination_grace_period_seconds;
    }
    m
}

/// A short line-per-field diff of two specs (upstream prints a `cmp.Diff`).
fn spec_diff(old: &PodSpec, new: &PodSpec) -> String {
    let (o, n) = (super::codec::encode(old), super::codec::encode(new));
    let mut lines = Vec::new();
    diff_values(&o, &n, "spec", &mut lines);
    lines.join("\n")
}

fn diff_values(o: &Value, n: &Value, path: &str, out: &mut Vec<String>) {
    match (o, n) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let p = format!("{path}.{k}");
                diff_values(
                    a.get(k).unwrap_or(&Value::Null),
                    b.get(k).unwrap_or(&Value::Null),
                    &p,
                    out,
                );
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff_values(x, y, &format!("{path}[{i}]"), out);
            }
        }
        _ if o != n => {
            out.push(format!("-\t{path}: {o}"));
            out.push(format!("+\t{path}: {n}"));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn created(spec: Value) -> Pod {
        let mut p = pod(json!({"metadata": {"name": "p", "namespace": "d"}, "spec": spec}));
        default_pod(&mut p, Operation::Create);
        p
    }

    #[test]
    fn qos_classes_follow_requests_and_limits() {
        let cases = [
            (
                json!({"containers": [{"name": "c", "image": "x"}]}),
                "BestEffort",
            ),
            (
                json!({"containers": [{"name": "c", "image": "x", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}),
                "Guaranteed",
            ),
            (
                json!({"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}}]}),
                "Burstable",
            ),
            (
                json!({"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}),
                "Burstable",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
                {"name": "b", "image": "x", "resources": {"limits": {"cpu": "1"}}}]}),
                "Burstable",
            ),
        ];
        for (spec, want) in cases {
            let p = created(spec.clone());
            assert_eq!(p.status.unwrap().qos_class.as_deref(), Some(want), "{spec}");
        }
    }

    #[test]
    fn create_sets_phase_priority_tolerations_and_service_links() {
        let p = created(json!({"containers": [{"name": "c", "image": "x"}]}));
        let s = p.spec.unwrap();
        assert_eq!(p.status.unwrap().phase.as_deref(), Some("Pending"));
        assert_eq!(s.priority, Some(0));
        assert_eq!(s.preemption_policy.as_deref(), Some("PreemptLowerPriority"));
        assert_eq!(s.enable_service_links, Some(true));
        assert_eq!(s.service_account_name.as_deref(), Some("default"));
        let t = s.tolerations.unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].key.as_deref(), Some("node.kubernetes.io/not-ready"));
        assert_eq!(t[1].toleration_seconds, Some(300));
    }

    #[test]
    fn an_existing_status_phase_is_kept() {
        let mut p = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": []}, "status": {"phase": "Running", "qosClass": "Guaranteed"}}),
        );
        default_pod(&mut p, Operation::Create);
        let st = p.status.unwrap();
        assert_eq!(
            (st.phase.as_deref(), st.qos_class.as_deref()),
            (Some("Running"), Some("Guaranteed"))
        );
    }

    #[test]
    fn limits_become_requests_and_host_network_ports_are_mirrored() {
        let p = created(
            json!({"hostNetwork": true, "containers": [{"name": "c", "image": "x",
            "ports": [{"containerPort": 8080}],
            "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Mi"}}}]}),
        );
        let c = &p.spec.as_ref().unwrap().containers[0];
        let req = c.resources.as_ref().unwrap().requests.as_ref().unwrap();
        assert_eq!(req.get("cpu").map(|q| q.0.as_str()), Some("1"));
        assert_eq!(req.get("memory").map(|q| q.0.as_str()), Some("1Mi"));
        assert_eq!(c.ports.as_ref().unwrap()[0].host_port, Some(8080));
    }

    #[test]
    fn scheduling_gates_add_a_gated_condition() {
        let p = created(
            json!({"containers": [{"name": "c", "image": "x"}], "schedulingGates": [{"name": "example.com/wait"}]}),
        );
        let cond = &p.status.unwrap().conditions.unwrap()[0];
        assert_eq!(cond.reason.as_deref(), Some("SchedulingGated"));
    }

    #[test]
    fn image_changes_are_allowed_on_update() {
        let old = created(json!({"containers": [{"name": "c", "image": "nginx:1"}]}));
        let mut new = old.clone();
        new.spec.as_mut().unwrap().containers[0].image = Some("nginx:2".into());
        assert!(validate_pod_update(&new, &old).is_empty());
    }

    #[test]
    fn other_spec_changes_are_forbidden_on_update() {
        let old = created(json!({"containers": [{"name": "c", "image": "nginx:1"}]}));
        let mut new = old.clone();
        new.spec.as_mut().unwrap().node_name = Some("n1".into());
        let errs = validate_pod_update(&new, &old);
        assert_eq!(errs.len(), 1);
        assert!(errs[0].message().starts_with("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"));
        assert!(errs[0].detail.contains("+\tspec.nodeName: \"n1\""));
    }

    #[test]
    fn containers_may_not_be_added_on_update() {
        let old = created(json!({"containers": [{"name": "c", "image": "x"}]}));
        let mut new = old.clone();
        let extra = new.spec.as_ref().unwrap().containers[0].clone();
        new.spec.as_mut().unwrap().containers.push(Container {
            name: "d".into(),
            ..extra
        });
        let errs = validate_pod_update(&new, &old);
        assert!(errs.iter().any(|e| e.message()
            == "spec.containers: Forbidden: pod updates may not add or remove containers"));
    }

    #[test]
    fn active_deadline_may_only_shrink() {
        let mut old = created(json!({"containers": [{"name": "c", "image": "x"}]}));
        old.spec.as_mut().unwrap().active_deadline_seconds = Some(10);
        let mut new = old.clone();
        new.spec.as_mut().unwrap().active_deadline_seconds = Some(5);
        assert!(validate_pod_update(&new, &old).is_empty());
        new.spec.as_mut().unwrap().active_deadline_seconds = Some(20);
        assert_eq!(
            validate_pod_update(&new, &old)[0].message(),
            "spec.activeDeadlineSeconds: Invalid value: 20: must be less than or equal to previous value"
        );
    }

    #[test]
    fn tolerations_may_only_be_added() {
        let old = created(json!({"containers": [{"name": "c", "image": "x"}]}));
        let mut new = old.clone();
        new.spec
            .as_mut()
            .unwrap()
            .tolerations
            .as_mut()
            .unwrap()
            .push(Toleration {
                operator: Some("Exists".into()),
                ..Default::default()
            });
        assert!(validate_pod_update(&new, &old).is_empty());
        new.spec.as_mut().unwrap().tolerations = Some(Vec::new());
        assert_eq!(
            validate_pod_update(&new, &old)[0].message(),
            "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"
        );
    }

    #[test]
    fn ephemeral_containers_cannot_be_set_on_create() {
        let p = created(
            json!({"containers": [{"name": "c", "image": "x"}], "ephemeralContainers": [{"name": "e", "image": "x"}]}),
        );
        let errs = validate_pod_create(&p);
        assert!(
            errs.iter()
                .any(|e| e.message()
                    == "spec.ephemeralContainers: Forbidden: cannot be set on create")
        );
    }
}
