//! Store behaviour over the real redb backend in a temporary directory.

use super::*;
use serde_json::json;

fn open(dir: &std::path::Path, history: usize) -> Store {
    let backend = RedbBackend::open(&dir.join("store.redb")).unwrap();
    Store::open(Box::new(backend), history).unwrap()
}

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")}})
}

#[test]
fn writes_get_increasing_revisions_stamped_into_the_object() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 100);
    let a = store
        .put("/core/configmaps/default/a", cm("a"), Precondition::Absent)
        .unwrap();
    let b = store
        .put("/core/configmaps/default/b", cm("b"), Precondition::Absent)
        .unwrap();
    assert!(b.revision > a.revision);
    let v = store
        .get("/core/configmaps/default/b")
        .unwrap()
        .value()
        .unwrap();
    assert_eq!(
        v["metadata"]["resourceVersion"],
        json!(b.revision.to_string())
    );
}

#[test]
fn stale_revision_is_a_conflict_and_existing_key_cannot_be_created() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 100);
    let a = store.put("/k/a", cm("a"), Precondition::Absent).unwrap();
    assert!(matches!(
        store.put("/k/a", cm("a"), Precondition::Absent),
        Err(StoreError::AlreadyExists)
    ));
    store
        .put("/k/a", cm("a"), Precondition::Revision(a.revision))
        .unwrap();
    assert!(matches!(
        store.put("/k/a", cm("a"), Precondition::Revision(a.revision)),
        Err(StoreError::Conflict)
    ));
    assert!(matches!(
        store.delete("/k/missing", Precondition::Exists, None),
        Err(StoreError::NotFound)
    ));
}

#[test]
fn list_is_bounded_by_prefix_and_paginates() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 100);
    for n in ["a", "b", "c"] {
        store
            .put(
                &format!("/core/configmaps/default/{n}"),
                cm(n),
                Precondition::Absent,
            )
            .unwrap();
    }
    store
        .put("/core/configmaps/default2/x", cm("x"), Precondition::Absent)
        .unwrap();
    let (_, items, more) = store.list("/core/configmaps/default/", None, Some(2), |_| true);
    assert_eq!(items.len(), 2);
    let more = more.unwrap();
    let (_, rest, end) = store.list("/core/configmaps/default/", Some(&more), Some(2), |_| true);
    assert_eq!(rest.len(), 1);
    assert!(end.is_none());
}

#[test]
fn watch_sees_backlog_then_live_events_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 100);
    let a = store.put("/k/a", cm("a"), Precondition::Absent).unwrap();
    store.put("/k/b", cm("b"), Precondition::Absent).unwrap();
    let mut w = store.watch(a.revision).unwrap();
    assert_eq!(w.backlog.len(), 1);
    assert_eq!(&*w.backlog[0].key, "/k/b");
    store.delete("/k/a", Precondition::Exists, None).unwrap();
    let ev = w.live.try_recv().unwrap();
    assert_eq!(ev.event_type, EventType::Deleted);
    assert!(w.live.try_recv().is_err());
}

#[test]
fn previous_versions_are_kept_only_for_the_keys_the_store_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 100);
    store.keep_previous_data_for(|key| key.starts_with("/kept/"));
    let start = store.current_revision();
    for prefix in ["/kept", "/dropped"] {
        let key = format!("{prefix}/a");
        let first = store.put(&key, cm("a"), Precondition::Absent).unwrap();
        store
            .put(&key, cm("a"), Precondition::Revision(first.revision))
            .unwrap();
        store.delete(&key, Precondition::Exists, None).unwrap();
    }
    let previous = |e: &StoreEvent| (e.prev_index.is_some(), e.prev_data.is_some());
    let seen: Vec<_> = store
        .watch(start)
        .unwrap()
        .backlog
        .iter()
        .map(|e| (e.key.to_string(), e.event_type, previous(e)))
        .collect();
    let kept = |t| ("/kept/a".to_string(), t);
    let dropped = |t| ("/dropped/a".to_string(), t);
    assert_eq!(
        seen,
        [
            kept((EventType::Added, (false, false))),
            kept((EventType::Modified, (true, true))),
            kept((EventType::Deleted, (true, true))),
            dropped((EventType::Added, (false, false))),
            // The index of the version before stays: label and built-in field selectors.
            dropped((EventType::Modified, (true, false))),
            dropped((EventType::Deleted, (true, false))),
        ]
        .map(|(k, (t, p))| (k, t, p))
    );
}

