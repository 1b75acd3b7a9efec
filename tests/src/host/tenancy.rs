//! The host state that clusters running at once share, held in common: each cluster (and each
//! fixture of the agent's own network tests) is a tenant of the host, listed in
//! `/run/lock/berth-agent-tests.state` beside the host lock and changed only under a short
//! exclusive flock of its own. The first tenant in records what the host had
//! (`net.ipv4.ip_forward`, `route_localnet`, which iptables chains existed); the last one out
//! writes the sysctls back and removes portmap's shared `CNI-HOSTPORT-*` chains if they are new
//! and idle. Before, each cluster saved and restored them itself, so one finishing could
//! switch forwarding off under another still running.
//!
//! Each tenant also holds a lane: the pod range `10.<200+lane>.0.0/16` and the service range
//! `10.43.<4·lane>.0/22`, so that no two clusters route the same pod addresses or DNAT the
//! same cluster IP in the host's namespace. A tenant whose process is gone (killed by
//! nextest's timeout) is dropped by the next transaction; its lane is free again once its
//! routes are gone too.
//!
//! [`plan_arrival`] and [`plan_departure`] are pure and table-tested; [`Tenancy`] is the I/O.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;

use serde::{Deserialize, Serialize};

use super::{
    ip_forward, restore_ip_forward, restore_route_localnet, route_localnet, tool_ok, unique_suffix,
};
use crate::sweep::iptables;

/// The tenants and what the host had before the first of them.
pub const STATE_FILE: &str = "/run/lock/berth-agent-tests.state";
/// Held (exclusively, briefly) while the state file is read and written.
const STATE_LOCK: &str = "/run/lock/berth-agent-tests.state.lock";

/// Lanes `0..LANES`: pod ranges `10.200.0.0/16` … `10.249.0.0/16`.
pub const LANES: u8 = 50;

/// Everything tenants share.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostState {
    pub tenants: Vec<Tenant>,
    /// What the host had before the first tenant; `None` while nobody holds the host.
    pub originals: Option<Originals>,
}

/// One cluster (or test fixture) on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tenant {
    pub id: String,
    /// The test process; a tenant whose process is gone is dropped.
    pub pid: u32,
    pub lane: u8,
}

/// Host state the first tenant found, which the last one out puts back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Originals {
    pub ip_forward: Option<String>,
    pub route_localnet: Option<String>,
    /// Chain names per iptables table.
    pub chains: BTreeMap<String, BTreeSet<String>>,
}

/// `state` with `id` (of process `pid`) added on the first free lane from `start` (wrapping):
/// one no live tenant holds and `routed` does not report taken. Tenants whose process is not
/// `alive` are dropped first; `originals` is read only if nobody holds the host. `None` when
/// every lane is taken.
pub fn plan_arrival(
    state: &HostState,
    id: &str,
    pid: u32,
    alive: &dyn Fn(u32) -> bool,
    routed: &dyn Fn(u8) -> bool,
    start: u8,
    originals: impl FnOnce() -> Originals,
) -> Option<(HostState, Tenant)> {
    let mut next = state.clone();
    next.tenants.retain(|t| alive(t.pid));
    let lane = (0..LANES)
        .map(|i| (start % LANES + i) % LANES)
        .find(|lane| !next.tenants.iter().any(|t| t.lane == *lane) && !routed(*lane))?;
    // Kept when the last tenant died without leaving: what it found is still the truth.
    if next.originals.is_none() {
        next.originals = Some(originals());
    }
    let tenant = Tenant {
        id: id.to_string(),
        pid,
        lane,
    };
    next.tenants.push(tenant.clone());
    Some((next, tenant))
}

/// What leaving does: the state without the tenant (and without dead ones), and the originals
/// to put back when nobody is left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Departure {
    pub state: HostState,
    pub restore: Option<Originals>,
}

/// `state` without tenant `id` (`None`: only the dead ones go); the last one out restores.
pub fn plan_departure(
    state: &HostState,
    id: Option<&str>,
    alive: &dyn Fn(u32) -> bool,
) -> Departure {
    let mut next = state.clone();
    next.tenants
        .retain(|t| Some(t.id.as_str()) != id && alive(t.pid));
    let restore = if next.tenants.is_empty() {
        next.originals.take()
    } else {
        None
    };
    Departure {
        state: next,
        restore,
    }
}

/// The pod range of `lane`.
pub fn cluster_cidr(lane: u8) -> String {
    format!("10.{}.0.0/16", 200 + u32::from(lane))
}

/// The service range of `lane`.
pub fn service_cidr(lane: u8) -> String {
    format!("10.43.{}.0/22", 4 * u32::from(lane))
}

