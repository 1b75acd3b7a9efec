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
