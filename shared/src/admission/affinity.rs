//! Placement rules in a pod spec: node affinity (selector terms and field selectors), pod
//! affinity and anti-affinity terms, and topology spread constraints.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    Affinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm,
    TopologySpreadConstraint,
};

use super::field::{FieldError, Path, validate_optional_choice};
use super::names::{dns1123_label, dns1123_subdomain, each_invalid, qualified_name};
use super::selector::{validate_label_selector, validate_operator};

fn validate_node_requirement(r: &NodeSelectorRequirement, path: &Path) -> Vec<FieldError> {
    let n = r.values.as_ref().map_or(0, Vec::len);
    validate_operator(&r.operator, n, &r.key, path, true)
}

fn validate_node_field_requirement(r: &NodeSelectorRequirement, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" | "NotIn" if values.len() != 1 => errs.push(FieldError::required(
            &path.child("values"),
            "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
        )),
        "In" | "NotIn" => {}
        other => errs.push(FieldError::invalid(
            &path.child("operator"),
            other,
            "not a valid selector operator",
        )),
    }
    if r.key != "metadata.name" {
        errs.push(FieldError::invalid(
            &path.child("key"),
            r.key.as_str(),
            "not a valid field selector key",
        ));
    } else {
        for (i, v) in values.iter().enumerate() {
            errs.extend(each_invalid(
                &path.child("values").index(i),
                v,
                dns1123_subdomain(v),
            ));
        }
    }
    errs
}

fn validate_node_term(term: &NodeSelectorTerm, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, r) in term.match_expressions.iter().flatten().enumerate() {
        errs.extend(validate_node_requirement(
            r,
            &path.child("matchExpressions").index(i),
        ));
    }
    for (i, r) in term.match_fields.iter().flatten().enumerate() {
        errs.extend(validate_node_field_requirement(
            r,
            &path.child("matchFields").index(i),
        ));
    }
    errs
}

fn validate_weight(weight: i32, path: &Path) -> Option<FieldError> {
    (!(1..=100).contains(&weight))
        .then(|| FieldError::invalid(path, weight, "must be in the range 1-100"))
}

fn validate_pod_affinity_term(term: &PodAffinityTerm, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for sel in [&term.label_selector, &term.namespace_selector]
        .into_iter()
        .flatten()
    {
        errs.extend(validate_label_selector(sel, &path.child("labelSelector")));
    }
    for ns in term.namespaces.iter().flatten() {
        errs.extend(each_invalid(
            &path.child("namespace"),
            ns,
            dns1123_label(ns),
        ));
    }
    let tk = path.child("topologyKey");
    if term.topology_key.is_empty() {
        errs.push(FieldError::required(&tk, "can not be empty"));
    }
    errs.extend(each_invalid(
        &tk,
        &term.topology_key,
        qualified_name(&term.topology_key),
    ));
    errs
}

/// Upstream `ValidateNodeSelector`: at least one term, each term's requirements valid.
pub(crate) fn validate_node_selector(sel: &NodeSelector, path: &Path) -> Vec<FieldError> {
    let tp = path.child("nodeSelectorTerms");
    if sel.node_selector_terms.is_empty() {
        return vec![FieldError::required(
            &tp,
            "must have at least one node selector term",
        )];
    }
    sel.node_selector_terms
        .iter()
        .enumerate()
        .flat_map(|(i, t)| validate_node_term(t, &tp.index(i)))
        .collect()
}

