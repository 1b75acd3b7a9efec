//! One async lock per pod uid, so setup and teardown of one pod never interleave; entries
//! disappear when nobody holds or waits for them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

type Entry = Arc<tokio::sync::Mutex<()>>;

#[derive(Default)]
pub(crate) struct PodLocks {
    map: Mutex<HashMap<String, Entry>>,
}

impl PodLocks {
    /// Waits for the pod's lock.
    pub(crate) async fn lock(&self, uid: &str) -> PodLock<'_> {
        let entry = {
            let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
            map.entry(uid.to_string()).or_default().clone()
        };
        PodLock {
            guard: Some(entry.lock_owned().await),
            locks: self,
            uid: uid.to_string(),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Holds a pod's lock; on drop, forgets the entry when nobody else waits for it.
pub(crate) struct PodLock<'a> {
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
    locks: &'a PodLocks,
    uid: String,
}

impl Drop for PodLock<'_> {
    fn drop(&mut self) {
        self.guard.take();
        let mut map = self.locks.map.lock().unwrap_or_else(|e| e.into_inner());
        // Clones only happen under the map's lock, so a count of 1 (the map's) is final.
        if map
            .get(&self.uid)
            .is_some_and(|m| Arc::strong_count(m) == 1)
        {
            map.remove(&self.uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_second_locker_of_the_same_pod_waits_and_others_do_not() {
        let locks = PodLocks::default();
        let held = locks.lock("a").await;
        let other = tokio::time::timeout(Duration::from_secs(5), locks.lock("b")).await;
        assert!(other.is_ok(), "another pod does not wait");
        drop(other);
        let same = tokio::time::timeout(Duration::from_millis(100), locks.lock("a")).await;
        assert!(same.is_err(), "the same pod waits");
        drop(held);
        let again = tokio::time::timeout(Duration::from_secs(5), locks.lock("a")).await;
        assert!(again.is_ok(), "free again once released");
        drop(again);
        assert_eq!(locks.len(), 0, "entries are forgotten once free");
    }
}
