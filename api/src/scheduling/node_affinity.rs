//! Node selection by a pod: `spec.nodeSelector` and required node affinity (which must both
//! hold), preferred node affinity (weights summed over matching terms), and the node names a
//! pod's `matchFields` pin it to, with upstream's semantics for every operator.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1 as core;

/// Node labels.
pub type Labels = BTreeMap<String, String>;

/// The only field node selector terms may name.
pub const NODE_NAME_FIELD: &str = "metadata.name";

/// A node selector operator with its parsed operand.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
    /// Unknown operator or unparsable operand: the requirement matches nothing.
    Invalid,
}

impl Op {
    fn parse(operator: &str, values: &[String]) -> Op {
        let number = || match values {
            [v] => v.parse::<i64>().ok(),
            _ => None,
        };
        match operator {
            "In" => Op::In(values.to_vec()),
            "NotIn" => Op::NotIn(values.to_vec()),
            "Exists" => Op::Exists,
            "DoesNotExist" => Op::DoesNotExist,
            "Gt" => number().map_or(Op::Invalid, Op::Gt),
            "Lt" => number().map_or(Op::Invalid, Op::Lt),
            _ => Op::Invalid,
        }
    }

    /// Whether a present (`Some`) or absent (`None`) value satisfies the operator. `NotIn`
    /// and `DoesNotExist` accept an absent label; `Gt`/`Lt` need an integer label.
    fn matches(&self, actual: Option<&str>) -> bool {
        match self {
            Op::In(vs) => actual.is_some_and(|a| vs.iter().any(|v| v == a)),
            Op::NotIn(vs) => actual.is_none_or(|a| !vs.iter().any(|v| v == a)),
            Op::Exists => actual.is_some(),
            Op::DoesNotExist => actual.is_none(),
            Op::Gt(n) => actual
                .and_then(|a| a.parse::<i64>().ok())
                .is_some_and(|a| a > *n),
            Op::Lt(n) => actual
                .and_then(|a| a.parse::<i64>().ok())
                .is_some_and(|a| a < *n),
            Op::Invalid => false,
        }
    }
}

/// One `nodeSelectorTerms[]` entry: its label expressions and field expressions, ANDed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSelectorTerm {
    labels: Vec<(String, Op)>,
    /// Field requirements; only `metadata.name` with `In`/`NotIn` can match.
    fields: Vec<(String, Op)>,
}

impl NodeSelectorTerm {
    pub fn from_k8s(t: &core::NodeSelectorTerm) -> NodeSelectorTerm {
        let compile = |rs: &Option<Vec<core::NodeSelectorRequirement>>| {
            rs.iter()
                .flatten()
                .map(|r| {
                    let values = r.values.as_deref().unwrap_or_default();
                    (r.key.clone(), Op::parse(&r.operator, values))
                })
                .collect()
        };
        NodeSelectorTerm {
            labels: compile(&t.match_expressions),
            fields: compile(&t.match_fields),
        }
    }

    /// A term with no requirements selects no node.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    pub fn matches(&self, node_name: &str, labels: &Labels) -> bool {
        if self.is_empty() {
            return false;
        }
        let labels_ok = self
            .labels
            .iter()
            .all(|(k, op)| op.matches(labels.get(k).map(String::as_str)));
        let fields_ok = self.fields.iter().all(|(k, op)| {
            k == NODE_NAME_FIELD
                && matches!(op, Op::In(_) | Op::NotIn(_))
                && op.matches(Some(node_name))
        });
        labels_ok && fields_ok
    }

    /// The node names this term pins through `metadata.name In`, intersected; `None` when it
    /// has no such requirement.
    fn pinned_names(&self) -> Option<BTreeSet<String>> {
        let mut names: Option<BTreeSet<String>> = None;
        for (k, op) in &self.fields {
            if let (NODE_NAME_FIELD, Op::In(vs)) = (k.as_str(), op) {
                let set: BTreeSet<String> = vs.iter().cloned().collect();
                names = Some(match names {
                    None => set,
                    Some(prev) => prev.intersection(&set).cloned().collect(),
                });
            }
        }
        names
    }
}

/// Which nodes a pod's `metadata.name` field affinity allows before any node is looked at
/// (upstream's NodeAffinity PreFilter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinnedNodes {
    /// Any node may match (some term does not pin names).
    Any,
    /// Only these nodes can match.
    Only(BTreeSet<String>),
    /// The terms pin names that cannot all hold: no node can match.
    Conflict,
}

