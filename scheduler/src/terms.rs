//! Pod-to-pod placement rules compiled once per pod: inter-pod affinity and anti-affinity terms
//! (label selector, namespaces, topology key) and topology spread constraints (with upstream's
//! defaults and `matchLabelKeys` folded into the selector).
//!
//! Planner: pure, no I/O.

use super::facts::Labels;
use berth_shared::k8s_openapi::api::core::v1 as core;
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use berth_shared::selector::LabelSelector;
use std::collections::HashMap;
use std::sync::Arc;

/// Namespace labels by namespace name, for `namespaceSelector`.
pub type NamespaceLabels = HashMap<String, Labels>;

/// The well-known node labels of the system default spreading.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// Converts a label selector the way upstream's `LabelSelectorAsSelector` does: none selects
/// nothing; an invalid one selects nothing either (validation rejects those on admission).
fn selector_of(sel: Option<&metav1::LabelSelector>) -> LabelSelector {
    sel.and_then(|s| LabelSelector::from_k8s(s).ok())
        .unwrap_or_else(LabelSelector::nothing)
}

/// Adds `key In (value)` (or `NotIn` when `mismatch`) for each key the pod has a label for.
fn with_label_keys(
    sel: Option<&metav1::LabelSelector>,
    keys: &[String],
    mismatch_keys: &[String],
    labels: &Labels,
) -> LabelSelector {
    let Some(base) = sel else {
        return LabelSelector::nothing();
    };
    if keys.is_empty() && mismatch_keys.is_empty() {
        return selector_of(Some(base));
    }
    let mut s = base.clone();
    let exprs = s.match_expressions.get_or_insert_with(Vec::new);
    let req = |op: &str, key: &String| {
        labels.get(key).map(|v| metav1::LabelSelectorRequirement {
            key: key.clone(),
            operator: op.to_string(),
            values: Some(vec![v.clone()]),
        })
    };
    exprs.extend(keys.iter().filter_map(|k| req("In", k)));
    exprs.extend(mismatch_keys.iter().filter_map(|k| req("NotIn", k)));
    selector_of(Some(&s))
}

/// One inter-pod (anti-)affinity term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AffinityTerm {
    pub selector: LabelSelector,
    /// Namespaces named by the term; the pod's own when neither these nor a namespace
    /// selector are given.
    pub namespaces: Vec<String>,
    pub namespace_selector: Option<LabelSelector>,
    pub topology_key: String,
}

impl AffinityTerm {
    pub fn compile(t: &core::PodAffinityTerm, own_ns: &str, own_labels: &Labels) -> AffinityTerm {
        let mut namespaces = t.namespaces.clone().unwrap_or_default();
        let namespace_selector = t.namespace_selector.as_ref().map(|s| selector_of(Some(s)));
        if namespaces.is_empty() && namespace_selector.is_none() {
            namespaces.push(own_ns.to_string());
        }
        AffinityTerm {
            selector: with_label_keys(
                t.label_selector.as_ref(),
                t.match_label_keys.as_deref().unwrap_or_default(),
                t.mismatch_label_keys.as_deref().unwrap_or_default(),
                own_labels,
            ),
            namespaces,
            namespace_selector,
            topology_key: t.topology_key.clone(),
        }
    }

    /// Whether a pod in `ns` with `labels` is one this term is about.
    pub fn matches(&self, ns: &str, labels: &Labels, ns_labels: &NamespaceLabels) -> bool {
        let ns_ok = self.namespaces.iter().any(|n| n == ns)
            || self
                .namespace_selector
                .as_ref()
                .is_some_and(|s| s.matches_opt(ns_labels.get(ns)));
        ns_ok && self.selector.matches(labels)
    }
}

/// A pod's inter-pod affinity and anti-affinity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodAffinity {
    pub required: Vec<AffinityTerm>,
    pub required_anti: Vec<AffinityTerm>,
    pub preferred: Vec<(i64, AffinityTerm)>,
    pub preferred_anti: Vec<(i64, AffinityTerm)>,
}

