//! Inter-pod affinity and anti-affinity: the required rules as a filter (the pod's affinity,
//! its anti-affinity, and existing pods' anti-affinity against it, per topology domain) and the
//! preferred rules (both directions, plus existing pods' required affinity at weight 1) as a
//! score, with upstream's arithmetic.
//!
//! Planner: pure, no I/O.

use super::cache::{Cluster, NodeInfo};
use super::facts::PodInfo;
use super::message::{Reason, Rejection};
use super::terms::{AffinityTerm, NamespaceLabels};
use std::collections::HashMap;

/// A topology domain: (topology key, node label value).
type Domain<'a> = (&'a str, &'a str);

/// Weight given to existing pods' required affinity terms when scoring (upstream's
/// `hardPodAffinityWeight` default).
const HARD_POD_AFFINITY_WEIGHT: i64 = 1;

fn bump<'a>(m: &mut HashMap<Domain<'a>, i64>, node: &'a NodeInfo, key: &'a str, by: i64) {
    if let Some(v) = node.labels().get(key) {
        *m.entry((key, v.as_str())).or_insert(0) += by;
    }
}

/// The filter's state for one pod.
pub struct InterPodFilter<'a> {
    /// Domains holding pods whose required anti-affinity matches the incoming pod.
    existing_anti: HashMap<Domain<'a>, i64>,
    /// Domains holding pods matching all of the incoming pod's required affinity terms.
    affinity: HashMap<Domain<'a>, i64>,
    /// Domains holding pods matching one of the pod's required anti-affinity terms.
    anti: HashMap<Domain<'a>, i64>,
    /// The pod matches its own affinity terms (it may be the first of a group).
    matches_itself: bool,
}

impl<'a> InterPodFilter<'a> {
    pub fn new(pod: &'a PodInfo, cluster: &Cluster<'a>) -> InterPodFilter<'a> {
        let ns = cluster.namespaces;
        let mut existing_anti = HashMap::new();
        if cluster.pods_with_required_anti > 0 {
            for node in cluster.nodes.iter().filter(|n| n.with_required_anti > 0) {
                for p in &node.pods {
                    for t in &p.affinity.required_anti {
                        if t.matches(&pod.namespace, &pod.labels, ns) {
                            bump(&mut existing_anti, node, &t.topology_key, 1);
                        }
                    }
                }
            }
        }
        let own = &pod.affinity;
        let mut affinity = HashMap::new();
        let mut anti = HashMap::new();
        if !own.required.is_empty() || !own.required_anti.is_empty() {
            for node in cluster.nodes {
                for p in &node.pods {
                    let about_p = |t: &AffinityTerm| t.matches(&p.namespace, &p.labels, ns);
                    if !own.required.is_empty() && own.required.iter().all(about_p) {
                        for t in &own.required {
                            bump(&mut affinity, node, &t.topology_key, 1);
                        }
                    }
                    for t in own.required_anti.iter().filter(|t| about_p(t)) {
                        bump(&mut anti, node, &t.topology_key, 1);
                    }
                }
            }
        }
        let matches_itself = own
            .required
            .iter()
            .all(|t| t.matches(&pod.namespace, &pod.labels, ns));
        InterPodFilter {
            existing_anti,
            affinity,
            anti,
            matches_itself,
        }
    }

    pub fn check(&self, pod: &PodInfo, node: &NodeInfo) -> Result<(), Rejection<'a>> {
        let labels = node.labels();
        let mut pods_exist = true;
        for t in &pod.affinity.required {
            let Some(v) = labels.get(&t.topology_key) else {
                return Err(Rejection::unresolvable(Reason::PodAffinity));
            };
            if self
                .affinity
                .get(&(t.topology_key.as_str(), v.as_str()))
                .copied()
                .unwrap_or(0)
                <= 0
            {
                pods_exist = false;
            }
        }
        // No matching pod anywhere: the first pod of a group that matches its own terms may go.
        if !(pods_exist || self.affinity.is_empty() && self.matches_itself) {
            return Err(Rejection::unresolvable(Reason::PodAffinity));
        }
        if !self.anti.is_empty() {
            for t in &pod.affinity.required_anti {
                if let Some(v) = labels.get(&t.topology_key)
                    && self
                        .anti
                        .get(&(t.topology_key.as_str(), v.as_str()))
                        .copied()
                        .unwrap_or(0)
                        > 0
                {
                    return Err(Rejection::resolvable(Reason::PodAntiAffinity));
                }
            }
        }
        if !self.existing_anti.is_empty()
            && labels.iter().any(|(k, v)| {
                self.existing_anti
                    .get(&(k.as_str(), v.as_str()))
                    .copied()
                    .unwrap_or(0)
                    > 0
            })
        {
            return Err(Rejection::resolvable(Reason::ExistingAntiAffinity));
        }
        Ok(())
    }
}

