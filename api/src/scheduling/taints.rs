//! Taints and tolerations: which tolerations tolerate which taints, the first taint a pod does
//! not tolerate (what the scheduler reports and the kubelet's admission checks), and the count
//! of `PreferNoSchedule` taints a pod does not tolerate (the scheduler's taint score).

use k8s_openapi::api::core::v1 as core;

/// A taint's effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn parse(s: &str) -> Option<TaintEffect> {
        match s {
            "NoSchedule" => Some(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
            "NoExecute" => Some(TaintEffect::NoExecute),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// The effects that keep a pod off a node (upstream's `DoNotScheduleTaintsFilterFunc`).
pub const DO_NOT_SCHEDULE: &[TaintEffect] = &[TaintEffect::NoSchedule, TaintEffect::NoExecute];

/// A node taint.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: TaintEffect,
}

impl Taint {
    pub fn new(key: &str, value: &str, effect: TaintEffect) -> Taint {
        Taint {
            key: key.to_string(),
            value: value.to_string(),
            effect,
        }
    }

    /// The taint as stored on a Node; `None` for an effect this version does not know (such a
    /// taint neither blocks nor scores, as upstream's filters only look for known effects).
    pub fn from_k8s(t: &core::Taint) -> Option<Taint> {
        Some(Taint {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
            effect: TaintEffect::parse(&t.effect)?,
        })
    }
}

/// A toleration's operator; anything but `Exists` and `Equal` (or empty, meaning `Equal`)
/// tolerates nothing, as upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TolerationOp {
    Equal,
    Exists,
    Invalid,
}

/// A pod toleration.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Toleration {
    /// Empty with `Exists`: every key.
    pub key: String,
    pub op: TolerationOp,
    pub value: String,
    /// `None`: every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    pub fn from_k8s(t: &core::Toleration) -> Toleration {
        let op = match t.operator.as_deref().unwrap_or_default() {
            "" | "Equal" => TolerationOp::Equal,
            "Exists" => TolerationOp::Exists,
            _ => TolerationOp::Invalid,
        };
        let effect = match t.effect.as_deref().unwrap_or_default() {
            "" => None,
            // An unknown effect matches no taint: keep it distinct from "every effect".
            other => match TaintEffect::parse(other) {
                Some(e) => Some(e),
                None => {
                    return Toleration {
                        key: String::new(),
                        op: TolerationOp::Invalid,
                        value: String::new(),
                        effect: None,
                    };
                }
            },
        };
        Toleration {
            key: t.key.clone().unwrap_or_default(),
            op,
            value: t.value.clone().unwrap_or_default(),
            effect,
        }
    }

    /// Whether this toleration tolerates `taint` (upstream `ToleratesTaint`): the effect must
    /// match unless empty, the key must match unless empty, then `Exists` tolerates any value
    /// and `Equal` only the same one. `tolerationSeconds` plays no part here.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match self.op {
            TolerationOp::Exists => true,
            TolerationOp::Equal => self.value == taint.value,
            TolerationOp::Invalid => false,
        }
    }
}

/// Whether any of `tolerations` tolerates `taint`.
pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| t.tolerates(taint))
}

/// The first of `taints` whose effect is one of `effects` and that no toleration tolerates
/// (upstream `FindMatchingUntoleratedTaint`, in the node's order).
pub fn first_untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    effects: &[TaintEffect],
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| effects.contains(&t.effect))
        .find(|t| !tolerated(tolerations, t))
}

/// How many `PreferNoSchedule` taints no toleration tolerates (upstream's taint score). A
/// toleration for another effect cannot tolerate them, so only those with an empty or
/// `PreferNoSchedule` effect count.
pub fn intolerable_prefer_no_schedule(taints: &[Taint], tolerations: &[Toleration]) -> usize {
    taints
        .iter()
        .filter(|t| t.effect == TaintEffect::PreferNoSchedule && !tolerated(tolerations, t))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tol(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Toleration::from_k8s(&core::Toleration {
            key: opt(key),
            operator: opt(op),
            value: opt(value),
            effect: opt(effect),
            toleration_seconds: None,
        })
    }

    fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
        Taint::new(key, value, effect)
    }

    #[test]
    fn tolerations_match_taints_like_upstream() {
        use TaintEffect::*;
        let cases = [
            (
                "equal key, value and effect",
                tol("k", "Equal", "v", "NoSchedule"),
                taint("k", "v", NoSchedule),
                true,
            ),
            (
                "an empty operator means Equal",
                tol("k", "", "v", ""),
                taint("k", "v", NoExecute),
                true,
            ),
            (
                "Equal with another value",
                tol("k", "Equal", "v", ""),
                taint("k", "w", NoSchedule),
                false,
            ),
            (
                "Exists ignores the value",
                tol("k", "Exists", "", "NoSchedule"),
                taint("k", "w", NoSchedule),
                true,
            ),
            (
                "another effect",
                tol("k", "Exists", "", "NoExecute"),
                taint("k", "", NoSchedule),
                false,
            ),
            (
                "another key",
                tol("k", "Exists", "", ""),
                taint("j", "", NoSchedule),
                false,
            ),
            (
                "an empty key with Exists tolerates everything",
                tol("", "Exists", "", ""),
                taint("any", "x", NoExecute),
                true,
            ),
            (
                "an empty key with Exists and an effect tolerates that effect",
                tol("", "Exists", "", "NoSchedule"),
                taint("any", "", NoExecute),
                false,
            ),
            (
                "an unknown operator tolerates nothing",
                tol("k", "Lt", "v", ""),
                taint("k", "v", NoSchedule),
                false,
            ),
            (
                "an unknown effect tolerates nothing",
                tol("", "Exists", "", "Sometimes"),
                taint("k", "", NoSchedule),
                false,
            ),
        ];
        for (name, t, taint, want) in cases {
            assert_eq!(t.tolerates(&taint), want, "{name}");
        }
    }

    #[test]
    fn the_first_untolerated_blocking_taint_is_reported_in_node_order() {
        use TaintEffect::*;
        let taints = [
            taint("soft", "", PreferNoSchedule),
            taint("a", "1", NoSchedule),
            taint("b", "2", NoExecute),
        ];
        let none: [Toleration; 0] = [];
        assert_eq!(
            first_untolerated(&taints, &none, DO_NOT_SCHEDULE).map(|t| t.key.as_str()),
            Some("a")
        );
        let tolerate_a = [tol("a", "Exists", "", "")];
        assert_eq!(
            first_untolerated(&taints, &tolerate_a, DO_NOT_SCHEDULE).map(|t| t.key.as_str()),
            Some("b")
        );
        let all = [tol("", "Exists", "", "")];
        assert_eq!(first_untolerated(&taints, &all, DO_NOT_SCHEDULE), None);
    }

    #[test]
    fn prefer_no_schedule_taints_are_counted_unless_tolerated_for_that_effect() {
        use TaintEffect::*;
        let taints = [
            taint("x", "", PreferNoSchedule),
            taint("y", "", PreferNoSchedule),
            taint("z", "", NoSchedule),
        ];
        assert_eq!(intolerable_prefer_no_schedule(&taints, &[]), 2);
        assert_eq!(
            intolerable_prefer_no_schedule(&taints, &[tol("x", "Exists", "", "PreferNoSchedule")]),
            1
        );
        // A toleration for another effect does not count for the score.
        assert_eq!(
            intolerable_prefer_no_schedule(&taints, &[tol("x", "Exists", "", "NoSchedule")]),
            2
        );
        assert_eq!(
            intolerable_prefer_no_schedule(&taints, &[tol("", "Exists", "", "")]),
            0
        );
    }
}
