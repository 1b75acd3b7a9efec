//! Namespace, Node and Event admission: the namespace finalizer and name label, node taints
//! and pod CIDRs, and the legacy core/v1 Event rules.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Event, Namespace, Node};
use serde_json::Value;

use super::Operation;
use super::field::{FieldError, Path};
use super::meta::validate_object_meta_update;
use super::names::{dns1123_subdomain, each_invalid, joined_invalid, label_value, qualified_name};
use super::scheduling::validate_taint_effect;

const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
const STANDARD_FINALIZERS: &[&str] = &["kubernetes", "orphan", "foregroundDeletion"];

/// Namespace defaults: the name label always, phase Active, and on create the `kubernetes`
/// finalizer. Upstream's main-resource update also keeps the stored finalizers and status
/// (they change through the finalize and status subresources); that is left to the server,
/// which knows which subresource is being written, so a finalize write is not undone here.
pub(crate) fn default_namespace(ns: &mut Namespace, op: Operation) {
    if let Some(name) = ns.metadata.name.clone().filter(|n| !n.is_empty()) {
        ns.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(NAMESPACE_NAME_LABEL.into(), name);
    }
    if op == Operation::Create {
        let spec = ns.spec.get_or_insert_with(Default::default);
        let f = spec.finalizers.get_or_insert_with(Vec::new);
        if !f.iter().any(|x| x == "kubernetes") {
            f.push("kubernetes".into());
        }
    }
    let status = ns.status.get_or_insert_with(Default::default);
    if status.phase.as_deref().is_none_or(str::is_empty) {
        status.phase = Some("Active".into());
    }
}

