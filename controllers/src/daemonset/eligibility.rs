//! Which nodes run a DaemonSet's pod (upstream `NodeShouldRunDaemonPod`): the template's
//! `nodeName`, `nodeSelector` and required node affinity pick the nodes; the node's taints,
//! against the template's tolerations plus the automatic ones every daemon pod gets (DS-08),
//! decide whether a pod may start there (no untolerated `NoSchedule`/`NoExecute` taint) and
//! whether one already there may stay (no untolerated `NoExecute` taint). Only the taints the
//! node carries count, as upstream: cordoning (`spec.unschedulable`) never matters, since daemon
//! pods tolerate `node.kubernetes.io/unschedulable`.
//!
//! Kept apart from the controller so node lifecycle and taint-based eviction can ask the same
//! questions of the same compiled forms.
//!
//! Planner: pure, no I/O.

use super::view::Node;
use berth_shared::k8s_openapi::api::core::v1 as core;
use berth_shared::scheduling::taints::{DO_NOT_SCHEDULE, first_untolerated};
use berth_shared::scheduling::{RequiredNodeAffinity, TaintEffect, Toleration};

/// The tolerations every daemon pod gets, key and effect (upstream
/// `AddOrUpdateDaemonPodTolerations`), all `Exists` without `tolerationSeconds`; the
/// `network-unavailable` one only for pods on the host network.
pub const DAEMON_TOLERATIONS: &[(&str, TaintEffect)] = &[
    ("node.kubernetes.io/not-ready", TaintEffect::NoExecute),
    ("node.kubernetes.io/unreachable", TaintEffect::NoExecute),
    ("node.kubernetes.io/disk-pressure", TaintEffect::NoSchedule),
    (
        "node.kubernetes.io/memory-pressure",
        TaintEffect::NoSchedule,
    ),
    ("node.kubernetes.io/pid-pressure", TaintEffect::NoSchedule),
    ("node.kubernetes.io/unschedulable", TaintEffect::NoSchedule),
];
/// Added only with `hostNetwork: true`.
pub const NETWORK_UNAVAILABLE: (&str, TaintEffect) = (
    "node.kubernetes.io/network-unavailable",
    TaintEffect::NoSchedule,
);

/// Upstream `Toleration.MatchToleration`: the same key, operator, value and effect
/// (`tolerationSeconds` aside).
fn same_toleration(a: &core::Toleration, b: &core::Toleration) -> bool {
    let s = |o: &Option<String>| o.clone().unwrap_or_default();
    s(&a.key) == s(&b.key)
        && s(&a.operator) == s(&b.operator)
        && s(&a.value) == s(&b.value)
        && s(&a.effect) == s(&b.effect)
}

/// Upstream `AddOrUpdateTolerationInPodSpec`: a toleration matching `t` is replaced by it (so
/// a user's `not-ready` toleration with `tolerationSeconds` becomes unbounded), else `t` is
/// appended.
fn add_or_update(tolerations: &mut Vec<core::Toleration>, t: core::Toleration) {
    match tolerations.iter_mut().find(|x| same_toleration(x, &t)) {
        Some(existing) => *existing = t,
        None => tolerations.push(t),
    }
}

/// Adds the automatic tolerations of daemon pods to a pod spec (DS-08).
pub fn add_daemon_tolerations(spec: &mut core::PodSpec) {
    let host_network = spec.host_network == Some(true);
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    let extra = host_network.then_some(NETWORK_UNAVAILABLE);
    for (key, effect) in DAEMON_TOLERATIONS.iter().copied().chain(extra) {
        add_or_update(
            tolerations,
            core::Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: Some(effect.as_str().into()),
                ..Default::default()
            },
        );
    }
}

/// Where a DaemonSet's pods may run, compiled once from its template.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Placement {
    /// The template's `spec.nodeName`, when set.
    pub node_name: Option<String>,
    /// `nodeSelector` and required node affinity, as the user wrote them.
    pub required: RequiredNodeAffinity,
    /// The template's tolerations plus the automatic ones.
    pub tolerations: Vec<Toleration>,
}

