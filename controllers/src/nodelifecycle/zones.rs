//! Zone disruption (upstream `ComputeZoneState` and `handleDisruption`): nodes are grouped by
//! their region and zone labels; a zone whose nodes are all not Ready is fully disrupted, one
//! with more than 2 nodes not Ready and at least 55 % of them is partially disrupted. Taint-based
//! eviction is a remedy for a few broken nodes, not for a broken control plane or network:
//!
//! - every zone fully disrupted (the controller probably lost the nodes, not the nodes their
//!   pods): no node gets a `NoExecute` readiness taint and those placed are taken off;
//! - a partially disrupted zone of at most 50 nodes: no new `NoExecute` taints there (upstream
//!   sets that zone's eviction rate to 0); larger zones go on (upstream at a reduced rate);
//! - otherwise nodes are tainted as their Ready condition says.
//!
//! Upstream also paces the tainting of healthy zones (0.1 nodes a second); Berth taints at once.
//!
//! Planner: pure, no I/O.

use std::collections::BTreeMap;

/// Nodes with this label are left out of the zone counts.
pub const EXCLUDE_DISRUPTION: &str = "node.kubernetes.io/exclude-disruption";
/// The share of not-Ready nodes from which a zone is partially disrupted.
pub const UNHEALTHY_ZONE_THRESHOLD: f64 = 0.55;
/// Zones up to this size stop tainting when partially disrupted.
pub const LARGE_CLUSTER_THRESHOLD: usize = 50;

/// One zone's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneState {
    Normal,
    PartialDisruption,
    FullDisruption,
}

/// What may happen to a node's `NoExecute` readiness taints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tainting {
    /// They follow the Ready condition.
    Allowed,
    /// None is added (a present one may still swap between not-ready and unreachable).
    Held,
    /// None may stay.
    Suspended,
}

/// Upstream `nodetopology.GetZoneKey`: region and zone (the GA labels, else the beta ones);
/// empty for a node with neither.
pub fn zone_key(labels: &BTreeMap<String, String>) -> String {
    let get = |ga: &str, beta: &str| {
        labels
            .get(ga)
            .or_else(|| labels.get(beta))
            .cloned()
            .unwrap_or_default()
    };
    let region = get(
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/region",
    );
    let zone = get(
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/zone",
    );
    if region.is_empty() && zone.is_empty() {
        return String::new();
    }
    format!("{region}:\x00:{zone}")
}

/// Upstream `ComputeZoneState`.
pub fn zone_state(ready: usize, not_ready: usize) -> ZoneState {
    if ready == 0 && not_ready > 0 {
        ZoneState::FullDisruption
    } else if not_ready > 2
        && not_ready as f64 / (ready + not_ready) as f64 >= UNHEALTHY_ZONE_THRESHOLD
    {
        ZoneState::PartialDisruption
    } else {
        ZoneState::Normal
    }
}

/// Every zone's state and size.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Zones {
    zones: BTreeMap<String, (ZoneState, usize)>,
}

impl Zones {
    /// From each node's zone key and whether its Ready condition is True.
    pub fn of<'a>(nodes: impl IntoIterator<Item = (&'a str, bool)>) -> Zones {
        let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for (zone, ready) in nodes {
            let c = counts.entry(zone.to_string()).or_default();
            if ready {
                c.0 += 1;
            } else {
                c.1 += 1;
            }
        }
        Zones {
            zones: counts
                .into_iter()
                .map(|(z, (r, n))| (z, (zone_state(r, n), r + n)))
                .collect(),
        }
    }

    /// Every zone is fully disrupted (and there is one).
    pub fn all_fully_disrupted(&self) -> bool {
        !self.zones.is_empty()
            && self
                .zones
                .values()
                .all(|(s, _)| *s == ZoneState::FullDisruption)
    }

    /// What may happen to the readiness taints of a node in `zone`.
    pub fn tainting(&self, zone: &str) -> Tainting {
        if self.all_fully_disrupted() {
            return Tainting::Suspended;
        }
        match self.zones.get(zone) {
            Some((ZoneState::PartialDisruption, size)) if *size <= LARGE_CLUSTER_THRESHOLD => {
                Tainting::Held
            }
            _ => Tainting::Allowed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zones(nodes: &[(&'static str, bool)]) -> Zones {
        Zones::of(nodes.iter().copied())
    }

    #[test]
    fn zone_states_follow_upstreams_thresholds() {
        let cases = [
            ("all ready", 3, 0, ZoneState::Normal),
            ("one of three lost", 2, 1, ZoneState::Normal),
            (
                "two of three lost is never partial",
                1,
                2,
                ZoneState::Normal,
            ),
            (
                "three of five lost (60 %)",
                2,
                3,
                ZoneState::PartialDisruption,
            ),
            ("three of six lost (50 %)", 3, 3, ZoneState::Normal),
            ("none ready", 0, 1, ZoneState::FullDisruption),
            ("an empty zone", 0, 0, ZoneState::Normal),
        ];
        for (name, ready, not_ready, want) in cases {
            assert_eq!(zone_state(ready, not_ready), want, "{name}");
        }
    }

    #[test]
    fn tainting_stops_when_the_control_plane_rather_than_the_nodes_seems_broken() {
        let cases: Vec<(&str, Zones, &str, Tainting)> = vec![
            (
                "one node lost in a healthy zone",
                zones(&[("a", true), ("a", true), ("a", false)]),
                "a",
                Tainting::Allowed,
            ),
            (
                "every node of the only zone lost",
                zones(&[("a", false), ("a", false)]),
                "a",
                Tainting::Suspended,
            ),
            (
                "a whole zone lost while another is fine",
                zones(&[("a", false), ("b", true)]),
                "a",
                Tainting::Allowed,
            ),
            (
                "a small zone mostly lost",
                zones(&[("a", false), ("a", false), ("a", false), ("a", true)]),
                "a",
                Tainting::Held,
            ),
            (
                "every zone lost",
                zones(&[("a", false), ("b", false)]),
                "b",
                Tainting::Suspended,
            ),
        ];
        for (name, z, zone, want) in cases {
            assert_eq!(z.tainting(zone), want, "{name}");
        }
    }

    #[test]
    fn zones_come_from_the_ga_labels_or_the_beta_ones() {
        let l = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(zone_key(&l(&[])), "");
        assert_eq!(
            zone_key(&l(&[
                ("topology.kubernetes.io/region", "r"),
                ("topology.kubernetes.io/zone", "z")
            ])),
            "r:\x00:z"
        );
        assert_eq!(
            zone_key(&l(&[("failure-domain.beta.kubernetes.io/zone", "z")])),
            ":\x00:z"
        );
    }
}