#[test]
fn watch_from_a_compacted_revision_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 2);
    let first = store.put("/k/0", cm("0"), Precondition::Absent).unwrap();
    for i in 1..(COMPACT_BATCH + 10) {
        store
            .put(&format!("/k/{i}"), cm("x"), Precondition::Absent)
            .unwrap();
    }
    assert!(matches!(
        store.watch(first.revision),
        Err(StoreError::Compacted { .. })
    ));
    assert!(store.watch(store.current_revision()).is_ok());
}

#[test]
fn reopening_keeps_objects_revisions_and_replayable_history() {
    let dir = tempfile::tempdir().unwrap();
    let (a, last) = {
        let store = open(dir.path(), 100);
        let a = store.put("/k/a", cm("a"), Precondition::Absent).unwrap();
        let b = store.put("/k/b", cm("b"), Precondition::Absent).unwrap();
        store
            .delete("/k/b", Precondition::Revision(b.revision), None)
            .unwrap();
        (a, store.current_revision())
    };
    let store = open(dir.path(), 100);
    assert_eq!(store.current_revision(), last);
    let got = store.get("/k/a").unwrap();
    assert_eq!(got.revision, a.revision);
    assert_eq!(got.value().unwrap()["metadata"]["uid"], json!("uid-a"));
    assert!(store.get("/k/b").is_none());
    let w = store.watch(a.revision).unwrap();
    let types: Vec<_> = w.backlog.iter().map(|e| e.event_type).collect();
    assert_eq!(types, vec![EventType::Added, EventType::Deleted]);
    let next = store.put("/k/c", cm("c"), Precondition::Absent).unwrap();
    assert!(next.revision > last);
}

/// A backend over redb that counts commits, can be made to fail, and can hold commits at a
/// gate (a slow disk).
struct Instrumented {
    inner: RedbBackend,
    commits: Arc<std::sync::atomic::AtomicUsize>,
    fail: Arc<std::sync::atomic::AtomicBool>,
    gate: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
}

impl Backend for Instrumented {
    fn load(&self) -> Result<Loaded, StoreError> {
        self.inner.load()
    }
    fn commit(&self, batch: &[Commit<'_>], compact_to: Option<Revision>) -> Result<(), StoreError> {
        let (lock, cvar) = &*self.gate;
        let mut open = lock.lock().unwrap();
        while !*open {
            open = cvar.wait(open).unwrap();
        }
        drop(open);
        self.commits
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::Backend("disk on fire".into()));
        }
        self.inner.commit(batch, compact_to)
    }
}

struct Handles {
    commits: Arc<std::sync::atomic::AtomicUsize>,
    fail: Arc<std::sync::atomic::AtomicBool>,
    gate: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
}

impl Handles {
    fn set_gate(&self, open: bool) {
        *self.gate.0.lock().unwrap() = open;
        self.gate.1.notify_all();
    }
}

fn instrumented(dir: &std::path::Path, history: usize) -> (Store, Handles) {
    let h = Handles {
        commits: Arc::default(),
        fail: Arc::default(),
        gate: Arc::new((std::sync::Mutex::new(true), std::sync::Condvar::new())),
    };
    let backend = Instrumented {
        inner: RedbBackend::open(&dir.join("store.redb")).unwrap(),
        commits: h.commits.clone(),
        fail: h.fail.clone(),
        gate: h.gate.clone(),
    };
    (Store::open(Box::new(backend), history).unwrap(), h)
}

/// One thread per key `/k/0` … `/k/{n-1}`, each creating a ConfigMap there.
fn spawn_creates(
    store: &Store,
    n: usize,
) -> Vec<std::thread::JoinHandle<Result<StoredObject, StoreError>>> {
    (0..n)
        .map(|i| {
            let store = store.clone();
            std::thread::spawn(move || {
                store.put(&format!("/k/{i}"), cm(&i.to_string()), Precondition::Absent)
            })
        })
        .collect()
}

/// Waits until the pipeline has handed out `revision` (the writes up to it are queued),
/// failing with `what` after `secs` seconds.
fn wait_assigned(store: &Store, revision: Revision, secs: u64, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while store.assigned() < revision {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::yield_now();
    }
}