impl Placement {
    pub fn of_template(spec: Option<&core::PodSpec>) -> Placement {
        let mut spec = spec.cloned().unwrap_or_default();
        add_daemon_tolerations(&mut spec);
        Placement {
            node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
            required: RequiredNodeAffinity::of_pod(&spec),
            tolerations: spec
                .tolerations
                .iter()
                .flatten()
                .map(Toleration::from_k8s)
                .collect(),
        }
    }
}

/// The verdict on one node (upstream's `shouldRun, shouldContinueRunning`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fit {
    /// A daemon pod should be started there if none runs.
    pub should_run: bool,
    /// A daemon pod already there may stay.
    pub should_continue: bool,
}

impl Fit {
    pub const RUN: Fit = Fit {
        should_run: true,
        should_continue: true,
    };
    pub const NONE: Fit = Fit {
        should_run: false,
        should_continue: false,
    };
    /// Tainted after the pod started: no new pod, the old one stays.
    pub const KEEP: Fit = Fit {
        should_run: false,
        should_continue: true,
    };
}

/// Whether `node` runs the DaemonSet's pod.
pub fn fit(placement: &Placement, node: &Node) -> Fit {
    if placement
        .node_name
        .as_ref()
        .is_some_and(|n| *n != node.name)
    {
        return Fit::NONE;
    }
    if !placement.required.matches(&node.name, &node.labels) {
        return Fit::NONE;
    }
    if first_untolerated(&node.taints, &placement.tolerations, DO_NOT_SCHEDULE).is_none() {
        return Fit::RUN;
    }
    // Scheduled daemon pods go on running as long as they tolerate the NoExecute taints.
    if first_untolerated(
        &node.taints,
        &placement.tolerations,
        &[TaintEffect::NoExecute],
    )
    .is_none()
    {
        Fit::KEEP
    } else {
        Fit::NONE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn placement(spec: Value) -> Placement {
        let spec: core::PodSpec = serde_json::from_value(spec).unwrap();
        Placement::of_template(Some(&spec))
    }

    fn node(name: &str, labels: &[(&str, &str)], taints: &[(&str, TaintEffect)]) -> Node {
        std::sync::Arc::unwrap_or_clone(super::super::fixtures::node_with(name, labels, taints))
    }

    /// Node `n` with no labels and no taints.
    fn plain() -> Node {
        node("n", &[], &[])
    }

    /// Node `n` with the one label `key=value`.
    fn labelled(key: &str, value: &str) -> Node {
        node("n", &[(key, value)], &[])
    }

    /// Node `n` with the one taint `key` of `effect`.
    fn tainted(key: &str, effect: TaintEffect) -> Node {
        node("n", &[], &[(key, effect)])
    }

    fn control_plane_tolerations() -> Value {
        json!([{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
               {"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"}])
    }

    #[test]
    fn eligibility_follows_labels_affinity_taints_and_tolerations() {
        use TaintEffect::*;
        let ssd = json!({"nodeSelector": {"disk": "ssd"}});
        let affinity = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}}});
        let cases: Vec<(&str, Value, Node, Fit)> = vec![
            ("no constraints: every node", json!({}), plain(), Fit::RUN),
            (
                "a node selector the labels match",
                ssd.clone(),
                labelled("disk", "ssd"),
                Fit::RUN,
            ),
            (
                "a node selector the labels miss",
                ssd.clone(),
                labelled("disk", "hdd"),
                Fit::NONE,
            ),
            (
                "required affinity matching",
                affinity.clone(),
                labelled("zone", "b"),
                Fit::RUN,
            ),
            (
                "required affinity not matching",
                affinity.clone(),
                labelled("zone", "c"),
                Fit::NONE,
            ),
            (
                "selector and affinity must both hold",
                json!({"nodeSelector": {"disk": "ssd"}, "affinity": affinity["affinity"]}),
                labelled("zone", "a"),
                Fit::NONE,
            ),
            (
                "the template's node name picks one node",
                json!({"nodeName": "other"}),
                plain(),
                Fit::NONE,
            ),
            (
                "an untolerated NoSchedule taint: no new pod, an old one stays",
                json!({}),
                tainted("dedicated", NoSchedule),
                Fit::KEEP,
            ),
            (
                "an untolerated NoExecute taint: no pod at all",
                json!({}),
                tainted("dedicated", NoExecute),
                Fit::NONE,
            ),
            (
                "a PreferNoSchedule taint does not matter",
                json!({}),
                tainted("soft", PreferNoSchedule),
                Fit::RUN,
            ),
            (
                "a control-plane taint without the seed's tolerations",
                json!({}),
                tainted("node-role.kubernetes.io/control-plane", NoSchedule),
                Fit::KEEP,
            ),
            (
                "a control-plane taint with the seed's tolerations",
                json!({"tolerations": control_plane_tolerations()}),
                tainted("node-role.kubernetes.io/control-plane", NoSchedule),
                Fit::RUN,
            ),
            (
                "the unschedulable taint of a cordoned node is tolerated",
                json!({}),
                tainted("node.kubernetes.io/unschedulable", NoSchedule),
                Fit::RUN,
            ),
            (
                "not-ready NoExecute is tolerated",
                json!({}),
                tainted("node.kubernetes.io/not-ready", NoExecute),
                Fit::RUN,
            ),
            (
                "memory pressure is tolerated",
                json!({}),
                tainted("node.kubernetes.io/memory-pressure", NoSchedule),
                Fit::RUN,
            ),
            (
                "network-unavailable keeps pods off the pod network",
                json!({}),
                tainted("node.kubernetes.io/network-unavailable", NoSchedule),
                Fit::KEEP,
            ),
            (
                "network-unavailable is tolerated on the host network",
                json!({"hostNetwork": true}),
                tainted("node.kubernetes.io/network-unavailable", NoSchedule),
                Fit::RUN,
            ),
            (
                "a user toleration for a NoExecute taint",
                json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]}),
                tainted("dedicated", NoExecute),
                Fit::RUN,
            ),
            (
                "labels match but a NoExecute taint wins",
                ssd,
                node("n", &[("disk", "ssd")], &[("dedicated", NoExecute)]),
                Fit::NONE,
            ),
        ];
        for (name, spec, n, want) in cases {
            assert_eq!(fit(&placement(spec), &n), want, "{name}");
        }
    }

    #[test]
    fn daemon_pods_get_upstreams_automatic_tolerations() {
        let mut spec: core::PodSpec =
            serde_json::from_value(json!({"tolerations": control_plane_tolerations()})).unwrap();
        add_daemon_tolerations(&mut spec);
        let got: Vec<(String, String, String)> = spec
            .tolerations
            .unwrap()
            .into_iter()
            .map(|t| {
                assert_eq!(t.toleration_seconds, None);
                (
                    t.key.unwrap_or_default(),
                    t.operator.unwrap_or_default(),
                    t.effect.unwrap_or_default(),
                )
            })
            .collect();
        let want: Vec<(String, String, String)> = [
            ("node-role.kubernetes.io/control-plane", "NoSchedule"),
            ("node-role.kubernetes.io/master", "NoSchedule"),
            ("node.kubernetes.io/not-ready", "NoExecute"),
            ("node.kubernetes.io/unreachable", "NoExecute"),
            ("node.kubernetes.io/disk-pressure", "NoSchedule"),
            ("node.kubernetes.io/memory-pressure", "NoSchedule"),
            ("node.kubernetes.io/pid-pressure", "NoSchedule"),
            ("node.kubernetes.io/unschedulable", "NoSchedule"),
        ]
        .iter()
        .map(|(k, e)| (k.to_string(), "Exists".to_string(), e.to_string()))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn host_network_pods_also_tolerate_network_unavailable() {
        let mut spec = core::PodSpec {
            host_network: Some(true),
            ..Default::default()
        };
        add_daemon_tolerations(&mut spec);
        let keys: Vec<String> = spec
            .tolerations
            .unwrap()
            .into_iter()
            .filter_map(|t| t.key)
            .collect();
        assert_eq!(keys.len(), 7);
        assert_eq!(keys[6], "node.kubernetes.io/network-unavailable");
    }

    #[test]
    fn a_matching_user_toleration_is_replaced_not_doubled() {
        let mut spec: core::PodSpec = serde_json::from_value(json!({"tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}]}))
        .unwrap();
        add_daemon_tolerations(&mut spec);
        let t = spec.tolerations.unwrap();
        assert_eq!(t.len(), 6);
        assert_eq!(t[0].key.as_deref(), Some("node.kubernetes.io/not-ready"));
        assert_eq!(t[0].toleration_seconds, None, "made unbounded");
    }
}