impl PodAffinity {
    pub fn compile(a: Option<&core::Affinity>, ns: &str, labels: &Labels) -> PodAffinity {
        let term = |t: &core::PodAffinityTerm| AffinityTerm::compile(t, ns, labels);
        let required = |ts: Option<&Vec<core::PodAffinityTerm>>| {
            ts.into_iter().flatten().map(term).collect::<Vec<_>>()
        };
        let weighted = |ts: Option<&Vec<core::WeightedPodAffinityTerm>>| {
            ts.into_iter()
                .flatten()
                .map(|w| (i64::from(w.weight), term(&w.pod_affinity_term)))
                .collect::<Vec<_>>()
        };
        let aff = a.and_then(|a| a.pod_affinity.as_ref());
        let anti = a.and_then(|a| a.pod_anti_affinity.as_ref());
        PodAffinity {
            required: required(aff.and_then(|p| {
                p.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            required_anti: required(anti.and_then(|p| {
                p.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            preferred: weighted(aff.and_then(|p| {
                p.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            preferred_anti: weighted(anti.and_then(|p| {
                p.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.required.is_empty()
            && self.required_anti.is_empty()
            && self.preferred.is_empty()
            && self.preferred_anti.is_empty()
    }

    pub fn has_preferred(&self) -> bool {
        !self.preferred.is_empty() || !self.preferred_anti.is_empty()
    }
}

/// Which pods a spread constraint counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodSelector {
    /// Pods in the same namespace matching the selector.
    Labels(LabelSelector),
    /// Pods of the same controller (the system default constraints: upstream derives the
    /// selector from the owning ReplicaSet, ReplicationController or StatefulSet, whose pods
    /// these are).
    Controller(Arc<str>),
}

/// One topology spread constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpreadConstraint {
    pub max_skew: i64,
    pub topology_key: String,
    /// `DoNotSchedule` (a filter) rather than `ScheduleAnyway` (a score).
    pub hard: bool,
    pub selector: PodSelector,
    pub min_domains: i64,
    /// `nodeAffinityPolicy: Honor` (the default): only nodes matching the pod's node selector
    /// and required affinity count.
    pub honor_node_affinity: bool,
    /// `nodeTaintsPolicy: Honor` (default Ignore): only nodes whose blocking taints the pod
    /// tolerates count.
    pub honor_taints: bool,
}

impl SpreadConstraint {
    pub fn compile(c: &core::TopologySpreadConstraint, labels: &Labels) -> SpreadConstraint {
        SpreadConstraint {
            max_skew: i64::from(c.max_skew),
            topology_key: c.topology_key.clone(),
            hard: c.when_unsatisfiable != "ScheduleAnyway",
            selector: PodSelector::Labels(with_label_keys(
                c.label_selector.as_ref(),
                c.match_label_keys.as_deref().unwrap_or_default(),
                &[],
                labels,
            )),
            min_domains: i64::from(c.min_domains.unwrap_or(1)),
            honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
            honor_taints: c.node_taints_policy.as_deref() == Some("Honor"),
        }
    }

    /// The system default constraints (TSC-11): per host with maxSkew 3 and per zone with
    /// maxSkew 5, both ScheduleAnyway, over the pods of the same controller.
    pub fn system_defaults(controller: &Arc<str>) -> Vec<SpreadConstraint> {
        [(HOSTNAME_LABEL, 3), (ZONE_LABEL, 5)]
            .into_iter()
            .map(|(key, skew)| SpreadConstraint {
                max_skew: skew,
                topology_key: key.to_string(),
                hard: false,
                selector: PodSelector::Controller(controller.clone()),
                min_domains: 1,
                honor_node_affinity: true,
                honor_taints: false,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_shared::selector::label_set as labels;
    use serde_json::json;

    #[test]
    fn a_term_without_namespaces_is_about_the_pods_own_namespace() {
        let t: core::PodAffinityTerm = serde_json::from_value(json!({
            "labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}))
        .unwrap();
        let t = AffinityTerm::compile(&t, "prod", &Labels::new());
        let ns = NamespaceLabels::new();
        assert!(t.matches("prod", &labels(&[("app", "db")]), &ns));
        assert!(!t.matches("dev", &labels(&[("app", "db")]), &ns));
        assert!(!t.matches("prod", &labels(&[("app", "web")]), &ns));
    }

    #[test]
    fn a_namespace_selector_widens_the_namespaces_and_a_missing_label_selector_matches_nothing() {
        let t: core::PodAffinityTerm = serde_json::from_value(json!({
            "labelSelector": {}, "namespaceSelector": {"matchLabels": {"team": "a"}},
            "topologyKey": "zone"}))
        .unwrap();
        let t = AffinityTerm::compile(&t, "prod", &Labels::new());
        let ns: NamespaceLabels = [("x".to_string(), labels(&[("team", "a")]))].into();
        assert!(t.matches("x", &Labels::new(), &ns));
        assert!(
            !t.matches("prod", &Labels::new(), &ns),
            "own namespace not implied"
        );
        let t: core::PodAffinityTerm =
            serde_json::from_value(json!({"topologyKey": "zone"})).unwrap();
        let t = AffinityTerm::compile(&t, "prod", &Labels::new());
        assert!(!t.matches("prod", &Labels::new(), &ns));
    }

    #[test]
    fn match_label_keys_pin_the_pods_own_values() {
        let own = labels(&[("app", "web"), ("pod-template-hash", "abc")]);
        let c: core::TopologySpreadConstraint = serde_json::from_value(json!({
            "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
            "matchLabelKeys": ["pod-template-hash", "absent"]}))
        .unwrap();
        let c = SpreadConstraint::compile(&c, &own);
        let PodSelector::Labels(sel) = &c.selector else {
            panic!("label selector expected")
        };
        assert!(sel.matches(&own));
        assert!(!sel.matches(&labels(&[("app", "web"), ("pod-template-hash", "old")])));
        assert!(c.hard && c.honor_node_affinity && !c.honor_taints);
        assert_eq!(c.min_domains, 1);
    }

    #[test]
    fn spread_policies_and_soft_constraints_are_read() {
        let c: core::TopologySpreadConstraint = serde_json::from_value(json!({
            "maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
            "minDomains": 3, "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor"}))
        .unwrap();
        let c = SpreadConstraint::compile(&c, &Labels::new());
        assert!(!c.hard && !c.honor_node_affinity && c.honor_taints);
        assert_eq!((c.max_skew, c.min_domains), (2, 3));
        let PodSelector::Labels(sel) = &c.selector else {
            panic!("label selector expected")
        };
        assert!(!sel.matches(&Labels::new()), "no selector counts no pod");
    }
}
