//! Preemption, pure (upstream's `DefaultPreemption` PostFilter): for a pod that fits no node,
//! find the nodes where removing pods of lower priority makes it fit, choose the fewest
//! victims there, and pick one node.
//!
//! - Not eligible: `preemptionPolicy: Never`; or its nominated node still has a terminating
//!   pod of lower priority (an earlier preemption is still making room).
//! - Candidates: only nodes whose refusal was resolvable (resources, ports, spreading, affinity
//!   to other pods; not taints, selectors or a cordon). On each, every pod of strictly lower
//!   priority is removed and all filters run again; if the pod still does not fit, the node
//!   cannot help. Otherwise the removed pods are given back one by one, most important first
//!   (higher priority, then earlier start), those whose PodDisruptionBudget would be violated
//!   before the others; a pod that can come back without the preemptor ceasing to fit is
//!   spared, the rest are the victims.
//! - Node choice, each rule breaking the previous one's ties: fewest budget violations; the
//!   lowest highest-priority victim; the lowest sum of victim priorities; fewest victims; the
//!   latest start among the highest-priority victims (the most recently started lose least
//!   work); then the first in node order.
//!
//! Worked example: a 4-cpu node holds `a` (priority 10, started 09:00) and `b` (priority 10,
//! 09:05), each 2 cpu; a 2-cpu pod of priority 100 arrives. Both are removed and fit; given
//! back most important first, `a` (earlier) comes back and the pod still fits, `b` cannot: `b`,
//! the most recently started, is the one victim.
//!
//! Planner: pure, no I/O.

