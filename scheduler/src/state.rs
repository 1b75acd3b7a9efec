//! The scheduler's state and how informer changes and binding results change it: the cache of
//! nodes and placed pods, the queue, the pods waiting for a node (and where preemption
//! nominated them), and the disruption budgets preemption respects. Also the step that takes
//! the next pod off the queue and decides it, counting pods nominated to a node (of at least
//! its priority) as if they were there. No I/O: the loop in `mod.rs` feeds and drains it.
//!
//! Planner: pure, no I/O.

use super::cache::Cache;
use super::facts::{NodeFacts, PodInfo, PodKey};
use super::message::Diagnosis;
use super::plan::{self, Decision};
use super::queue::SchedulingQueue;
use super::volumes::Storage;
use berth_runtime::informer::Object;
use berth_shared::k8s_openapi::api::policy::v1::PodDisruptionBudget;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// The kinds the scheduler watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    Pod,
    Node,
    Namespace,
    Budget,
    Claim,
    Volume,
    StorageClass,
}

/// What one decision produced, for the loop to write.
#[derive(Debug, Clone)]
pub enum Outcome {
    Bind {
        pod: Arc<PodInfo>,
        node: Arc<str>,
    },
    Unschedulable {
        pod: Arc<PodInfo>,
        message: String,
    },
    /// Nominate `pod` to `node` and delete `victims` to make room there.
    Preempt {
        pod: Arc<PodInfo>,
        node: Arc<str>,
        victims: Vec<Arc<PodInfo>>,
        message: String,
    },
}

/// Everything the scheduler holds.
#[derive(Default)]
pub struct State {
    pub cache: Cache,
    pub queue: SchedulingQueue<PodKey>,
    /// Pods waiting for a node (or in flight), as last seen.
    pub pending: HashMap<PodKey, Arc<PodInfo>>,
    /// Where the next decision starts looking at nodes.
    pub next_start: usize,
    /// Waiting pods nominated to a node by their preemption.
    pub nominated: HashMap<PodKey, Arc<str>>,
    /// Every PodDisruptionBudget, and their `namespace/name` keys (in the same order).
    pub budgets: Vec<PodDisruptionBudget>,
    budget_keys: Vec<String>,
    /// The claims, volumes and classes pods' volumes are judged by.
    pub storage: Storage,
}

impl State {
    /// Applies a change of one watched object (`deleted` for a deletion). Returns whether the
    /// scheduling loop has new work.
    pub fn apply(&mut self, kind: Watched, obj: &Object, deleted: bool, now: Instant) -> bool {
        match kind {
            Watched::Pod => self.apply_pod(&obj.key().to_string(), obj, deleted, now),
            Watched::Node => self.apply_node(obj.name(), obj, deleted, now),
            Watched::Namespace => {
                if deleted {
                    self.cache.remove_namespace(obj.name());
                } else {
                    self.cache.set_namespace(obj.name(), obj.labels().clone());
                }
                false
            }
            Watched::Claim | Watched::Volume | Watched::StorageClass => {
                match kind {
                    Watched::Claim => self.storage.apply_claim(obj, deleted),
                    Watched::Volume => self.storage.apply_volume(obj, deleted),
                    _ => self.storage.apply_class(obj, deleted),
                }
                // A claim bound, a volume made: pods waiting on storage may fit now
                // (upstream moves them on these cluster events).
                self.queue.move_all(now);
                true
            }
            Watched::Budget => {
                let key = obj.key().to_string();
                if let Some(i) = self.budget_keys.iter().position(|k| *k == key) {
                    self.budget_keys.swap_remove(i);
                    self.budgets.swap_remove(i);
                }
                if !deleted {
                    match serde_json::from_slice(obj.data()) {
                        Ok(b) => {
                            self.budget_keys.push(key);
                            self.budgets.push(b);
                        }
                        Err(e) => tracing::warn!(budget = key, error = %e, "unreadable budget"),
                    }
                }
                false
            }
        }
    }