/// The hard node constraints of a pod: `spec.nodeSelector` AND (any of the required affinity
/// terms).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequiredNodeAffinity {
    node_selector: Vec<(String, String)>,
    /// `None`: no required node affinity.
    terms: Option<Vec<NodeSelectorTerm>>,
}

impl RequiredNodeAffinity {
    pub fn new(
        node_selector: Option<&BTreeMap<String, String>>,
        affinity: Option<&core::NodeAffinity>,
    ) -> RequiredNodeAffinity {
        let terms = affinity
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|sel| {
                sel.node_selector_terms
                    .iter()
                    .map(NodeSelectorTerm::from_k8s)
                    .collect()
            });
        RequiredNodeAffinity {
            node_selector: node_selector
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            terms,
        }
    }

    pub fn of_pod(spec: &core::PodSpec) -> RequiredNodeAffinity {
        RequiredNodeAffinity::new(
            spec.node_selector.as_ref(),
            spec.affinity
                .as_ref()
                .and_then(|a| a.node_affinity.as_ref()),
        )
    }

    /// No node selector and no required affinity: every node matches.
    pub fn is_empty(&self) -> bool {
        self.node_selector.is_empty() && self.terms.is_none()
    }

    pub fn matches(&self, node_name: &str, labels: &Labels) -> bool {
        let selector_ok = self
            .node_selector
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v));
        selector_ok
            && self
                .terms
                .as_ref()
                .is_none_or(|ts| ts.iter().any(|t| t.matches(node_name, labels)))
    }

    /// The nodes the `metadata.name In` field requirements allow: the union over terms of each
    /// term's intersection; any term without such a requirement allows every node.
    pub fn pinned_nodes(&self) -> PinnedNodes {
        let Some(terms) = &self.terms else {
            return PinnedNodes::Any;
        };
        let mut all = BTreeSet::new();
        for t in terms {
            match t.pinned_names() {
                None => return PinnedNodes::Any,
                Some(names) => all.extend(names),
            }
        }
        if all.is_empty() {
            PinnedNodes::Conflict
        } else {
            PinnedNodes::Only(all)
        }
    }
}

/// Preferred node affinity: weighted terms; a node's score is the sum of the weights of the
/// terms it matches. Terms with weight 0 or no requirements are dropped, as upstream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PreferredNodeAffinity {
    terms: Vec<(i64, NodeSelectorTerm)>,
}