#[test]
fn writes_queued_behind_a_slow_commit_share_the_next_one_and_all_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (store, h) = instrumented(dir.path(), 1000);
    let mut watch = store.watch(0).unwrap();
    // Hold the disk while 8 writers queue, so their writes must go out together.
    h.set_gate(false);
    let writers = spawn_creates(&store, 8);
    wait_assigned(&store, 8, 10, "writers did not queue");
    assert!(
        store.get("/k/0").is_none(),
        "nothing is visible before it is durable"
    );
    h.set_gate(true);
    let mut revisions: Vec<u64> = writers
        .into_iter()
        .map(|w| w.join().unwrap().unwrap().revision)
        .collect();
    revisions.sort_unstable();
    assert_eq!(revisions, (1..=8).collect::<Vec<_>>());
    let commits = h.commits.load(std::sync::atomic::Ordering::SeqCst);
    assert!(commits <= 2, "8 queued writes took {commits} commits");
    let seen: Vec<u64> = (0..8)
        .map(|_| watch.live.try_recv().unwrap().revision)
        .collect();
    assert_eq!(
        seen,
        (1..=8).collect::<Vec<_>>(),
        "watchers see revision order"
    );
    drop(store);
    let reopened = open(dir.path(), 1000);
    assert_eq!(reopened.current_revision(), 8);
    assert_eq!(reopened.count("/k/"), 8);
}

#[test]
fn a_create_is_refused_against_a_queued_create_of_the_same_key() {
    let dir = tempfile::tempdir().unwrap();
    let (store, h) = instrumented(dir.path(), 1000);
    h.set_gate(false);
    let first = {
        let store = store.clone();
        std::thread::spawn(move || store.put("/k/a", cm("a"), Precondition::Absent))
    };
    wait_assigned(&store, 1, 10, "first write did not queue");
    // The first create is not durable yet, but it decides: the second is a duplicate, and an
    // update expecting the durable (absent) state is refused too.
    assert!(matches!(
        store.put("/k/a", cm("a"), Precondition::Absent),
        Err(StoreError::AlreadyExists)
    ));
    h.set_gate(true);
    let stored = first.join().unwrap().unwrap();
    assert_eq!(stored.revision, 1);
    assert!(matches!(
        store.put("/k/a", cm("a"), Precondition::Revision(7)),
        Err(StoreError::Conflict)
    ));
}

#[test]
fn a_failed_commit_acknowledges_nothing_and_the_next_write_reuses_the_revision() {
    let dir = tempfile::tempdir().unwrap();
    let (store, h) = instrumented(dir.path(), 1000);
    store.put("/k/a", cm("a"), Precondition::Absent).unwrap();
    h.fail.store(true, std::sync::atomic::Ordering::SeqCst);
    let err = store
        .put("/k/b", cm("b"), Precondition::Absent)
        .unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(store.get("/k/b").is_none());
    let health = store.write_health();
    assert_eq!(
        (health.failures, health.commits, health.committed_writes),
        (1, 1, 1),
        "a failed commit is not counted as committed"
    );
    assert_eq!(store.current_revision(), 1);
    h.fail.store(false, std::sync::atomic::Ordering::SeqCst);
    let b = store.put("/k/b", cm("b"), Precondition::Absent).unwrap();
    assert_eq!(b.revision, 2);
    drop(store);
    let reopened = open(dir.path(), 1000);
    assert_eq!(reopened.current_revision(), 2);
}

#[test]
fn a_group_larger_than_the_history_compacts_inside_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (store, h) = instrumented(dir.path(), 4);
    h.set_gate(false);
    let writers = spawn_creates(&store, 300);
    wait_assigned(&store, 300, 20, "writers did not queue");
    h.set_gate(true);
    for w in writers {
        w.join().unwrap().unwrap();
    }
    // The first flush may be a single write; the rest go out together and overflow the
    // history (4 + the compaction batch of 256).
    assert_eq!(store.current_revision(), 300);
    assert!(store.compacted_revision() > 0, "compacted");
    assert!(matches!(store.watch(0), Err(StoreError::Compacted { .. })));
    let from = store.compacted_revision();
    let backlog = store.watch(from).unwrap().backlog;
    assert_eq!(backlog.len() as u64, 300 - from);
    drop(store);
    let reopened = open(dir.path(), 4);
    assert_eq!(reopened.count("/k/"), 300);
}