    fn forget_pending(&mut self, key: &str) {
        self.pending.remove(key);
        self.nominated.remove(key);
        self.queue.remove(&PodKey::from(key));
    }

    fn apply_pod(&mut self, key: &str, obj: &Object, deleted: bool, now: Instant) -> bool {
        if deleted {
            self.forget_pending(key);
            if self.cache.unplace(key).is_some() {
                self.queue.move_all(now);
                return true;
            }
            return false;
        }
        let node = obj.field("spec.nodeName").filter(|n| !n.is_empty());
        let terminal = matches!(obj.field("status.phase"), Some("Succeeded" | "Failed"));
        if let Some(node) = node {
            self.forget_pending(key);
            if terminal {
                let freed = self.cache.unplace(key).is_some();
                if freed {
                    self.queue.move_all(now);
                }
                return freed;
            }
            if let (Some(on), Some(known)) = (self.cache.node_of(key), self.cache.pod(key))
                && **on == *node
                && *known.uid == *obj.uid()
                && *known.labels == *obj.labels()
                && known.terminating == obj.is_deleting()
                // The start time comes after the binding (from the node) and orders victims.
                && known.start_time.is_some()
            {
                self.cache.confirm(key);
                return false;
            }
            match PodInfo::parse(obj.data()) {
                Ok(pod) => self.cache.place(Arc::new(pod), &Arc::from(node)),
                Err(e) => tracing::warn!(pod = key, error = %e, "unreadable pod"),
            }
            return false;
        }
        // Unbound. A pod whose binding is in flight keeps its assumed place.
        if self.cache.is_assumed(key) {
            return false;
        }
        let pod = match PodInfo::parse(obj.data()) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(pod = key, error = %e, "unreadable pod");
                return false;
            }
        };
        if !pod.wants_scheduling() {
            self.forget_pending(key);
            return false;
        }
        let changed = self
            .pending
            .get(key)
            .is_none_or(|old| !old.same_placement_facts(&pod));
        let priority = pod.priority;
        let pod_key = pod.key.clone();
        if let Some(n) = &pod.nominated_node {
            self.nominated.insert(pod_key.clone(), n.clone());
        }
        self.pending.insert(pod_key.clone(), Arc::new(pod));
        if changed {
            self.queue.add(pod_key, priority, now);
        }
        changed
    }

    fn apply_node(&mut self, name: &str, obj: &Object, deleted: bool, now: Instant) -> bool {
        if deleted {
            self.cache.remove_node(name);
            return false;
        }
        match NodeFacts::parse(obj.data()) {
            Ok(facts) => {
                let changed = self.cache.upsert_node(facts);
                if changed {
                    self.queue.move_all(now);
                }
                changed
            }
            Err(e) => {
                tracing::warn!(node = name, error = %e, "unreadable node");
                false
            }
        }
    }

    /// Takes the next pod off the queue and decides it; a pod given a node is assumed there, a
    /// pod that preempts is nominated to its node.
    pub fn decide_next(&mut self, now: Instant) -> Option<Outcome> {
        loop {
            let key = self.queue.pop(now)?;
            let Some(mut pod) = self.pending.get(&key).cloned() else {
                self.queue.remove(&key);
                continue;
            };
            if let Some(n) = self.nominated.get(&key)
                && pod.nominated_node.as_ref() != Some(n)
            {
                let mut p = (*pod).clone();
                p.nominated_node = Some(n.clone());
                pod = Arc::new(p);
            }
            if !pod.claims.is_empty() {
                match self.storage.check(&pod) {
                    Ok(v) => {
                        let mut p = (*pod).clone();
                        p.volumes = Arc::new(v);
                        pod = Arc::new(p);
                    }
                    Err(why) => {
                        self.queue.unschedulable(&key, now);
                        let total = self.cache.view().nodes.len();
                        let message = match total {
                            0 => super::message::NO_NODES.to_string(),
                            n => super::message::fit_error(n, &Diagnosis::prefilter(why)),
                        };
                        return Some(Outcome::Unschedulable { pod, message });
                    }
                }
            }
            let counted = self.count_nominated(&pod);
            let planned = plan::plan_with(
                &pod,
                &self.cache.view(),
                self.next_start,
                plan::seed_of(&pod.uid),
                &self.budgets,
            );
            for k in counted {
                self.cache.unplace(&k);
            }
            self.next_start = planned.next_start;
            return Some(match planned.decision {
                Decision::Bind { node } => {
                    self.cache.assume(pod.clone(), &node);
                    Outcome::Bind { pod, node }
                }
                Decision::Unschedulable { message } => {
                    self.queue.unschedulable(&key, now);
                    Outcome::Unschedulable { pod, message }
                }
                Decision::Preempt {
                    node,
                    victims,
                    message,
                } => {
                    self.queue.unschedulable(&key, now);
                    self.nominated.insert(key.clone(), node.clone());
                    // Counted as terminating from now on, so a retry before their deletion
                    // is observed waits instead of preempting again.
                    for v in &victims {
                        let mut going = (**v).clone();
                        going.terminating = true;
                        self.cache.place(Arc::new(going), &node);
                    }
                    Outcome::Preempt {
                        pod,
                        node,
                        victims,
                        message,
                    }
                }
            });
        }
    }

    /// Places the other pods nominated to a node with at least `pod`'s priority on their node
    /// for one decision (upstream `addNominatedPods`); returns their keys, to unplace after.
    fn count_nominated(&mut self, pod: &PodInfo) -> Vec<PodKey> {
        if self.nominated.is_empty() {
            return Vec::new();
        }
        let mut counted = Vec::new();
        for (key, node) in &self.nominated {
            if *key == pod.key || self.cache.node_of(key).is_some() {
                continue;
            }
            if let Some(p) = self.pending.get(key)
                && p.priority >= pod.priority
            {
                counted.push((p.clone(), node.clone()));
            }
        }
        let keys = counted.iter().map(|(p, _)| p.key.clone()).collect();
        for (p, node) in counted {
            self.cache.place(p, &node);
        }
        keys
    }

    /// The binding was written.
    pub fn bound(&mut self, key: &str) {
        self.forget_pending(key);
    }

    /// The binding failed; `gone` when the pod no longer needs one (deleted, or bound by
    /// someone else). Its assumed resources are released, which may let others fit.
    pub fn bind_failed(&mut self, key: &str, gone: bool, now: Instant) {
        self.cache.forget(key);
        self.queue.move_all(now);
        if gone {
            self.forget_pending(key);
        } else {
            self.queue.failed(&PodKey::from(key), now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn stored(v: Value) -> Object {
        let mut v = v;
        v["metadata"]["resourceVersion"] = json!("1");
        Object::from_value(&v)
    }

    fn node(name: &str, cpu: &str) -> (Watched, Object) {
        (
            Watched::Node,
            stored(json!({"metadata": {"name": name},
                "status": {"allocatable": {"cpu": cpu, "memory": "1Gi", "pods": "10"},
                    "conditions": [{"type": "Ready", "status": "True"}]}})),
        )
    }

    fn pod(name: &str, node: Option<&str>) -> (Watched, Object) {
        let mut v = json!({"metadata": {"name": name, "namespace": "d", "uid": format!("u-{name}")},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}});
        if let Some(n) = node {
            v["spec"]["nodeName"] = json!(n);
        }
        (Watched::Pod, stored(v))
    }

    fn apply(s: &mut State, (k, o): &(Watched, Object)) -> bool {
        s.apply(*k, o, false, Instant::now())
    }

    fn storage_pod(name: &str, claim: &str) -> (Watched, Object) {
        (
            Watched::Pod,
            stored(
                json!({"metadata": {"name": name, "namespace": "d", "uid": format!("u-{name}")},
                "spec": {"containers": [{"name": "c"}],
                    "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]}}),
            ),
        )
    }

    #[test]
    fn a_pod_goes_where_its_bound_volume_is_and_a_waiting_claim_follows_the_pod() {
        let mut s = State::default();
        apply(&mut s, &node("a", "2"));
        apply(&mut s, &node("b", "2"));
        let now = Instant::now();
        let claim_of = |name: &str, spec: Value| {
            stored(json!({"metadata": {"name": name, "namespace": "d"}, "spec": spec}))
        };
        s.apply(
            Watched::StorageClass,
            &stored(json!({"metadata": {"name": "local-path"},
            "volumeBindingMode": "WaitForFirstConsumer"})),
            false,
            now,
        );
        s.apply(Watched::Volume, &stored(json!({"metadata": {"name": "pv-b"}, "spec": {"nodeAffinity":
            {"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname",
                "operator": "In", "values": ["b"]}]}]}}}})), false, now);
        s.apply(
            Watched::Claim,
            &claim_of("on-b", json!({"volumeName": "pv-b"})),
            false,
            now,
        );
        s.apply(
            Watched::Claim,
            &claim_of("new", json!({"storageClassName": "local-path"})),
            false,
            now,
        );
        for n in ["a", "b"] {
            let o = stored(
                json!({"metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
                "status": {"allocatable": {"cpu": "2", "memory": "1Gi", "pods": "10"}}}),
            );
            s.apply(Watched::Node, &o, false, now);
        }
        apply(&mut s, &storage_pod("sticky", "on-b"));
        let Some(Outcome::Bind { node, .. }) = s.decide_next(now) else {
            panic!("expected a binding")
        };
        assert_eq!(&*node, "b", "node a has a volume node affinity conflict");
        apply(&mut s, &storage_pod("first", "new"));
        let Some(Outcome::Bind { pod, .. }) = s.decide_next(now) else {
            panic!("expected a binding")
        };
        assert_eq!(pod.volumes.select_node, ["new"]);
        apply(&mut s, &storage_pod("lost", "missing"));
        let Some(Outcome::Unschedulable { message, .. }) = s.decide_next(now) else {
            panic!("expected no fit")
        };
        assert_eq!(
            message,
            "0/2 nodes are available: persistentvolumeclaim \"missing\" not found. preemption: \
             0/2 nodes are available: 2 Preemption is not helpful for scheduling.."
        );
    }

    #[test]
    fn a_bound_pod_learns_its_start_time_from_the_status_written_after_binding() {
        let mut s = State::default();
        apply(&mut s, &node("n1", "4"));
        apply(&mut s, &pod("a", Some("n1")));
        assert_eq!(s.cache.pod("d/a").map(|p| p.start_time), Some(None));
        let (kind, started) = pod("a", Some("n1"));
        let mut v = started.value().expect("json");
        v["status"] = json!({"phase": "Running", "startTime": "2026-11-29T12:00:05Z"});
        apply(&mut s, &(kind, stored(v)));
        let want: jiff::Timestamp = "2026-11-29T12:00:05Z".parse().expect("time");
        assert_eq!(
            s.cache.pod("d/a").and_then(|p| p.start_time),
            Some(want),
            "preemption orders victims by it"
        );
    }

    #[test]
    fn a_new_pod_is_queued_decided_and_assumed() {
        let mut s = State::default();
        apply(&mut s, &node("n1", "2"));
        assert!(apply(&mut s, &pod("a", None)));
        let Some(Outcome::Bind { node, .. }) = s.decide_next(Instant::now()) else {
            panic!("expected a binding")
        };
        assert_eq!(&*node, "n1");
        assert_eq!(s.cache.view().nodes[0].requested.milli_cpu, 1000);
        // Its binding observed: confirmed, no longer pending, counted once.
        apply(&mut s, &pod("a", Some("n1")));
        assert!(!s.cache.is_assumed("d/a") && !s.pending.contains_key("d/a"));
        assert_eq!(s.cache.view().nodes[0].requested.milli_cpu, 1000);
    }

    #[test]
    fn assumed_pods_count_before_their_binding_is_seen() {
        let mut s = State::default();
        apply(&mut s, &node("n1", "1"));
        apply(&mut s, &pod("a", None));
        apply(&mut s, &pod("b", None));
        assert!(matches!(
            s.decide_next(Instant::now()),
            Some(Outcome::Bind { .. })
        ));
        let Some(Outcome::Unschedulable { message, .. }) = s.decide_next(Instant::now()) else {
            panic!("the second pod must not fit")
        };
        assert!(message.contains("1 Insufficient cpu"), "{message}");
    }

    #[test]
    fn an_unschedulable_pod_is_retried_when_a_node_arrives_or_a_pod_goes() {
        let mut s = State::default();
        apply(&mut s, &node("n1", "1"));
        apply(&mut s, &pod("big", Some("n1")));
        apply(&mut s, &pod("a", None));
        assert!(matches!(
            s.decide_next(Instant::now()),
            Some(Outcome::Unschedulable { .. })
        ));
        assert!(s.decide_next(Instant::now()).is_none());
        // A pod's deletion frees the node; the waiting pod comes back (after its 1 s backoff).
        let (k, o) = pod("big", Some("n1"));
        assert!(s.apply(k, &o, true, Instant::now()));
        let later = Instant::now() + std::time::Duration::from_secs(2);
        s.queue.flush(later);
        assert!(matches!(s.decide_next(later), Some(Outcome::Bind { .. })));
    }

    #[test]
    fn a_status_only_change_of_a_waiting_pod_does_not_requeue_it() {
        let mut s = State::default();
        apply(&mut s, &pod("a", None));
        assert!(matches!(
            s.decide_next(Instant::now()),
            Some(Outcome::Unschedulable { .. })
        ));
        let (k, mut o) = pod("a", None);
        let mut v: Value = serde_json::from_slice(o.data()).unwrap();
        v["status"] = json!({"conditions": [{"type": "PodScheduled", "status": "False"}]});
        o = stored(v);
        assert!(!s.apply(k, &o, false, Instant::now()));
        // A label change does.
        let mut v: Value = serde_json::from_slice(o.data()).unwrap();
        v["metadata"]["labels"] = json!({"x": "y"});
        assert!(s.apply(k, &stored(v), false, Instant::now()));
    }

    #[test]
    fn a_failed_binding_releases_the_node_and_retries_later() {
        let mut s = State::default();
        apply(&mut s, &node("n1", "1"));
        apply(&mut s, &pod("a", None));
        s.decide_next(Instant::now());
        s.bind_failed("d/a", false, Instant::now());
        assert_eq!(s.cache.view().nodes[0].requested.milli_cpu, 0);
        assert!(s.pending.contains_key("d/a") && s.queue.contains(&PodKey::from("d/a")));
        s.decide_next(Instant::now());
        s.bind_failed("d/a", true, Instant::now());
        assert!(!s.pending.contains_key("d/a") && !s.queue.contains(&PodKey::from("d/a")));
    }

    #[test]
    fn finished_pods_release_their_node() {
        let mut s = State::default();
        apply(&mut s, &node("n1", "2"));
        apply(&mut s, &pod("a", Some("n1")));
        let (k, o) = pod("a", Some("n1"));
        let mut v: Value = serde_json::from_slice(o.data()).unwrap();
        v["status"] = json!({"phase": "Succeeded"});
        s.apply(k, &stored(v), false, Instant::now());
        assert_eq!(s.cache.view().nodes[0].requested.milli_cpu, 0);
    }

    fn with_priority((k, o): (Watched, Object), priority: i32, never: bool) -> (Watched, Object) {
        let mut v: Value = serde_json::from_slice(o.data()).unwrap();
        v["spec"]["priority"] = json!(priority);
        if never {
            v["spec"]["preemptionPolicy"] = json!("Never");
        }
        (k, stored(v))
    }

    #[test]
    fn a_preemptor_is_nominated_and_lower_priority_pods_do_not_take_its_room() {
        let t0 = Instant::now();
        let mut s = State::default();
        apply(&mut s, &node("n1", "1"));
        apply(&mut s, &pod("low", Some("n1")));
        apply(&mut s, &with_priority(pod("high", None), 100, false));
        let Some(Outcome::Preempt {
            node,
            victims,
            message,
            ..
        }) = s.decide_next(t0)
        else {
            panic!("expected a preemption")
        };
        assert_eq!(&*node, "n1");
        assert_eq!(
            victims.iter().map(|v| &*v.name).collect::<Vec<_>>(),
            ["low"]
        );
        assert_eq!(message, "0/1 nodes are available: 1 Insufficient cpu.");
        assert!(s.cache.pod("d/low").is_some_and(|p| p.terminating));
        // Retried while the victim terminates, it waits rather than preempting again.
        let t1 = t0 + std::time::Duration::from_secs(2);
        s.queue.move_all(t0);
        s.queue.flush(t1);
        let Some(Outcome::Unschedulable { message, .. }) = s.decide_next(t1) else {
            panic!("the nominee waits for its victim")
        };
        assert_eq!(
            message,
            "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to a \
             terminating pod on the nominated node.."
        );
        // The victim goes; a newcomer of lower priority finds the room taken by the nominee.
        let (k, o) = pod("low", Some("n1"));
        s.apply(k, &o, true, t1);
        apply(&mut s, &pod("newcomer", None));
        let Some(Outcome::Unschedulable { pod: p, message }) = s.decide_next(t1) else {
            panic!("the newcomer must wait")
        };
        assert_eq!(&*p.name, "newcomer");
        assert_eq!(
            message,
            "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: \
             1 No preemption victims found for incoming pod.."
        );
        let later = t1 + std::time::Duration::from_secs(3);
        s.queue.flush(later);
        let Some(Outcome::Bind { pod: p, node }) = s.decide_next(later) else {
            panic!("the nominee binds")
        };
        assert_eq!((&*p.name, &*node), ("high", "n1"));
    }

    #[test]
    fn a_pod_that_may_not_preempt_says_so_and_equal_priority_is_no_victim() {
        let mut s = State::default();
        apply(&mut s, &node("n1", "1"));
        apply(&mut s, &with_priority(pod("low", Some("n1")), 100, false));
        apply(&mut s, &with_priority(pod("polite", None), 1000, true));
        apply(&mut s, &with_priority(pod("peer", None), 100, false));
        let mut messages = Vec::new();
        while let Some(Outcome::Unschedulable { pod, message }) = s.decide_next(Instant::now()) {
            messages.push((pod.name.to_string(), message));
        }
        assert_eq!(
            messages,
            [
                (
                    "polite".to_string(),
                    "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due \
                     to preemptionPolicy=Never.."
                        .to_string()
                ),
                (
                    "peer".to_string(),
                    "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are \
                     available: 1 No preemption victims found for incoming pod.."
                        .to_string()
                ),
            ]
        );
    }

    #[test]
    fn pods_of_other_schedulers_are_left_alone() {
        let mut s = State::default();
        let (k, o) = pod("a", None);
        let mut v: Value = serde_json::from_slice(o.data()).unwrap();
        v["spec"]["schedulerName"] = json!("my-scheduler");
        assert!(!s.apply(k, &stored(v), false, Instant::now()));
        assert!(s.queue.is_empty());
    }
}