/// The score's state for one pod: a weight per topology domain.
pub struct InterPodScore<'a> {
    domains: HashMap<&'a str, HashMap<&'a str, i64>>,
}

fn add_term<'a>(
    scores: &mut HashMap<&'a str, HashMap<&'a str, i64>>,
    term: &'a AffinityTerm,
    weight: i64,
    subject: &PodInfo,
    ns: &NamespaceLabels,
    node: &'a NodeInfo,
) {
    if term.matches(&subject.namespace, &subject.labels, ns)
        && let Some(v) = node.labels().get(&term.topology_key)
    {
        *scores
            .entry(term.topology_key.as_str())
            .or_default()
            .entry(v.as_str())
            .or_insert(0) += weight;
    }
}

impl<'a> InterPodScore<'a> {
    /// `None` when neither the pod nor any placed pod has a term that could score.
    pub fn new(pod: &'a PodInfo, cluster: &Cluster<'a>) -> Option<InterPodScore<'a>> {
        let own = &pod.affinity;
        let all = own.has_preferred();
        if !all && cluster.pods_with_affinity == 0 {
            return None;
        }
        let ns = cluster.namespaces;
        let mut domains = HashMap::new();
        for node in cluster.nodes {
            if node.labels().is_empty() || (!all && node.with_affinity == 0) {
                continue;
            }
            for p in node.pods.iter().filter(|p| all || !p.affinity.is_empty()) {
                for (w, t) in &own.preferred {
                    add_term(&mut domains, t, *w, p, ns, node);
                }
                for (w, t) in &own.preferred_anti {
                    add_term(&mut domains, t, -*w, p, ns, node);
                }
                for t in &p.affinity.required {
                    add_term(&mut domains, t, HARD_POD_AFFINITY_WEIGHT, pod, ns, node);
                }
                for (w, t) in &p.affinity.preferred {
                    add_term(&mut domains, t, *w, pod, ns, node);
                }
                for (w, t) in &p.affinity.preferred_anti {
                    add_term(&mut domains, t, -*w, pod, ns, node);
                }
            }
        }
        (!domains.is_empty()).then_some(InterPodScore { domains })
    }

    pub fn raw(&self, node: &NodeInfo) -> i64 {
        self.domains
            .iter()
            .filter_map(|(k, values)| values.get(node.labels().get(*k)?.as_str()))
            .sum()
    }
}

