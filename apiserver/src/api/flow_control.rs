//! Which priority level a request is served at, as upstream's API Priority and Fairness
//! default configuration classifies it (flow schema → priority level), and each level's share
//! of the server's in-flight limits. A level that is full refuses only its own requests, so
//! one class of clients cannot starve another: a flood of unauthenticated joins fills `join`,
//! never the nodes' heartbeats (`node-high`) nor a user's writes (`global-default`).
//!
//! Planner: pure, no I/O.

use super::authn::Identity;

/// The join endpoint (unauthenticated; its token is checked by the handler).
pub const JOIN_PATH: &str = "/v1-berth/node-certificate";

/// A priority level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `system:masters` and health probes: never limited (upstream's `exempt`).
    Exempt,
    /// Nodes (`system:nodes`): Lease renewals, node and pod status (upstream's `node-high`).
    NodeHigh,
    /// ServiceAccounts of `kube-system` (upstream's `workload-high`).
    WorkloadHigh,
    /// Every other ServiceAccount (upstream's `workload-low`).
    WorkloadLow,
    /// Every other authenticated user (upstream's `global-default`).
    GlobalDefault,
    /// Agents joining (Berth's own: unauthenticated, with a small share of its own).
    Join,
    /// Everything else: unauthenticated requests (upstream's `catch-all`).
    CatchAll,
}

/// The limited levels, their names (upstream's, for metrics), the flow schema that leads to
/// each, and their nominal concurrency shares (upstream's defaults; `join` as `catch-all`).
pub const LEVELS: [(Level, &str, &str, u32); 6] = [
    (Level::NodeHigh, "node-high", "system-nodes", 40),
    (
        Level::WorkloadHigh,
        "workload-high",
        "kube-system-service-accounts",
        40,
    ),
    (Level::WorkloadLow, "workload-low", "service-accounts", 100),
    (Level::GlobalDefault, "global-default", "global-default", 20),
    (Level::Join, "join", "berth-join", 5),
    (Level::CatchAll, "catch-all", "catch-all", 5),
];

/// The level of a request by `identity` (none: anonymous) to `path`.
pub fn classify(identity: Option<&Identity>, path: &str) -> Level {
    if path == JOIN_PATH {
        return Level::Join;
    }
    let Some(id) = identity else {
        return Level::CatchAll;
    };
    let in_group = |g: &str| id.groups.iter().any(|x| x == g);
    if in_group("system:masters") {
        Level::Exempt
    } else if in_group("system:nodes") {
        Level::NodeHigh
    } else if id.user.starts_with("system:serviceaccount:kube-system:") {
        Level::WorkloadHigh
    } else if in_group("system:serviceaccounts") {
        Level::WorkloadLow
    } else if in_group("system:authenticated") && id.user != "system:anonymous" {
        Level::GlobalDefault
    } else {
        Level::CatchAll
    }
}

/// A level's share of `total` requests in flight: upstream's nominal concurrency limit,
/// `ceil(total × share / all shares)`, at least 1. Worked example: 200 mutating requests give
/// node-high ceil(200 × 40 / 210) = 39, global-default 20, join and catch-all 5 each.
pub fn share_of(total: usize, share: u32) -> usize {
    let all: u32 = LEVELS.iter().map(|(_, _, _, s)| s).sum();
    (total * share as usize).div_ceil(all as usize).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(user: &str, groups: &[&str]) -> Identity {
        Identity::new(user, groups.iter().map(|g| g.to_string()).collect())
    }

    #[test]
    fn requests_are_classified_by_who_sends_them() {
        let auth = "system:authenticated";
        let cases: [(Option<Identity>, &str, Level); 8] = [
            (
                Some(id("admin", &["system:masters", auth])),
                "/api",
                Level::Exempt,
            ),
            (
                Some(id("system:node:a", &["system:nodes", auth])),
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/a",
                Level::NodeHigh,
            ),
            (
                Some(id(
                    "system:serviceaccount:kube-system:coredns",
                    &["system:serviceaccounts", auth],
                )),
                "/api/v1/services",
                Level::WorkloadHigh,
            ),
            (
                Some(id(
                    "system:serviceaccount:team:app",
                    &["system:serviceaccounts", auth],
                )),
                "/api/v1/pods",
                Level::WorkloadLow,
            ),
            (
                Some(id("alice", &[auth])),
                "/api/v1/pods",
                Level::GlobalDefault,
            ),
            (None, "/version", Level::CatchAll),
            (None, JOIN_PATH, Level::Join),
            // A node joining again with its certificate still goes through the join level.
            (
                Some(id("system:node:a", &["system:nodes"])),
                JOIN_PATH,
                Level::Join,
            ),
        ];
        for (identity, path, want) in cases {
            assert_eq!(
                classify(identity.as_ref(), path),
                want,
                "{identity:?} {path}"
            );
        }
    }

    #[test]
    fn shares_split_the_limit_as_upstream_and_never_reach_zero() {
        assert_eq!(share_of(200, 40), 39);
        assert_eq!(share_of(200, 20), 20);
        assert_eq!(share_of(200, 5), 5);
        assert_eq!(share_of(400, 100), 191);
        assert_eq!(share_of(1, 5), 1);
    }
}
