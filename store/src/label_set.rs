//! Label maps shared between objects: the pods of one ReplicaSet, the Events of one reason carry
//! the same labels, so each distinct map is held once and every index holding it points to it.
//! A one-label `BTreeMap` costs a 544-byte node; with 10,000 pods of a few workloads the store's
//! indexes held 5.4 MB of copies of a handful of maps (the heap profile in the README).

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use berth_shared::interner::Interner;

/// An object's labels, shared by every object that has the same ones.
pub type LabelSet = Arc<BTreeMap<String, String>>;

static INTERNED: Interner<BTreeMap<String, String>> = Interner::new();
static EMPTY: LazyLock<LabelSet> = LazyLock::new(LabelSet::default);

/// The shared set equal to `labels` (it becomes the shared one if none is alive).
pub fn intern(labels: BTreeMap<String, String>) -> LabelSet {
    if labels.is_empty() {
        return EMPTY.clone();
    }
    INTERNED.intern(labels)
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
        let entries = INTERNED.entries();
        assert!(
            entries <= 4 * 1024,
            "{entries} entries after 10,000 dead sets"
        );
    }
}