/// Scales raw scores linearly so the lowest is 0 and the highest 100 (all equal: all 0).
pub fn normalize(raw: &[i64]) -> Vec<i64> {
    let min = raw.iter().copied().min().unwrap_or(0);
    let max = raw.iter().copied().max().unwrap_or(0);
    raw.iter()
        .map(|s| {
            if max > min {
                (100.0 * ((s - min) as f64 / (max - min) as f64)) as i64
            } else {
                0
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ClusterFixture, node, nodes_passing, pod};
    use serde_json::{Value, json};

    fn term(app: &str, key: &str) -> Value {
        json!({"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key})
    }

    /// A pod with one required term of `kind` (`podAffinity` or `podAntiAffinity`).
    fn requiring(name: &str, kind: &str, term: Value) -> PodInfo {
        pod(
            name,
            json!({"spec": {"affinity": {kind: {
            "requiredDuringSchedulingIgnoredDuringExecution": [term]}}}}),
        )
    }

    /// Two zones, two nodes each; a `db` pod on a1.
    fn cluster() -> ClusterFixture {
        let mut f = ClusterFixture::default();
        for (n, z) in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")] {
            f.add_node(node(
                n,
                json!({"metadata": {"labels": {"zone": z, "kubernetes.io/hostname": n}}}),
            ));
        }
        f.place(
            pod("db", json!({"metadata": {"labels": {"app": "db"}}})),
            "a1",
        );
        f
    }

    fn allowed(f: &ClusterFixture, p: &PodInfo) -> Vec<String> {
        let view = f.view();
        let filter = InterPodFilter::new(p, &view);
        nodes_passing(&view, |n| filter.check(p, n).is_ok())
    }

    #[test]
    fn required_affinity_keeps_the_pod_in_the_domain_of_a_matching_pod() {
        let f = cluster();
        let p = requiring("web", "podAffinity", term("db", "zone"));
        assert_eq!(allowed(&f, &p), ["a1", "a2"]);
    }

    #[test]
    fn required_affinity_with_no_match_anywhere_admits_a_pod_matching_itself_only() {
        let f = cluster();
        let lonely = requiring("web", "podAffinity", term("cache", "zone"));
        assert!(allowed(&f, &lonely).is_empty());
        let first = pod(
            "cache",
            json!({"metadata": {"labels": {"app": "cache"}}, "spec": {"affinity": {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("cache", "zone")]}}}}),
        );
        assert_eq!(allowed(&f, &first).len(), 4);
    }

    #[test]
    fn required_anti_affinity_keeps_the_pod_out_of_the_domain() {
        let f = cluster();
        let p = requiring(
            "web",
            "podAntiAffinity",
            term("db", "kubernetes.io/hostname"),
        );
        assert_eq!(allowed(&f, &p), ["a2", "b1", "b2"]);
        let view = f.view();
        assert_eq!(
            InterPodFilter::new(&p, &view).check(&p, &view.nodes[0]),
            Err(Rejection::resolvable(Reason::PodAntiAffinity))
        );
    }

    #[test]
    fn an_existing_pods_anti_affinity_keeps_matching_pods_away() {
        let mut f = cluster();
        f.place(
            requiring("loner", "podAntiAffinity", term("web", "zone")),
            "b1",
        );
        let web = pod("web", json!({"metadata": {"labels": {"app": "web"}}}));
        assert_eq!(allowed(&f, &web), ["a1", "a2"]);
        let other_ns = pod(
            "web",
            json!({"metadata": {"namespace": "other", "labels": {"app": "web"}}}),
        );
        assert_eq!(
            allowed(&f, &other_ns).len(),
            4,
            "terms default to the owner's namespace"
        );
    }

    #[test]
    fn preferred_terms_score_their_domains_and_existing_required_affinity_counts_once() {
        let mut f = cluster();
        f.place(requiring("fan", "podAffinity", term("web", "zone")), "b2");
        let p = pod(
            "web",
            json!({"metadata": {"labels": {"app": "web"}}, "spec": {"affinity": {
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "podAffinityTerm": term("db", "zone")}]},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 4, "podAffinityTerm": term("db", "kubernetes.io/hostname")}]}}}}),
        );
        let view = f.view();
        let s = InterPodScore::new(&p, &view).unwrap();
        let raw: Vec<i64> = view.nodes.iter().map(|n| s.raw(n)).collect();
        // a1: +10 (zone a) −4 (host a1); a2: +10; b1, b2: +1 from fan's required term.
        assert_eq!(raw, [6, 10, 1, 1]);
        assert_eq!(normalize(&raw), [55, 100, 0, 0]);
    }

    #[test]
    fn no_terms_anywhere_means_no_inter_pod_score() {
        let f = cluster();
        let p = pod("web", json!({}));
        assert!(InterPodScore::new(&p, &f.view()).is_none());
        assert_eq!(normalize(&[3, 3]), [0, 0]);
    }
}
