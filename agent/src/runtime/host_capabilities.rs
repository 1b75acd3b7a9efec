//! The capabilities the agent itself holds (its bounding set), which is what a privileged
//! container can be given: containerd's CRI grants a privileged container the capabilities of
//! its own process, not every capability the kernel knows, so hosts with a restricted bounding
//! set (containers, VMs, nested setups lacking e.g. `CAP_SYS_RESOURCE`) still run them.

use std::collections::HashSet;

use oci_spec::runtime::Capability;

/// The agent's bounding set as OCI capabilities; every capability when it cannot be read (the
/// runtime then says what it could not apply).
pub(crate) fn bounding_set() -> HashSet<Capability> {
    match caps::read(None, caps::CapSet::Bounding) {
        Ok(set) => set
            .into_iter()
            .filter_map(|c| serde_json::from_value(serde_json::Value::String(c.to_string())).ok())
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the agent's capability bounding set");
            super::capabilities::all()
        }
    }
}

/// The lowest OOM score adjustment the runtime can give a container, as containerd's
/// `restrict_oom_score_adj` for hosts without `CAP_SYS_RESOURCE`: lowering a process's score
/// below what it inherited needs that capability, so without it runc's init fails at
/// `/proc/self/oom_score_adj`. `None` when the agent holds the capability (no floor); else
/// the agent's own score (0 when unreadable).
pub(crate) fn oom_score_adj_floor(held: &HashSet<Capability>) -> Option<i32> {
    if held.contains(&Capability::SysResource) {
        return None;
    }
    Some(
        std::fs::read_to_string("/proc/self/oom_score_adj")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0),
    )
}

/// `adj` raised to `floor` when there is one.
pub(crate) fn restrict_oom_score_adj(adj: Option<i32>, floor: Option<i32>) -> Option<i32> {
    match (adj, floor) {
        (Some(a), Some(f)) => Some(a.max(f)),
        (adj, _) => adj,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_sys_resource_scores_stop_at_the_agents_own() {
        let cases = [
            (Some(-997), Some(0), Some(0)),
            (Some(-997), Some(-500), Some(-500)),
            (Some(1000), Some(0), Some(1000)),
            (Some(-997), None, Some(-997)),
            (None, Some(0), None),
        ];
        for (adj, floor, want) in cases {
            assert_eq!(
                restrict_oom_score_adj(adj, floor),
                want,
                "{adj:?} over {floor:?}"
            );
        }
        assert_eq!(oom_score_adj_floor(&[Capability::SysResource].into()), None);
    }
}
