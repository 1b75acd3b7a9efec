//! The open connections, and the cap on them. At the cap a new connection sheds the oldest one
//! that is still in its TLS handshake (unauthenticated, and the cheapest to lose), else the
//! oldest one with no open request; when every connection is busy, the new one is refused.
//! Shedding instead of refusing keeps the listen queue moving: a flood of idle connections
//! cannot keep a real client waiting behind it for the handshake timeout.

use super::conn::Activity;
use super::listener::ConnectionStats;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct Tables {
    next_id: u64,
    /// Accepted, TLS handshake not finished; by age (ids grow).
    handshaking: BTreeMap<u64, CancellationToken>,
    established: BTreeMap<u64, (CancellationToken, Arc<Activity>)>,
}

impl Tables {
    fn len(&self) -> usize {
        self.handshaking.len() + self.established.len()
    }

    /// Evicts one connection (see the module doc); false if every one is busy.
    fn evict_one(&mut self) -> bool {
        if let Some((_, evicted)) = self.handshaking.pop_first() {
            evicted.cancel();
            return true;
        }
        let idle = self
            .established
            .iter()
            .find(|(_, (_, activity))| activity.is_idle())
            .map(|(id, _)| *id);
        match idle.and_then(|id| self.established.remove(&id)) {
            Some((evicted, _)) => {
                evicted.cancel();
                true
            }
            None => false,
        }
    }
}

/// The table of open connections. Shared by the accept loop and the connections' slots.
pub struct ConnTable {
    limit: usize,
    tables: Mutex<Tables>,
    stats: Arc<ConnectionStats>,
}

/// What became of a new connection.
pub enum Admission {
    /// Room was free.
    Admitted(Slot),
    /// Admitted after shedding another connection.
    AdmittedByShedding(Slot),
    /// At the cap with every connection busy.
    Refused,
}

impl ConnTable {
    pub fn new(limit: usize, stats: Arc<ConnectionStats>) -> Arc<ConnTable> {
        Arc::new(ConnTable {
            limit,
            tables: Mutex::new(Tables::default()),
            stats,
        })
    }

    /// Evicts one connection and counts it.
    fn evict_one(&self, tables: &mut Tables) -> bool {
        let evicted = tables.evict_one();
        if evicted {
            self.stats.shed.fetch_add(1, Ordering::Relaxed);
            self.stats.open.store(tables.len(), Ordering::Relaxed);
        }
        evicted
    }

    fn lock(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Takes a slot for a new connection, shedding another one at the cap.
    pub fn admit(self: &Arc<Self>) -> Admission {
        let mut tables = self.lock();
        let shed = tables.len() >= self.limit;
        if shed && !self.evict_one(&mut tables) {
            self.stats.refused.fetch_add(1, Ordering::Relaxed);
            return Admission::Refused;
        }
        let id = tables.next_id;
        tables.next_id += 1;
        let evicted = CancellationToken::new();
        tables.handshaking.insert(id, evicted.clone());
        self.stats.open.store(tables.len(), Ordering::Relaxed);
        drop(tables);
        let slot = Slot {
            id,
            table: self.clone(),
            evicted,
        };
        if shed {
            Admission::AdmittedByShedding(slot)
        } else {
            Admission::Admitted(slot)
        }
    }

    /// Sheds one connection to free its file descriptor (when accept runs out of them);
    /// false if every connection is busy.
    pub fn shed(&self) -> bool {
        let mut tables = self.lock();
        self.evict_one(&mut tables)
    }
}

/// A connection's place in the table; leaving it (drop) frees the place.
pub struct Slot {
    id: u64,
    table: Arc<ConnTable>,
    evicted: CancellationToken,
}

impl Slot {
    /// Cancelled when the connection is shed.
    pub fn evicted(&self) -> &CancellationToken {
        &self.evicted
    }

    /// The TLS handshake is done: from now on the connection is shed only while idle.
    pub fn established(&self, activity: Arc<Activity>) {
        let mut tables = self.table.lock();
        if let Some(token) = tables.handshaking.remove(&self.id) {
            tables.established.insert(self.id, (token, activity));
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut tables = self.table.lock();
        tables.handshaking.remove(&self.id);
        tables.established.remove(&self.id);
        self.table.stats.open.store(tables.len(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::conn::RequestMark;

    fn slot(a: Admission) -> Slot {
        match a {
            Admission::Admitted(s) | Admission::AdmittedByShedding(s) => s,
            Admission::Refused => panic!("refused"),
        }
    }

    /// Establishes `slot` with a request open on it, for as long as the mark lives.
    fn serving(slot: &Slot) -> RequestMark {
        let activity = Arc::new(Activity::new());
        let open = RequestMark::new(activity.clone());
        slot.established(activity);
        open
    }

    /// A table for `cap` connections holding one, established and serving a request.
    fn one_busy(cap: usize) -> (Arc<ConnTable>, Slot, RequestMark) {
        let t = ConnTable::new(cap, Arc::default());
        let busy = slot(t.admit());
        let open = serving(&busy);
        (t, busy, open)
    }

    #[test]
    fn under_the_cap_connections_are_admitted_and_leave_when_dropped() {
        let t = ConnTable::new(2, Arc::default());
        let a = t.admit();
        assert!(matches!(a, Admission::Admitted(_)));
        assert_eq!(t.lock().len(), 1);
        drop(a);
        assert_eq!(t.lock().len(), 0);
    }

    #[test]
    fn at_the_cap_the_oldest_handshaking_connection_is_shed_first() {
        let (t, busy, _open) = one_busy(3);
        let oldest = slot(t.admit());
        let newer = slot(t.admit());
        let newest = t.admit();
        assert!(matches!(newest, Admission::AdmittedByShedding(_)));
        assert!(oldest.evicted().is_cancelled());
        assert!(!newer.evicted().is_cancelled());
        assert!(!busy.evicted().is_cancelled());
        // Shed connections leave the table at once, before their task has closed them.
        assert_eq!(t.lock().len(), 3);
    }

    #[test]
    fn established_connections_are_shed_only_while_idle() {
        let (t, busy, _open) = one_busy(2);
        let idle = slot(t.admit());
        idle.established(Arc::new(Activity::new()));
        let third = slot(t.admit());
        assert!(idle.evicted().is_cancelled());
        assert!(!busy.evicted().is_cancelled());
        let _third_open = serving(&third);
        assert!(matches!(t.admit(), Admission::Refused));
        assert!(!busy.evicted().is_cancelled() && !third.evicted().is_cancelled());
    }

    #[test]
    fn the_stats_count_open_shed_and_refused_connections() {
        let stats = Arc::new(ConnectionStats::default());
        let t = ConnTable::new(1, stats.clone());
        let first = slot(t.admit());
        let second = slot(t.admit());
        assert!(first.evicted().is_cancelled());
        let _open = serving(&second);
        assert!(matches!(t.admit(), Admission::Refused));
        let text = stats.render();
        for line in [
            "berth_open_connections 1\n",
            "berth_connections_shed_total 1\n",
            "berth_connections_refused_total 1\n",
        ] {
            assert!(text.contains(line), "{line}: {text}");
        }
        drop(first);
        drop(second);
        assert!(stats.render().contains("berth_open_connections 0\n"));
    }

    #[test]
    fn when_every_connection_is_busy_a_new_one_is_refused() {
        let (t, _busy, _open) = one_busy(1);
        assert!(matches!(t.admit(), Admission::Refused));
        assert!(!t.shed());
        assert_eq!(t.lock().len(), 1);
    }
}