use super::cache::{Cluster, NodeInfo};
use super::facts::PodInfo;
use super::filter::{self, Filters};
use super::message::{NO_VICTIMS, NOT_HELPFUL};
use berth_registry::eviction::decide::selects;
use berth_shared::k8s_openapi::api::policy::v1 as policy;
use std::cmp::{Ordering, Reverse};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Why a pod may not preempt at all (upstream's PostFilter message, without `preemption: `).
pub const NOT_ELIGIBLE_NEVER: &str = "not eligible due to preemptionPolicy=Never.";
pub const NOT_ELIGIBLE_TERMINATING: &str =
    "not eligible due to a terminating pod on the nominated node.";

/// The victims chosen on one node.
#[derive(Debug, Clone)]
pub struct Victims {
    pub node: usize,
    /// Most important first.
    pub pods: Vec<Arc<PodInfo>>,
    pub budget_violations: usize,
}

/// What preemption found.
#[derive(Debug, Clone)]
pub enum Preemption {
    /// Remove these pods from this node, and the pod will fit there.
    Preempt(Victims),
    /// No node can help: the message after `preemption: ` ([`super::message`] counts them).
    NoCandidates(BTreeMap<String, usize>),
    NotEligible(&'static str),
}

/// Upstream `MoreImportantPod`: higher priority, then started earlier (a pod not started yet
/// counts as started now, so after any started one).
pub fn more_important(a: &PodInfo, b: &PodInfo) -> Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| match (a.start_time, b.start_time) {
            (Some(x), Some(y)) => x.cmp(&y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        })
}

/// Upstream `PodEligibleToPreemptOthers`.
pub fn eligible(pod: &PodInfo, cluster: &Cluster<'_>) -> Result<(), &'static str> {
    if pod.preempt_never {
        return Err(NOT_ELIGIBLE_NEVER);
    }
    if let Some(n) = &pod.nominated_node
        && let Some(&i) = cluster.index.get(n)
        && cluster.nodes[i]
            .pods
            .iter()
            .any(|p| p.terminating && p.priority < pod.priority)
    {
        return Err(NOT_ELIGIBLE_TERMINATING);
    }
    Ok(())
}

/// Splits `pods` (most important first) into those whose removal would violate a budget and
/// the others, spending each budget's allowed disruptions in that order (upstream
/// `filterPodsWithPDBViolation`). A pod the budget already counts as disrupted spends nothing.
fn by_budget_violation(
    pods: Vec<Arc<PodInfo>>,
    budgets: &[policy::PodDisruptionBudget],
) -> (Vec<Arc<PodInfo>>, Vec<Arc<PodInfo>>) {
    let mut allowed: Vec<i32> = budgets
        .iter()
        .map(|b| b.status.as_ref().map_or(0, |s| s.disruptions_allowed))
        .collect();
    let (mut violating, mut fine) = (Vec::new(), Vec::new());
    for p in pods {
        let mut violated = false;
        if !p.labels.is_empty() {
            for (i, b) in budgets.iter().enumerate() {
                if b.metadata.namespace.as_deref() != Some(&*p.namespace) || !selects(b, &p.labels)
                {
                    continue;
                }
                let disrupted = b
                    .status
                    .as_ref()
                    .and_then(|s| s.disrupted_pods.as_ref())
                    .is_some_and(|d| d.contains_key(&*p.name));
                if disrupted {
                    continue;
                }
                allowed[i] -= 1;
                violated |= allowed[i] < 0;
            }
        }
        if violated {
            violating.push(p);
        } else {
            fine.push(p);
        }
    }
    (violating, fine)
}

/// Upstream `SelectVictimsOnNode`: the victims on node `i`, or why the node cannot help.
pub fn victims_on_node(
    pod: &PodInfo,
    cluster: &Cluster<'_>,
    i: usize,
    filters: &Filters<'_>,
    budgets: &[policy::PodDisruptionBudget],
) -> Result<Victims, Vec<String>> {
    let node: &NodeInfo = &cluster.nodes[i];
    let mut potential: Vec<Arc<PodInfo>> = node
        .pods
        .iter()
        .filter(|p| p.priority < pod.priority)
        .cloned()
        .collect();
    if potential.is_empty() {
        return Err(vec![NO_VICTIMS.to_string()]);
    }
    let mut sim = node.clone();
    for p in &potential {
        sim.remove_pod(&p.key);
    }
    if let Err(r) = filter::check(pod, &sim, filters) {
        return Err(r.reasons.iter().map(|r| r.text()).collect());
    }
    potential.sort_by(|a, b| more_important(a, b));
    let (violating, fine) = by_budget_violation(potential, budgets);
    let mut victims = Vec::new();
    let mut budget_violations = 0;
    for (p, violates) in violating
        .into_iter()
        .map(|p| (p, true))
        .chain(fine.into_iter().map(|p| (p, false)))
    {
        sim.add_pod(p.clone());
        if filter::check(pod, &sim, filters).is_err() {
            sim.remove_pod(&p.key);
            budget_violations += usize::from(violates);
            victims.push(p);
        }
    }
    victims.sort_by(|a, b| more_important(a, b));
    Ok(Victims {
        node: i,
        pods: victims,
        budget_violations,
    })
}

/// The sort key of a candidate, smallest best (upstream `pickOneNodeForPreemption`).
fn rank(v: &Victims) -> (usize, i32, i64, usize, Reverse<Option<jiff::Timestamp>>) {
    let highest = v.pods.first().map_or(i32::MIN, |p| p.priority);
    // Each priority shifted to be positive, so fewer victims of equal priority sum lower.
    let sum: i64 = v
        .pods
        .iter()
        .map(|p| i64::from(p.priority) + i64::from(i32::MAX) + 1)
        .sum();
    // Of the highest-priority victims, the earliest start; later is better.
    let earliest = v
        .pods
        .iter()
        .filter(|p| p.priority == highest)
        .filter_map(|p| p.start_time)
        .min();
    (
        v.budget_violations,
        highest,
        sum,
        v.pods.len(),
        Reverse(earliest),
    )
}

/// Picks the best candidate; ties go to the first.
pub fn pick(candidates: Vec<Victims>) -> Option<Victims> {
    candidates
        .into_iter()
        .enumerate()
        .min_by_key(|(order, v)| (rank(v), *order))
        .map(|(_, v)| v)
}

/// Runs preemption for `pod` over the nodes whose refusal was resolvable (`resolvable`, node
/// indices); `total` nodes in all.
pub fn preempt(
    pod: &PodInfo,
    cluster: &Cluster<'_>,
    resolvable: &[usize],
    filters: &Filters<'_>,
    budgets: &[policy::PodDisruptionBudget],
) -> Preemption {
    if let Err(why) = eligible(pod, cluster) {
        return Preemption::NotEligible(why);
    }
    let total = cluster.nodes.len();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut candidates = Vec::new();
    for &i in resolvable {
        match victims_on_node(pod, cluster, i, filters, budgets) {
            Ok(v) => candidates.push(v),
            Err(why) => {
                for r in why {
                    *reasons.entry(r).or_insert(0) += 1;
                }
            }
        }
    }
    match pick(candidates) {
        Some(v) => Preemption::Preempt(v),
        None => {
            let unresolvable = total.saturating_sub(resolvable.len());
            if unresolvable > 0 {
                *reasons.entry(NOT_HELPFUL.to_string()).or_insert(0) += unresolvable;
            }
            Preemption::NoCandidates(reasons)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpod::InterPodFilter;
    use crate::spread::SpreadFilter;
    use crate::testing::{ClusterFixture, node, pod, tainted};
    use serde_json::json;

    /// A pod asking `cpu`, with `priority`, started at minute `started` past nine.
    fn pc(name: &str, cpu: &str, priority: i32, started: u32) -> PodInfo {
        pod(
            name,
            json!({"metadata": {"labels": {"app": name.trim_end_matches(char::is_numeric)}},
                "spec": {"priority": priority,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
                "status": {"startTime": format!("2024-05-01T09:{started:02}:00Z")}}),
        )
    }

    fn budget(app: &str, allowed: i32) -> policy::PodDisruptionBudget {
        serde_json::from_value(json!({"metadata": {"name": app, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": app}}},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}}))
        .unwrap()
    }

    fn run(f: &ClusterFixture, p: &PodInfo, budgets: &[policy::PodDisruptionBudget]) -> Preemption {
        let view = f.view();
        let filters = Filters {
            spread: SpreadFilter::new(p, &view),
            interpod: InterPodFilter::new(p, &view),
        };
        let all: Vec<usize> = (0..view.nodes.len()).collect();
        preempt(p, &view, &all, &filters, budgets)
    }

    fn chosen(
        f: &ClusterFixture,
        p: &PodInfo,
        budgets: &[policy::PodDisruptionBudget],
    ) -> (String, Vec<String>) {
        match run(f, p, budgets) {
            Preemption::Preempt(v) => (
                f.view().nodes[v.node].name().to_string(),
                v.pods.iter().map(|p| p.name.to_string()).collect(),
            ),
            other => panic!("expected a preemption, got {other:?}"),
        }
    }

    #[test]
    fn victim_selection_takes_as_few_as_needed_lowest_priority_and_latest_started_first() {
        type Case = (&'static str, Vec<PodInfo>, PodInfo, Vec<&'static str>);
        let cases: Vec<Case> = vec![
            (
                "of two equal pods the more recently started goes",
                vec![pc("a", "2", 10, 0), pc("b", "2", 10, 5)],
                pc("hi", "2", 100, 30),
                vec!["b"],
            ),
            (
                "the lowest priority goes before a more recently started higher one",
                vec![pc("low", "2", 1, 0), pc("mid", "2", 10, 5)],
                pc("hi", "2", 100, 30),
                vec!["low"],
            ),
            (
                "exactly as many as needed go",
                vec![
                    pc("a", "1", 10, 0),
                    pc("b", "1", 10, 1),
                    pc("c", "1", 10, 2),
                    pc("d", "1", 10, 3),
                ],
                pc("hi", "3", 100, 30),
                vec!["b", "c", "d"],
            ),
            (
                "the more important pod is spared even when that takes more victims",
                vec![
                    pc("big", "2", 10, 0),
                    pc("s", "1", 10, 1),
                    pc("t", "1", 10, 2),
                ],
                pc("hi", "2", 100, 30),
                vec!["s", "t"],
            ),
        ];
        for (name, placed, p, want) in cases {
            let mut f = ClusterFixture::with_nodes(&["n"]);
            for q in placed {
                f.place(q, "n");
            }
            assert_eq!(chosen(&f, &p, &[]).1, want, "{name}");
        }
    }

    #[test]
    fn pods_of_equal_or_higher_priority_are_never_victims() {
        let mut f = ClusterFixture::with_nodes(&["n"]);
        f.place(pc("same", "2", 100, 0), "n");
        f.place(pc("higher", "2", 200, 0), "n");
        let Preemption::NoCandidates(reasons) = run(&f, &pc("hi", "2", 100, 30), &[]) else {
            panic!("nothing may be preempted")
        };
        assert_eq!(reasons, BTreeMap::from([(NO_VICTIMS.to_string(), 1)]));
    }

    #[test]
    fn a_node_where_even_removing_every_lower_pod_is_not_enough_cannot_help() {
        let mut f = ClusterFixture::with_nodes(&["n"]);
        f.place(pc("low", "1", 1, 0), "n");
        f.place(pc("same", "3", 100, 0), "n");
        let Preemption::NoCandidates(reasons) = run(&f, &pc("hi", "2", 100, 30), &[]) else {
            panic!("no room even without the low pod")
        };
        assert_eq!(
            reasons,
            BTreeMap::from([("Insufficient cpu".to_string(), 1)])
        );
    }

    #[test]
    fn preemption_policy_never_and_a_terminating_victim_on_the_nominated_node_forbid_preempting() {
        let mut f = ClusterFixture::with_nodes(&["n"]);
        f.place(pc("low", "4", 1, 0), "n");
        let mut never = pc("hi", "2", 100, 30);
        never.preempt_never = true;
        assert!(matches!(
            run(&f, &never, &[]),
            Preemption::NotEligible(NOT_ELIGIBLE_NEVER)
        ));
        let mut dying = pc("dying", "1", 1, 0);
        dying.terminating = true;
        f.place(dying, "n");
        let mut nominated = pc("hi", "2", 100, 30);
        nominated.nominated_node = Some(Arc::from("n"));
        assert!(matches!(
            run(&f, &nominated, &[]),
            Preemption::NotEligible(NOT_ELIGIBLE_TERMINATING)
        ));
    }

    #[test]
    fn node_choice_follows_upstreams_order_of_criteria() {
        type Case = (
            &'static str,
            Vec<(&'static str, PodInfo)>,
            Vec<policy::PodDisruptionBudget>,
            &'static str,
        );
        let cases: Vec<Case> = vec![
            (
                "the node whose victims violate no budget wins",
                vec![
                    ("n1", pc("guarded", "4", 1, 0)),
                    ("n2", pc("free", "4", 5, 0)),
                ],
                vec![budget("guarded", 0)],
                "n2",
            ),
            (
                "a budget with a disruption to spare is no violation",
                vec![
                    ("n1", pc("guarded", "4", 1, 0)),
                    ("n2", pc("free", "4", 5, 0)),
                ],
                vec![budget("guarded", 1)],
                "n1",
            ),
            (
                "then the lowest highest-priority victim",
                vec![("n1", pc("mid", "4", 5, 0)), ("n2", pc("low", "4", 1, 0))],
                vec![],
                "n2",
            ),
            (
                "then the lowest sum of priorities",
                vec![
                    ("n1", pc("a", "2", 5, 0)),
                    ("n1", pc("b", "2", 5, 0)),
                    ("n2", pc("c", "2", 5, 0)),
                    ("n2", pc("d", "2", 1, 0)),
                ],
                vec![],
                "n2",
            ),
            (
                "then fewer victims of the same priority",
                vec![
                    ("n1", pc("a", "2", 5, 0)),
                    ("n1", pc("b", "2", 5, 0)),
                    ("n2", pc("c", "4", 5, 0)),
                ],
                vec![],
                "n2",
            ),
            (
                "then the most recently started highest-priority victims",
                vec![
                    ("n1", pc("old", "4", 5, 0)),
                    ("n2", pc("young", "4", 5, 10)),
                ],
                vec![],
                "n2",
            ),
            (
                "and the first node when all else ties",
                vec![("n1", pc("x", "4", 5, 0)), ("n2", pc("y", "4", 5, 0))],
                vec![],
                "n1",
            ),
        ];
        for (name, placed, budgets, want) in cases {
            let mut f = ClusterFixture::with_nodes(&["n1", "n2"]);
            for (n, q) in placed {
                f.place(q, n);
            }
            assert_eq!(
                chosen(&f, &pc("hi", "3", 100, 30), &budgets).0,
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn victims_that_would_violate_a_budget_are_spared_first() {
        let mut f = ClusterFixture::with_nodes(&["n"]);
        f.place(pc("guarded", "2", 1, 9), "n");
        f.place(pc("free", "2", 1, 0), "n");
        // Without budgets the more recently started `guarded` would go.
        assert_eq!(chosen(&f, &pc("hi", "2", 100, 30), &[]).1, ["guarded"]);
        assert_eq!(
            chosen(&f, &pc("hi", "2", 100, 30), &[budget("guarded", 0)]).1,
            ["free"]
        );
    }

    #[test]
    fn only_resolvable_nodes_are_candidates_and_the_rest_are_not_helpful() {
        let mut f = ClusterFixture::default();
        f.add_node(tainted("tainted", "k", "NoSchedule"));
        f.add_node(node("full", json!({})));
        f.place(pc("same", "4", 100, 0), "full");
        let view = f.view();
        let p = pc("hi", "2", 100, 30);
        let filters = Filters {
            spread: SpreadFilter::new(&p, &view),
            interpod: InterPodFilter::new(&p, &view),
        };
        let Preemption::NoCandidates(reasons) = preempt(&p, &view, &[1], &filters, &[]) else {
            panic!("no candidates")
        };
        let want: BTreeMap<String, usize> =
            [(NO_VICTIMS.to_string(), 1), (NOT_HELPFUL.to_string(), 1)].into();
        assert_eq!(reasons, want);
    }
}