/// Upstream `validateAffinity`.
pub(crate) fn validate_affinity(a: &Affinity, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(na) = &a.node_affinity {
        let np = path.child("nodeAffinity");
        if let Some(req) = &na.required_during_scheduling_ignored_during_execution {
            errs.extend(validate_node_selector(
                req,
                &np.child("requiredDuringSchedulingIgnoredDuringExecution"),
            ));
        }
        let pp = np.child("preferredDuringSchedulingIgnoredDuringExecution");
        for (i, t) in na
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten()
            .enumerate()
        {
            errs.extend(validate_weight(t.weight, &pp.index(i).child("weight")));
            errs.extend(validate_node_term(
                &t.preference,
                &pp.index(i).child("preference"),
            ));
        }
    }
    let pod_affinities = [
        (
            "podAffinity",
            a.pod_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
        (
            "podAntiAffinity",
            a.pod_anti_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
    ];
    for (field, terms) in pod_affinities {
        let Some((required, preferred)) = terms else {
            continue;
        };
        let fp = path.child(field);
        for (i, t) in required.iter().flatten().enumerate() {
            errs.extend(validate_pod_affinity_term(
                t,
                &fp.child("requiredDuringSchedulingIgnoredDuringExecution")
                    .index(i),
            ));
        }
        let pp = fp.child("preferredDuringSchedulingIgnoredDuringExecution");
        for (i, t) in preferred.iter().flatten().enumerate() {
            errs.extend(validate_weight(t.weight, &pp.index(i).child("weight")));
            errs.extend(validate_pod_affinity_term(
                &t.pod_affinity_term,
                &pp.index(i).child("podAffinityTerm"),
            ));
        }
    }
    errs
}

/// Upstream `validateTopologySpreadConstraints`.
pub(crate) fn validate_topology_spread(
    constraints: &[TopologySpreadConstraint],
    path: &Path,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, c) in constraints.iter().enumerate() {
        let ip = path.index(i);
        if c.max_skew <= 0 {
            errs.push(FieldError::invalid(
                &ip.child("maxSkew"),
                c.max_skew,
                "must be greater than zero",
            ));
        }
        let tk = ip.child("topologyKey");
        if c.topology_key.is_empty() {
            errs.push(FieldError::required(&tk, "can not be empty"));
        } else {
            errs.extend(each_invalid(
                &tk,
                &c.topology_key,
                qualified_name(&c.topology_key),
            ));
        }
        let wu = c.when_unsatisfiable.as_str();
        errs.extend(validate_optional_choice(
            Some(wu),
            &["DoNotSchedule", "ScheduleAnyway"],
            &ip.child("whenUnsatisfiable"),
        ));
        if let Some(md) = c.min_domains {
            if md <= 0 {
                errs.push(FieldError::invalid(
                    &ip.child("minDomains"),
                    md,
                    "must be greater than 0",
                ));
            } else if wu != "DoNotSchedule" {
                errs.push(FieldError::invalid(
                    &ip.child("minDomains"),
                    md,
                    format!("can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {wu}"),
                ));
            }
        }
        let pair = format!("{{{}, {}}}", c.topology_key, wu);
        if !seen.insert(pair.clone()) {
            errs.push(FieldError::duplicate(
                &ip.child("{topologyKey, whenUnsatisfiable}"),
                pair,
            ));
        }
        for (field, v) in [
            ("nodeAffinityPolicy", &c.node_affinity_policy),
            ("nodeTaintsPolicy", &c.node_taints_policy),
        ] {
            errs.extend(validate_optional_choice(
                v.as_deref(),
                &["Honor", "Ignore"],
                &ip.child(field),
            ));
        }
        if let Some(sel) = &c.label_selector {
            errs.extend(validate_label_selector(sel, &ip.child("labelSelector")));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::field::error_messages;
    use serde_json::json;

    #[test]
    fn node_affinity_needs_terms_and_valid_operators() {
        let a: Affinity = serde_json::from_value(json!({"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}]}}))
        .unwrap();
        let msgs = error_messages(&validate_affinity(&a, &Path::new("a")));
        assert_eq!(
            msgs,
            vec![
                "a.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector operator",
                "a.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100",
            ]
        );
    }

    #[test]
    fn pod_affinity_needs_a_topology_key() {
        let a: Affinity = serde_json::from_value(json!({"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": ""}]}})).unwrap();
        let errs = validate_affinity(&a, &Path::new("a"));
        assert_eq!(
            errs[0].message(),
            "a.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value: can not be empty"
        );
    }

    #[test]
    fn spread_constraints_are_checked_and_unique() {
        let c: Vec<TopologySpreadConstraint> = serde_json::from_value(json!([
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
            {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
        ]))
        .unwrap();
        let msgs = error_messages(&validate_topology_spread(&c, &Path::new("s")));
        assert_eq!(
            msgs,
            vec![
                "s[1].maxSkew: Invalid value: 0: must be greater than zero",
                "s[1].{topologyKey, whenUnsatisfiable}: Duplicate value: \"{zone, DoNotSchedule}\"",
            ]
        );
    }
}