impl PreferredNodeAffinity {
    pub fn new(affinity: Option<&core::NodeAffinity>) -> PreferredNodeAffinity {
        let terms = affinity
            .and_then(|a| {
                a.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .into_iter()
            .flatten()
            .map(|p| {
                (
                    i64::from(p.weight),
                    NodeSelectorTerm::from_k8s(&p.preference),
                )
            })
            .filter(|(w, t)| *w != 0 && !t.is_empty())
            .collect();
        PreferredNodeAffinity { terms }
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn score(&self, node_name: &str, labels: &Labels) -> i64 {
        self.terms
            .iter()
            .filter(|(_, t)| t.matches(node_name, labels))
            .map(|(w, _)| w)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::label_set as labels;
    use serde_json::json;

    fn affinity(v: serde_json::Value) -> core::NodeAffinity {
        serde_json::from_value(v).unwrap()
    }

    fn required(expr: serde_json::Value) -> RequiredNodeAffinity {
        let a = affinity(json!({"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}));
        RequiredNodeAffinity::new(None, Some(&a))
    }

    /// A node selector requirement; `values` is left out when empty.
    fn expr(key: &str, operator: &str, values: &[&str]) -> serde_json::Value {
        let mut e = json!({"key": key, "operator": operator});
        if !values.is_empty() {
            e["values"] = json!(values);
        }
        e
    }

    #[test]
    fn every_operator_matches_like_upstream() {
        let node = labels(&[("zone", "a"), ("gen", "5")]);
        let cases = [
            ("In with the value", expr("zone", "In", &["a", "b"]), true),
            ("In without it", expr("zone", "In", &["c"]), false),
            ("In on a missing label", expr("disk", "In", &["ssd"]), false),
            (
                "NotIn with another value",
                expr("zone", "NotIn", &["c"]),
                true,
            ),
            ("NotIn with the value", expr("zone", "NotIn", &["a"]), false),
            (
                "NotIn on a missing label",
                expr("disk", "NotIn", &["ssd"]),
                true,
            ),
            ("Exists", expr("zone", "Exists", &[]), true),
            (
                "Exists on a missing label",
                expr("disk", "Exists", &[]),
                false,
            ),
            ("DoesNotExist", expr("disk", "DoesNotExist", &[]), true),
            (
                "DoesNotExist on a present label",
                expr("zone", "DoesNotExist", &[]),
                false,
            ),
            ("Gt below", expr("gen", "Gt", &["4"]), true),
            ("Gt equal", expr("gen", "Gt", &["5"]), false),
            ("Lt above", expr("gen", "Lt", &["6"]), true),
            (
                "Lt on a non-integer label",
                expr("zone", "Lt", &["6"]),
                false,
            ),
            (
                "Gt with a non-integer operand",
                expr("gen", "Gt", &["x"]),
                false,
            ),
            ("an unknown operator", expr("zone", "Like", &["a"]), false),
        ];
        for (name, expr, want) in cases {
            assert_eq!(required(expr).matches("n1", &node), want, "{name}");
        }
    }

    #[test]
    fn node_selector_and_required_terms_must_both_hold_and_terms_are_ored() {
        let a = affinity(
            json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
            ]}}),
        );
        let sel: BTreeMap<String, String> = [("disk".to_string(), "ssd".to_string())].into();
        let r = RequiredNodeAffinity::new(Some(&sel), Some(&a));
        assert!(r.matches("n", &labels(&[("zone", "b"), ("disk", "ssd")])));
        assert!(
            !r.matches("n", &labels(&[("zone", "b")])),
            "node selector fails"
        );
        assert!(
            !r.matches("n", &labels(&[("zone", "c"), ("disk", "ssd")])),
            "no term"
        );
        assert!(RequiredNodeAffinity::default().matches("n", &Labels::new()));
    }

    #[test]
    fn an_empty_term_selects_no_node() {
        let a = affinity(json!({"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{}]}}));
        assert!(!RequiredNodeAffinity::new(None, Some(&a)).matches("n", &Labels::new()));
    }

    #[test]
    fn match_fields_select_by_node_name() {
        let a = affinity(
            json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
            ]}}),
        );
        let r = RequiredNodeAffinity::new(None, Some(&a));
        assert!(r.matches("n1", &Labels::new()));
        assert!(!r.matches("n2", &Labels::new()));
        assert_eq!(
            r.pinned_nodes(),
            PinnedNodes::Only(["n1".to_string()].into())
        );
        let not_in = affinity(
            json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}
            ]}}),
        );
        let r = RequiredNodeAffinity::new(None, Some(&not_in));
        assert!(!r.matches("n1", &Labels::new()));
        assert!(r.matches("n2", &Labels::new()));
        assert_eq!(r.pinned_nodes(), PinnedNodes::Any);
    }

    #[test]
    fn pinned_names_are_intersected_within_a_term_and_united_across_terms() {
        let a = affinity(
            json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["a", "b"]},
                    {"key": "metadata.name", "operator": "In", "values": ["b", "c"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["d"]}]},
            ]}}),
        );
        let want: BTreeSet<String> = ["b".to_string(), "d".to_string()].into();
        assert_eq!(
            RequiredNodeAffinity::new(None, Some(&a)).pinned_nodes(),
            PinnedNodes::Only(want)
        );
        let conflict = affinity(
            json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["a"]},
                    {"key": "metadata.name", "operator": "In", "values": ["b"]}]},
            ]}}),
        );
        assert_eq!(
            RequiredNodeAffinity::new(None, Some(&conflict)).pinned_nodes(),
            PinnedNodes::Conflict
        );
    }

    #[test]
    fn preferred_terms_sum_the_weights_of_matching_terms() {
        let a = affinity(json!({"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}},
            {"weight": 5, "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}},
            {"weight": 7, "preference": {}},
            {"weight": 0, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}},
        ]}));
        let p = PreferredNodeAffinity::new(Some(&a));
        assert_eq!(p.score("n", &labels(&[("zone", "a"), ("disk", "x")])), 15);
        assert_eq!(p.score("n", &labels(&[("zone", "b")])), 0);
        assert!(PreferredNodeAffinity::new(None).is_empty());
    }
}