#[test]
fn a_read_modify_write_starts_from_a_queued_write_and_lands_behind_it() {
    let dir = tempfile::tempdir().unwrap();
    let (store, h) = instrumented(dir.path(), 1000);
    let a = store.put("/k/a", cm("a"), Precondition::Absent).unwrap();
    h.set_gate(false);
    let first = {
        let store = store.clone();
        std::thread::spawn(move || store.put("/k/a", cm("a"), Precondition::Revision(a.revision)))
    };
    wait_assigned(&store, a.revision + 1, 10, "first write did not queue");
    // Readers still see the durable version; a read-modify-write sees the queued one, and a
    // compare-and-swap against it is accepted (against the durable one it is a conflict).
    assert_eq!(store.get("/k/a").unwrap().revision, a.revision);
    let latest = store.latest("/k/a").unwrap();
    assert_eq!(latest.revision, a.revision + 1);
    assert!(matches!(
        store.put("/k/a", cm("a"), Precondition::Revision(a.revision)),
        Err(StoreError::Conflict)
    ));
    let second = {
        let store = store.clone();
        std::thread::spawn(move || {
            store.put("/k/a", cm("a"), Precondition::Revision(latest.revision))
        })
    };
    h.set_gate(true);
    assert_eq!(first.join().unwrap().unwrap().revision, a.revision + 1);
    assert_eq!(second.join().unwrap().unwrap().revision, a.revision + 2);
    assert_eq!(store.get("/k/a").unwrap().revision, a.revision + 2);
}

impl Store {
    /// The highest revision handed out by the local pipeline (queued or durable).
    fn assigned(&self) -> Revision {
        match &self.inner.writer {
            Writer::Local { pipeline, .. } => pipeline.lock().assigned,
            Writer::Etcd(_) => self.current_revision(),
        }
    }
}

/// A linger long enough that a test would hang if a write waited it out.
fn hour_linger(max_batch: usize) -> Option<Linger> {
    Some(Linger {
        prefixes: vec!["/lease/".to_string()],
        wait: std::time::Duration::from_secs(3600),
        max_batch,
    })
}

#[test]
fn lingering_writes_wait_for_company_and_share_one_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (store, h) = instrumented(dir.path(), 1000);
    store.set_linger(hour_linger(3));
    let writers: Vec<_> = (0..3)
        .map(|i| {
            let store = store.clone();
            std::thread::spawn(move || {
                store.put(
                    &format!("/lease/{i}"),
                    cm(&i.to_string()),
                    Precondition::Absent,
                )
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap().unwrap();
    }
    assert_eq!(
        h.commits.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "three lingering writes, a batch of three: one commit"
    );
    assert_eq!(store.count("/lease/"), 3);
    // What `/metrics` reports of it.
    let health = store.write_health();
    assert_eq!((health.commits, health.committed_writes), (1, 3));
    assert!(health.commit_seconds > 0.0, "{health:?}");
}

#[test]
fn a_write_that_does_not_linger_ends_the_wait_and_takes_the_lingering_one_along() {
    let dir = tempfile::tempdir().unwrap();
    let (store, h) = instrumented(dir.path(), 1000);
    store.set_linger(hour_linger(100));
    let lease = {
        let store = store.clone();
        std::thread::spawn(move || store.put("/lease/a", cm("a"), Precondition::Absent))
    };
    wait_assigned(&store, 1, 10, "the lease write did not queue");
    assert!(
        store.get("/lease/a").is_none(),
        "lingering: not durable yet"
    );
    // Without the wake-up this would wait out the hour.
    store.put("/k/x", cm("x"), Precondition::Absent).unwrap();
    lease.join().unwrap().unwrap();
    assert_eq!(h.commits.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(store.get("/lease/a").is_some());
}

#[test]
fn without_a_linger_a_lone_heartbeat_commits_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (store, h) = instrumented(dir.path(), 1000);
    store.set_linger(hour_linger(100));
    store.set_linger(None);
    store
        .put("/lease/a", cm("a"), Precondition::Absent)
        .unwrap();
    assert_eq!(h.commits.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn a_write_gives_back_what_it_stored_without_a_parse() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), 100);
    let mut obj = cm("a");
    obj["data"] = json!({"n": 1.5, "big": u64::MAX, "neg": -3, "order": {"z": 1, "a": 2}});
    let (stored, written) = store
        .put_returning("/k/a", obj, Precondition::Absent)
        .unwrap();
    assert_eq!(written, stored.value().unwrap());
    assert_eq!(
        serde_json::to_vec(&written).unwrap(),
        stored.data.to_vec(),
        "the same bytes, keys in the same order"
    );
    assert_eq!(
        written["metadata"]["resourceVersion"],
        stored.revision.to_string()
    );
}
