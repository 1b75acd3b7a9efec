//! Label maps shared between objects: the pods of one ReplicaSet, the Events of one reason carry
//! the same labels, so each distinct map is held once and every index holding it points to it.
//! A one-label `BTreeMap` costs a 544-byte node; with 10,000 pods of a few workloads the store's
//! indexes held 5.4 MB of copies of a handful of maps (the heap profile in the README).

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock, Mutex, Weak};

/// An object's labels, shared by every object that has the same ones.
pub type LabelSet = Arc<BTreeMap<String, String>>;

/// The live label sets by content hash; dead entries are swept when the table has doubled since
/// the last sweep, so it stays proportional to the number of distinct sets alive.
#[derive(Default)]
struct Interned {
    by_hash: HashMap<u64, Vec<Weak<BTreeMap<String, String>>>>,
    entries: usize,
    swept_at: usize,
}

static INTERNED: LazyLock<Mutex<Interned>> = LazyLock::new(Mutex::default);
static EMPTY: LazyLock<LabelSet> = LazyLock::new(LabelSet::default);

/// The shared set equal to `labels` (it becomes the shared one if none is alive).
pub fn intern(labels: BTreeMap<String, String>) -> LabelSet {
    if labels.is_empty() {
        return EMPTY.clone();
    }
    let mut hasher = DefaultHasher::new();
    labels.hash(&mut hasher);
    let hash = hasher.finish();
    let mut table = INTERNED.lock().unwrap_or_else(|e| e.into_inner());
    let bucket = table.by_hash.entry(hash).or_default();
    if let Some(found) = bucket
        .iter()
        .filter_map(Weak::upgrade)
        .find(|set| **set == labels)
    {
        return found;
    }
    let set = Arc::new(labels);
    bucket.retain(|w| w.strong_count() > 0);
    bucket.push(Arc::downgrade(&set));
    table.entries += 1;
    if table.entries > 2 * table.swept_at.max(1024) {
        table.by_hash.retain(|_, bucket| {
            bucket.retain(|w| w.strong_count() > 0);
            !bucket.is_empty()
        });
        let live = table.by_hash.values().map(Vec::len).sum();
        table.entries = live;
        table.swept_at = live;
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn equal_label_maps_share_one_allocation_and_different_ones_do_not() {
        let a = intern(labels(&[("app", "web"), ("pod-template-hash", "5d4f")]));
        let b = intern(labels(&[("pod-template-hash", "5d4f"), ("app", "web")]));
        let c = intern(labels(&[("app", "db")]));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(c.get("app").map(String::as_str), Some("db"));
        assert!(Arc::ptr_eq(
            &intern(BTreeMap::new()),
            &intern(BTreeMap::new())
        ));
    }

    #[test]
    fn a_set_nobody_holds_is_freed_and_made_anew() {
        let first = intern(labels(&[("freed", "yes")]));
        let weak = Arc::downgrade(&first);
        drop(first);
        assert_eq!(weak.strong_count(), 0, "the table keeps no set alive");
        let again = intern(labels(&[("freed", "yes")]));
        assert_eq!(again.get("freed").map(String::as_str), Some("yes"));
    }

    #[test]
    fn the_table_sweeps_dead_sets_and_stays_small() {
        for i in 0..10_000 {
            drop(intern(labels(&[("sweep-test", &i.to_string())])));
        }
        let table = INTERNED.lock().unwrap_or_else(|e| e.into_inner());
        assert!(
            table.entries <= 4 * 1024,
            "{} entries after 10,000 dead sets",
            table.entries
        );
    }
}
