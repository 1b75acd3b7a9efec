//! Values shared between the objects that carry equal ones: the pods of one ReplicaSet have the
//! same labels, tolerations and default spread constraints, so each distinct value is held
//! once behind an `Arc` and every holder points to it. The table holds only weak references:
//! a value nobody holds is freed, and dead entries are swept when the table has doubled since
//! the last sweep, so it stays proportional to the number of distinct values alive.

use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, Weak};

/// A table of shared values of type `T`; use one per type, in a `static`.
pub struct Interner<T> {
    table: Mutex<Table<T>>,
}

struct Table<T> {
    by_hash: BTreeMap<u64, Vec<Weak<T>>>,
    entries: usize,
    swept_at: usize,
}

impl<T: Eq> Default for Interner<T> {
    fn default() -> Self {
        Interner::new()
    }
}

impl<T: Eq> Interner<T> {
    pub const fn new() -> Interner<T> {
        Interner {
            table: Mutex::new(Table {
                by_hash: BTreeMap::new(),
                entries: 0,
                swept_at: 0,
            }),
        }
    }
}

impl<T: Eq + Hash> Interner<T> {
    /// The shared value equal to `value` (it becomes the shared one if none is alive).
    pub fn intern(&self, value: T) -> Arc<T> {
        let mut hasher = DefaultHasher::new();
        value.hash(&mut hasher);
        self.intern_hashed(value, hasher.finish())
    }
}

impl<T: Eq> Interner<T> {
    /// [`Interner::intern`] for a type without `Hash`: `hash` is any hash that equal values
    /// share (a cheap projection of the value will do).
    pub fn intern_hashed(&self, value: T, hash: u64) -> Arc<T> {
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = table.by_hash.entry(hash).or_default();
        if let Some(found) = bucket
            .iter()
            .filter_map(Weak::upgrade)
            .find(|v| **v == value)
        {
            return found;
        }
        let shared = Arc::new(value);
        bucket.retain(|w| w.strong_count() > 0);
        bucket.push(Arc::downgrade(&shared));
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
        shared
    }

    /// How many entries the table holds (live or not yet swept).
    pub fn entries(&self) -> usize {
        self.table.lock().unwrap_or_else(|e| e.into_inner()).entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_share_one_allocation_and_different_ones_do_not() {
        let interner: Interner<Vec<u32>> = Interner::new();
        let a = interner.intern(vec![1, 2]);
        let b = interner.intern(vec![1, 2]);
        let c = interner.intern(vec![3]);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
    }

    #[test]
    fn a_hash_collision_still_compares_the_values() {
        let interner: Interner<String> = Interner::new();
        let a = interner.intern_hashed("a".into(), 7);
        let b = interner.intern_hashed("b".into(), 7);
        assert_eq!((a.as_str(), b.as_str()), ("a", "b"));
        assert!(Arc::ptr_eq(&a, &interner.intern_hashed("a".into(), 7)));
    }

    #[test]
    fn a_value_nobody_holds_is_freed_and_the_table_stays_small() {
        let interner: Interner<u64> = Interner::new();
        let first = interner.intern(1);
        let weak = Arc::downgrade(&first);
        drop(first);
        assert_eq!(weak.strong_count(), 0, "the table keeps no value alive");
        for i in 0..10_000 {
            drop(interner.intern(i));
        }
        assert!(interner.entries() <= 4 * 1024, "{}", interner.entries());
    }
}