pub(crate) fn validate_namespace(ns: &Namespace) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let fp = Path::new("spec").child("finalizers");
    for f in ns.spec.iter().flat_map(|s| s.finalizers.iter().flatten()) {
        errs.extend(each_invalid(&fp, f, qualified_name(f)));
        if !f.contains('/') && !STANDARD_FINALIZERS.contains(&f.as_str()) {
            errs.push(FieldError::invalid(
                &fp,
                f.as_str(),
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    errs
}

/// Node defaults: the singular and plural pod CIDR fields agree, allocatable defaults to
/// capacity.
pub(crate) fn default_node(node: &mut Node) {
    if let Some(spec) = &mut node.spec {
        let single = spec.pod_cidr.clone().filter(|c| !c.is_empty());
        match (&spec.pod_cidrs, single) {
            (None, Some(c)) => spec.pod_cidrs = Some(vec![c]),
            (Some(list), _) if !list.is_empty() => spec.pod_cidr = Some(list[0].clone()),
            _ => {}
        }
    }
    if let Some(status) = &mut node.status
        && status.allocatable.is_none()
    {
        status.allocatable.clone_from(&status.capacity);
    }
}

fn is_cidr(s: &str) -> Option<bool> {
    let (ip, prefix) = s.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    let prefix: u8 = prefix.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (prefix <= max).then_some(ip.is_ipv4())
}

pub(crate) fn validate_node(node: &Node, old: Option<&Node>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let sp = Path::new("spec");
    let spec = node.spec.clone().unwrap_or_default();
    let tp = sp.child("taints");
    let mut seen: std::collections::HashSet<(String, String)> = Default::default();
    for (i, t) in spec.taints.iter().flatten().enumerate() {
        let ip = tp.index(i);
        errs.extend(each_invalid(
            &ip.child("key"),
            &t.key,
            qualified_name(&t.key),
        ));
        let value = t.value.as_deref().unwrap_or_default();
        errs.extend(joined_invalid(
            &ip.child("value"),
            value,
            label_value(value),
        ));
        errs.extend(validate_taint_effect(&t.effect, false, &ip.child("effect")));
        let pair = (t.key.clone(), t.effect.clone());
        if !seen.insert(pair) {
            let mut e = FieldError::duplicate(&ip, serde_json::to_value(t).unwrap_or_default());
            e.detail = "taints must be unique by key and effect pair".into();
            errs.push(e);
        }
    }
    let cidrs = spec.pod_cidrs.clone().unwrap_or_default();
    let cp = sp.child("podCIDRs");
    let mut families = Vec::new();
    for (i, c) in cidrs.iter().enumerate() {
        match is_cidr(c) {
            Some(v4) => families.push(v4),
            None => errs.push(FieldError::invalid(
                &cp.index(i),
                c.as_str(),
                "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            )),
        }
    }
    if cidrs.len() > 1 {
        let dual = families.len() == 2 && families[0] != families[1];
        if !dual || cidrs.len() > 2 {
            errs.push(FieldError::invalid(
                &cp,
                cidrs.clone(),
                "may specify no more than one CIDR for each IP family",
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, c) in cidrs.iter().enumerate() {
            if !seen.insert(c) {
                errs.push(FieldError::duplicate(&cp.index(i), c.as_str()));
            }
        }
    }
    if let Some(o) = old {
        let os = o.spec.clone().unwrap_or_default();
        let old_cidrs = os.pod_cidrs.unwrap_or_default();
        if !old_cidrs.is_empty() && old_cidrs != cidrs {
            errs.push(FieldError::forbidden(
                &cp,
                "node updates may not change podCIDR except from \"\" to valid",
            ));
        }
        let old_pid = os.provider_id.unwrap_or_default();
        if !old_pid.is_empty() && Some(&old_pid) != spec.provider_id.as_ref() {
            errs.push(FieldError::forbidden(
                &sp.child("providerID"),
                "node updates may not change providerID except from \"\" to valid",
            ));
        }
    }
    errs
}

const LENGTH_LIMIT: usize = 128;
const NOTE_LENGTH_LIMIT: usize = 1024;

/// Upstream's legacy core/v1 Event validation (no strict metadata rules, for old clients).
pub(crate) fn validate_event(ev: &Event, old: Option<&Event>, raw: &Value) -> Vec<FieldError> {
    let mut errs = match old {
        Some(o) => validate_object_meta_update(&ev.metadata, &o.metadata),
        None if ev.metadata.name.as_deref().unwrap_or_default().is_empty() => {
            vec![FieldError::required(
                &Path::new("metadata").child("name"),
                "name or generateName is required",
            )]
        }
        None => Vec::new(),
    };
    if !super::workload::present(raw, "/involvedObject") {
        errs.push(FieldError::required(&Path::new("involvedObject"), ""));
    }
    let ns = ev.metadata.namespace.as_deref().unwrap_or_default();
    let obj_ns = ev.involved_object.namespace.as_deref().unwrap_or_default();
    let ns_path = Path::new("involvedObject").child("namespace");
    let mismatch = || FieldError::invalid(&ns_path, obj_ns, "does not match event.namespace");
    if ev.event_time.is_none() {
        if obj_ns.is_empty() {
            if !ns.is_empty() && ns != "default" {
                errs.push(mismatch());
            }
        } else if ns != obj_ns {
            errs.push(mismatch());
        }
    } else {
        if obj_ns.is_empty() && ns != "default" && ns != "kube-system" {
            errs.push(mismatch());
        }
        let rc = ev.reporting_component.as_deref().unwrap_or_default();
        if rc.is_empty() {
            errs.push(FieldError::required(&Path::new("reportingComponent"), ""));
        }
        errs.extend(each_invalid(
            &Path::new("reportingComponent"),
            rc,
            qualified_name(rc),
        ));
        let limited = [
            (
                "reportingInstance",
                ev.reporting_instance.as_deref(),
                LENGTH_LIMIT,
                true,
            ),
            ("action", ev.action.as_deref(), LENGTH_LIMIT, true),
            ("reason", ev.reason.as_deref(), LENGTH_LIMIT, true),
            ("message", ev.message.as_deref(), NOTE_LENGTH_LIMIT, false),
        ];
        for (field, v, limit, required) in limited {
            let v = v.unwrap_or_default();
            if required && v.is_empty() {
                errs.push(FieldError::required(&Path::new(field), ""));
            }
            if v.len() > limit {
                errs.push(FieldError::invalid(
                    &Path::new(field),
                    Value::from(""),
                    format!("can have at most {limit} characters"),
                ));
            }
        }
    }
    errs.extend(each_invalid(
        &Path::new("namespace"),
        ns,
        dns1123_subdomain(ns),
    ));
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::field::error_messages;
    use crate::admission::{AdmissionError, admit};
    use serde_json::json;

    #[test]
    fn namespaces_get_finalizer_phase_and_name_label() {
        let mut ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap();
        default_namespace(&mut ns, Operation::Create);
        assert_eq!(
            ns.spec.as_ref().unwrap().finalizers,
            Some(vec!["kubernetes".to_string()])
        );
        assert_eq!(ns.status.as_ref().unwrap().phase.as_deref(), Some("Active"));
        assert_eq!(
            ns.metadata
                .labels
                .as_ref()
                .unwrap()
                .get(NAMESPACE_NAME_LABEL)
                .map(String::as_str),
            Some("team-a")
        );
        assert!(validate_namespace(&ns).is_empty());
    }

    #[test]
    fn namespace_updates_may_drop_the_finalizer() {
        let mut ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": "a"}, "spec": {"finalizers": []}}))
                .unwrap();
        default_namespace(&mut ns, Operation::Update);
        assert_eq!(ns.spec.unwrap().finalizers, Some(Vec::new()));
    }

    #[test]
    fn namespace_names_are_dns_labels_and_finalizers_qualified() {
        // Through `admit`: the name is checked by the object-meta step every kind shares.
        let mut ns = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "a.b"}, "spec": {"finalizers": ["custom"]}});
        let Err(AdmissionError::Invalid(errs)) =
            admit("Namespace", Operation::Create, &mut ns, None)
        else {
            panic!("a.b is not a namespace name");
        };
        let msgs = error_messages(&errs);
        assert_eq!(
            msgs,
            vec![
                "metadata.name: Invalid value: \"a.b\": must not contain dots",
                "spec.finalizers: Invalid value: \"custom\": name is neither a standard finalizer name nor is it fully qualified",
            ]
        );
    }

    #[test]
    fn node_taints_and_cidrs_are_checked() {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}, "spec": {
            "podCIDR": "10.0.0.0/33",
            "taints": [{"key": "k", "effect": "Sometimes"}, {"key": "d", "effect": "NoSchedule"}, {"key": "d", "effect": "NoSchedule"}]}})).unwrap();
        let mut node = node;
        default_node(&mut node);
        let msgs = error_messages(&validate_node(&node, None));
        assert_eq!(
            msgs[0],
            "spec.taints[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""
        );
        assert!(
            msgs[1].starts_with("spec.taints[2]: Duplicate value: "),
            "{}",
            msgs[1]
        );
        assert!(msgs[1].ends_with(": taints must be unique by key and effect pair"));
        assert_eq!(
            msgs[2],
            "spec.podCIDRs[0]: Invalid value: \"10.0.0.0/33\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
        );
    }

    #[test]
    fn node_pod_cidrs_are_set_once() {
        let mut old: Node = serde_json::from_value(
            json!({"metadata": {"name": "n"}, "spec": {"podCIDR": "10.0.0.0/24"}}),
        )
        .unwrap();
        default_node(&mut old);
        assert_eq!(
            old.spec.as_ref().unwrap().pod_cidrs,
            Some(vec!["10.0.0.0/24".to_string()])
        );
        let mut new: Node = serde_json::from_value(
            json!({"metadata": {"name": "n"}, "spec": {"podCIDR": "10.0.1.0/24"}}),
        )
        .unwrap();
        default_node(&mut new);
        let errs = validate_node(&new, Some(&old));
        assert_eq!(
            errs[0].message(),
            "spec.podCIDRs: Forbidden: node updates may not change podCIDR except from \"\" to valid"
        );
    }

    #[test]
    fn events_must_live_in_their_objects_namespace() {
        let ev: Event = serde_json::from_value(json!({"metadata": {"name": "e", "namespace": "a"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "b"}}))
        .unwrap();
        assert_eq!(
            validate_event(&ev, None, &json!({"involvedObject": {}}))[0].message(),
            "involvedObject.namespace: Invalid value: \"b\": does not match event.namespace"
        );
        let node_ev: Event =
            serde_json::from_value(json!({"metadata": {"name": "e", "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": "n"}}))
            .unwrap();
        assert!(validate_event(&node_ev, None, &json!({"involvedObject": {}})).is_empty());
    }

    #[test]
    fn new_style_events_need_reporting_fields() {
        let ev: Event = serde_json::from_value(json!({"metadata": {"name": "e", "namespace": "a"}, "eventTime": "2024-01-01T00:00:00.000000Z",
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "a"}, "reason": "x".repeat(129)})).unwrap();
        let msgs = error_messages(&validate_event(&ev, None, &json!({"involvedObject": {}})));
        assert!(
            msgs.contains(&"reportingComponent: Required value".to_string()),
            "{msgs:?}"
        );
        assert!(
            msgs.contains(
                &"reason: Invalid value: \"\": can have at most 128 characters".to_string()
            )
        );
        assert!(msgs.contains(&"action: Required value".to_string()));
    }
}
