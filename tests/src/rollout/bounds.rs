//! The surge bound of a rolling update checked on pods, with the ReplicaSet controllers' lag
//! taken into account. Pure.
//!
//! Upstream's Deployment controller bounds the sum of its ReplicaSets' `spec.replicas` by
//! `replicas + maxSurge`, and each ReplicaSet controller then creates or deletes pods on its
//! own. When an old ReplicaSet is scaled down and the new one up, the new pod may be created
//! before the old ReplicaSet's controller has marked its surplus pod for deletion: for a
//! moment one pod more exists, upstream as in Berth. So a pod counts toward the surge (see
//! [`super::census`]) unless it is such a surplus: while a ReplicaSet has more counted pods
//! than its current `spec.replicas` and had at least that many replicas earlier in the watch,
//! it counts as `spec.replicas`. Pods beyond anything their ReplicaSet was ever sized for still
//! count. Pod and ReplicaSet samples are put in store order by resourceVersion (one global
//! revision, see [`super::tally::Stamp`]).

use std::collections::BTreeMap;

use super::census::Sample;
use super::sizes::SizeSample;
use super::tally::{Line, Timeline};

/// The pods counted toward the surge in `pod`, given the ReplicaSet sizes `now` and the
/// largest size each ReplicaSet had up to then (`peak`).
fn counted(pod: &Sample, now: &BTreeMap<String, i64>, peak: &BTreeMap<String, i64>) -> usize {
    pod.by_hash
        .iter()
        .map(|(h, c)| {
            let size = |m: &BTreeMap<String, i64>| {
                usize::try_from(m.get(h).copied().unwrap_or(0)).unwrap_or(0)
            };
            let (spec, was) = (size(now), size(peak));
            if c.counted > spec && c.counted <= was {
                spec
            } else {
                c.counted
            }
        })
        .sum()
}

/// The pod samples whose count toward the surge exceeds `limit`, each with the ReplicaSet
/// sizes it was judged against, one line each; empty when the bound held throughout. Pod
/// samples older than every size sample are judged against no ReplicaSet at all.
pub fn surge_violations(
    pods: &Timeline<Sample>,
    sizes: &Timeline<SizeSample>,
    limit: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut next = 0;
    let mut now: Option<&SizeSample> = None;
    let mut peak: BTreeMap<String, i64> = BTreeMap::new();
    for pod in &pods.samples {
        while let Some(z) = sizes.samples.get(next)
            && z.stamp.rv <= pod.stamp.rv
        {
            for (h, n) in &z.by_hash {
                let p = peak.entry(h.clone()).or_insert(0);
                *p = (*p).max(*n);
            }
            now = Some(z);
            next += 1;
        }
        let empty = BTreeMap::new();
        let sized = now.map_or(&empty, |z| &z.by_hash);
        let n = counted(pod, sized, &peak);
        if n > limit {
            let against = now.map_or_else(|| "no ReplicaSet sizes yet".into(), Line::line);
            out.push(format!(
                "{n} > {limit} at {}\n    sizes: {against}",
                pod.line()
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::census::Counts;
    use crate::rollout::tally::Stamp;
    use std::time::Duration;

    fn stamp(rv: u64) -> Stamp {
        Stamp {
            at: Duration::ZERO,
            rv,
            event: format!("rv{rv}"),
        }
    }

    fn pods(rv: u64, per_hash: &[(&str, usize)]) -> Sample {
        let by_hash: BTreeMap<String, Counts> = per_hash
            .iter()
            .map(|(h, n)| {
                let c = Counts {
                    counted: *n,
                    available: *n,
                    running: *n,
                };
                (h.to_string(), c)
            })
            .collect();
        let counted = per_hash.iter().map(|(_, n)| n).sum();
        Sample {
            stamp: stamp(rv),
            total: Counts {
                counted,
                available: counted,
                running: counted,
            },
            by_hash,
        }
    }

    fn sizes(rv: u64, per_hash: &[(&str, i64)]) -> SizeSample {
        let by_hash: BTreeMap<String, i64> =
            per_hash.iter().map(|(h, n)| (h.to_string(), *n)).collect();
        SizeSample {
            stamp: stamp(rv),
            total: by_hash.values().sum(),
            by_hash,
        }
    }

    fn timelines(p: Vec<Sample>, s: Vec<SizeSample>) -> (Timeline<Sample>, Timeline<SizeSample>) {
        (Timeline { samples: p }, Timeline { samples: s })
    }

    #[test]
    fn a_surplus_pod_of_a_scaled_down_replica_set_does_not_count() {
        // old 3 -> 2 at rv 20, new 1 -> 2 at rv 21, the new pod at rv 22 before the old
        // ReplicaSet marks its surplus pod at rv 23.
        let (p, s) = timelines(
            vec![
                pods(10, &[("old", 3), ("new", 1)]),
                pods(22, &[("old", 3), ("new", 2)]),
                pods(23, &[("old", 2), ("new", 2)]),
            ],
            vec![
                sizes(5, &[("old", 3), ("new", 1)]),
                sizes(20, &[("old", 2), ("new", 1)]),
                sizes(21, &[("old", 2), ("new", 2)]),
            ],
        );
        assert_eq!(surge_violations(&p, &s, 4), Vec::<String>::new());
    }

    #[test]
    fn pods_beyond_what_their_replica_set_ever_had_count() {
        let (p, s) = timelines(
            vec![pods(22, &[("old", 3), ("new", 2)])],
            vec![sizes(5, &[("old", 3), ("new", 1)])],
        );
        let v = surge_violations(&p, &s, 4);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].starts_with("5 > 4 at"), "{v:?}");
        assert!(v[0].contains("total=4 [new: 1] [old: 3]"), "{v:?}");
    }

    #[test]
    fn too_many_pods_before_any_size_is_known_is_a_violation() {
        let (p, s) = timelines(vec![pods(3, &[("old", 5)])], vec![sizes(5, &[("old", 5)])]);
        let v = surge_violations(&p, &s, 4);
        assert!(
            v.len() == 1 && v[0].contains("no ReplicaSet sizes yet"),
            "{v:?}"
        );
    }

    #[test]
    fn sizes_are_applied_in_store_order() {
        // The scale-down at rv 30 comes after the pod sample at rv 25: the surplus at rv 25
        // is not explained by it.
        let (p, s) = timelines(
            vec![pods(25, &[("old", 3), ("new", 2)])],
            vec![
                sizes(5, &[("old", 3), ("new", 2)]),
                sizes(30, &[("old", 2), ("new", 2)]),
            ],
        );
        assert_eq!(surge_violations(&p, &s, 4).len(), 1);
    }
}