thread_local! {
    static IN_TRANSACTION: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` on the state under its lock and writes back what `f` left. Not reentrant (a second
/// flock from this process would wait for the first): nesting panics.
fn transact<T>(f: impl FnOnce(&mut HostState) -> T) -> T {
    if IN_TRANSACTION.with(|c| c.replace(true)) {
        panic!("host state transactions do not nest");
    }
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_TRANSACTION.with(|c| c.set(false));
        }
    }
    let _reset = Reset;
    let _ = std::fs::create_dir_all("/run/lock");
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(STATE_LOCK)
        .unwrap_or_else(|e| panic!("cannot open {STATE_LOCK}: {e}"));
    lock.lock()
        .unwrap_or_else(|e| panic!("cannot lock {STATE_LOCK}: {e}"));
    let mut state = match std::fs::read_to_string(STATE_FILE) {
        Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
            eprintln!("berth-tests: {STATE_FILE} is unreadable ({e}); starting afresh");
            HostState::default()
        }),
        Err(_) => HostState::default(),
    };
    let out = f(&mut state);
    let write = serde_json::to_string_pretty(&state)
        .map_err(std::io::Error::other)
        .and_then(|text| {
            let tmp = format!("{STATE_FILE}.tmp");
            std::fs::write(&tmp, text)?;
            std::fs::rename(&tmp, STATE_FILE)
        });
    if let Err(e) = write {
        eprintln!("berth-tests: cannot write {STATE_FILE}: {e}");
    }
    out
}

/// Runs `f` while no other tenant arrives or leaves: for choices made from what the host
/// looks like (a test bed's free segments), which must be made and taken in one step.
pub fn critical<T>(f: impl FnOnce() -> T) -> T {
    transact(|_| f())
}

/// Whether process `pid` exists (a zombie counts as gone).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
    })
}

/// What the host has now, as the first tenant records it.
fn observe_originals() -> Originals {
    Originals {
        ip_forward: ip_forward(),
        route_localnet: route_localnet(),
        chains: iptables::snapshot_all()
            .into_iter()
            .map(|(t, table)| (t, table.chains))
            .collect(),
    }
}

/// Puts back what the first tenant found. Errors are reported, not raised (cleanup).
fn apply_restore(originals: &Originals) {
    for line in iptables::sweep_shared(&originals.chains) {
        eprintln!("berth-tests: the last cluster out removed {line}");
    }
    if let Some(v) = &originals.ip_forward {
        restore_ip_forward(v);
    }
    if let Some(v) = &originals.route_localnet {
        restore_route_localnet(v);
    }
}

/// Drops the tenants whose process is gone; restores the host if nobody is left.
pub fn release_dead() {
    let restore = transact(|state| {
        let d = plan_departure(state, None, &alive);
        *state = d.state;
        d.restore
    });
    if let Some(o) = restore {
        apply_restore(&o);
    }
}

/// This process's tenancy of the host: a lane, and a say in when shared state is restored.
/// Leaves on drop.
#[derive(Debug)]
pub struct Tenancy {
    id: String,
    lane: u8,
    left: bool,
}

impl Tenancy {
    /// Joins the host's tenants (the first one records the originals); panics if every lane
    /// is taken.
    pub fn arrive() -> Tenancy {
        let id = format!("{}-{}", std::process::id(), unique_suffix());
        let routes = tool_ok("ip", &["-4", "route", "show", "table", "all"]);
        let routed = |lane: u8| routes.contains(&format!("10.{}.", 200 + u32::from(lane)));
        let start = u8::from_str_radix(&unique_suffix()[..2], 16).unwrap_or(0);
        let tenant = transact(|state| {
            let (next, tenant) = plan_arrival(
                state,
                &id,
                std::process::id(),
                &alive,
                &routed,
                start,
                observe_originals,
            )?;
            *state = next;
            Some(tenant)
        });
        let Some(tenant) = tenant else {
            panic!(
                "every pod range 10.200-249.0.0/16 is held by a running test or routed on this \
                 host ({STATE_FILE})"
            );
        };
        Tenancy {
            id,
            lane: tenant.lane,
            left: false,
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn lane(&self) -> u8 {
        self.lane
    }

    /// `10.<200+lane>.0.0/16`
    pub fn cluster_cidr(&self) -> String {
        cluster_cidr(self.lane)
    }

    /// `10.43.<4·lane>.0/22`
    pub fn service_cidr(&self) -> String {
        service_cidr(self.lane)
    }

    /// Leaves (once); the last tenant out restores the host. Call after removing everything
    /// of one's own. Never panics.
    pub fn leave(&mut self) {
        if std::mem::replace(&mut self.left, true) {
            return;
        }
        let id = self.id.clone();
        let restore = std::panic::catch_unwind(|| {
            transact(|state| {
                let d = plan_departure(state, Some(&id), &alive);
                *state = d.state;
                d.restore
            })
        });
        match restore {
            Ok(Some(o)) => apply_restore(&o),
            Ok(None) => {}
            Err(_) => eprintln!("berth-tests: cannot leave the host's tenants ({STATE_FILE})"),
        }
    }
}

impl Drop for Tenancy {
    fn drop(&mut self) {
        self.leave();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn originals(forward: &str) -> Originals {
        Originals {
            ip_forward: Some(forward.into()),
            route_localnet: Some("0".into()),
            chains: BTreeMap::from([("nat".into(), BTreeSet::from(["POSTROUTING".into()]))]),
        }
    }

    fn tenant(id: &str, pid: u32, lane: u8) -> Tenant {
        Tenant {
            id: id.into(),
            pid,
            lane,
        }
    }

    const ALL_ALIVE: &dyn Fn(u32) -> bool = &|_| true;
    const NONE_ROUTED: &dyn Fn(u8) -> bool = &|_| false;

    #[test]
    fn the_first_tenant_in_records_the_host_and_later_ones_keep_that_record() {
        let (s1, t1) = plan_arrival(
            &HostState::default(),
            "a",
            1,
            ALL_ALIVE,
            NONE_ROUTED,
            0,
            || originals("0"),
        )
        .unwrap();
        assert_eq!(s1.originals, Some(originals("0")));
        assert_eq!(t1.lane, 0);
        // The first cluster turned forwarding on; the second must not record that as original.
        let (s2, t2) =
            plan_arrival(&s1, "b", 2, ALL_ALIVE, NONE_ROUTED, 0, || originals("1")).unwrap();
        assert_eq!(s2.originals, Some(originals("0")));
        assert_eq!(t2.lane, 1, "lane 0 is held");
        assert_eq!(s2.tenants.len(), 2);
    }

    #[test]
    fn only_the_last_tenant_out_restores() {
        let state = HostState {
            tenants: vec![tenant("a", 1, 0), tenant("b", 2, 1)],
            originals: Some(originals("0")),
        };
        let first_out = plan_departure(&state, Some("a"), ALL_ALIVE);
        assert_eq!(first_out.restore, None, "b still runs: forwarding stays on");
        assert_eq!(first_out.state.tenants, vec![tenant("b", 2, 1)]);
        let last_out = plan_departure(&first_out.state, Some("b"), ALL_ALIVE);
        assert_eq!(last_out.restore, Some(originals("0")));
        assert_eq!(last_out.state, HostState::default());
    }

    #[test]
    fn a_dead_tenant_is_dropped_and_its_lane_reused_but_what_it_found_is_kept() {
        let state = HostState {
            tenants: vec![tenant("dead", 9, 3)],
            originals: Some(originals("0")),
        };
        let alive = |pid: u32| pid != 9;
        let (next, t) =
            plan_arrival(&state, "new", 1, &alive, NONE_ROUTED, 3, || originals("1")).unwrap();
        assert_eq!(t.lane, 3);
        assert_eq!(next.tenants, vec![tenant("new", 1, 3)]);
        assert_eq!(next.originals, Some(originals("0")));
        // With only dead tenants left, releasing them restores.
        let d = plan_departure(&state, None, &alive);
        assert_eq!(d.restore, Some(originals("0")));
    }

    #[test]
    fn routed_lanes_are_skipped_wrapping_around_and_none_left_is_none() {
        let routed = |lane: u8| lane == 49 || lane == 0;
        let (_, t) = plan_arrival(
            &HostState::default(),
            "a",
            1,
            ALL_ALIVE,
            &routed,
            49,
            || originals("0"),
        )
        .unwrap();
        assert_eq!(t.lane, 1);
        let all = |_: u8| true;
        assert!(
            plan_arrival(&HostState::default(), "a", 1, ALL_ALIVE, &all, 0, || {
                originals("0")
            })
            .is_none()
        );
    }

    #[test]
    fn lanes_give_disjoint_pod_and_service_ranges() {
        assert_eq!(cluster_cidr(0), "10.200.0.0/16");
        assert_eq!(cluster_cidr(LANES - 1), "10.249.0.0/16");
        assert_eq!(service_cidr(0), "10.43.0.0/22");
        assert_eq!(service_cidr(1), "10.43.4.0/22");
        assert_eq!(service_cidr(LANES - 1), "10.43.196.0/22");
    }
}
