//! Informers over a scripted in-memory source (paused time, no sleeps): sharing, relisting on
//! lag and compaction, ordered delivery and catching up with a revision.

use super::*;
use berth_shared::resource::{NODES, PODS};
use berth_store::{ObjectIndex, StoredObject};
use serde_json::json;
use std::collections::VecDeque;
use std::sync::atomic::AtomicUsize;
use tokio::sync::mpsc;

/// What a scripted watch does next.
enum Step {
    Batch(Batch),
    End(WatchEnd),
}

/// A source whose lists and watches are scripted by the test: lists answer from `objects`;
/// each watch opened takes the next script of steps (a watch with no script waits forever).
#[derive(Default)]
struct Scripted {
    objects: Mutex<Vec<StoredObject>>,
    revision: AtomicU64,
    lists: AtomicUsize,
    /// Answers of the next lists, before falling back to `objects`.
    next_lists: Mutex<VecDeque<(Vec<StoredObject>, u64)>>,
    watches: Mutex<VecDeque<Result<mpsc::UnboundedReceiver<Step>, SourceError>>>,
}

fn stored(name: &str, revision: u64) -> StoredObject {
    let v = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}"),
            "resourceVersion": revision.to_string()}});
    StoredObject {
        revision,
        data: serde_json::to_vec(&v).unwrap().into(),
        index: Arc::new(ObjectIndex::of(&v)),
    }
}

impl Scripted {
    fn set(&self, objects: Vec<StoredObject>, revision: u64) {
        *self.objects.lock().unwrap() = objects;
        self.revision.store(revision, Ordering::SeqCst);
    }

    /// Scripts the next watch; returns the sender of its steps.
    fn next_watch(&self) -> mpsc::UnboundedSender<Step> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.watches.lock().unwrap().push_back(Ok(rx));
        tx
    }

    fn next_watch_fails(&self, e: SourceError) {
        self.watches.lock().unwrap().push_back(Err(e));
    }
}

struct ScriptedWatch(mpsc::UnboundedReceiver<Step>);

impl SourceWatch for ScriptedWatch {
    fn next_batch(
        &mut self,
        _max: usize,
    ) -> futures::future::BoxFuture<'_, Result<Batch, WatchEnd>> {
        Box::pin(async move {
            match self.0.recv().await {
                Some(Step::Batch(b)) => Ok(b),
                Some(Step::End(e)) => Err(e),
                None => std::future::pending().await,
            }
        })
    }
}

impl Source for Scripted {
    fn list(
        &self,
        _rt: &'static ResourceType,
    ) -> futures::future::BoxFuture<'_, Result<Listed, SourceError>> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        let listed = match self.next_lists.lock().unwrap().pop_front() {
            Some((objects, revision)) => Listed { revision, objects },
            None => Listed {
                revision: self.revision.load(Ordering::SeqCst),
                objects: self.objects.lock().unwrap().clone(),
            },
        };
        Box::pin(async move { Ok(listed) })
    }

    fn watch(
        &self,
        _rt: &'static ResourceType,
        _from: Revision,
    ) -> futures::future::BoxFuture<'_, Result<Box<dyn SourceWatch>, SourceError>> {
        let next = self.watches.lock().unwrap().pop_front();
        Box::pin(async move {
            match next {
                Some(Ok(rx)) => Ok(Box::new(ScriptedWatch(rx)) as Box<dyn SourceWatch>),
                Some(Err(e)) => Err(e),
                None => {
                    let (_tx, rx) = mpsc::unbounded_channel();
                    std::mem::forget(_tx);
                    Ok(Box::new(ScriptedWatch(rx)) as Box<dyn SourceWatch>)
                }
            }
        })
    }

    fn current_revision(&self) -> futures::future::BoxFuture<'_, Result<Revision, SourceError>> {
        let r = self.revision.load(Ordering::SeqCst);
        Box::pin(async move { Ok(r) })
    }
}

fn change(event_type: berth_store::EventType, name: &str, revision: u64) -> Step {
    Step::Batch(Batch {
        changes: vec![Change {
            event_type,
            object: stored(name, revision),
        }],
        revision,
    })
}

/// What a subscriber was told: (kind, name, revision) per delta.
type Told = Arc<Mutex<Vec<(DeltaType, String, u64)>>>;

/// Records every delta a subscriber is told.
fn recorder() -> (Handler, Told) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let h: Handler = Arc::new(move |deltas: &[Delta]| {
        let mut s = s.lock().unwrap();
        for d in deltas {
            s.push((d.kind, d.object.name().to_string(), d.object.revision()));
        }
    });
    (h, seen)
}

#[tokio::test(start_paused = true)]
async fn two_subscribers_share_one_informer_and_one_list() {
    let source = Arc::new(Scripted::default());
    source.set(vec![stored("a", 1), stored("b", 2)], 2);
    let stop = CancellationToken::new();
    let informers = Informers::new(source.clone(), stop.clone());
    let first = informers.get(PODS);
    let second = informers.get(PODS);
    assert!(Arc::ptr_eq(&first, &second));
    let (h1, seen1) = recorder();
    let (h2, seen2) = recorder();
    first.subscribe(h1);
    first.wait_synced().await;
    // A late subscriber is told the current contents.
    second.subscribe(h2);
    let names = |s: &Mutex<Vec<(DeltaType, String, u64)>>| {
        let mut v: Vec<String> = s.lock().unwrap().iter().map(|x| x.1.clone()).collect();
        v.sort();
        v
    };
    assert_eq!(names(&seen1), ["a", "b"]);
    assert_eq!(names(&seen2), ["a", "b"]);
    assert_eq!(source.lists.load(Ordering::SeqCst), 1);
    // Another type is another informer.
    assert!(!Arc::ptr_eq(&first, &informers.get(NODES)));
    stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_lagging_watch_relists_and_the_subscriber_sees_each_change_once() {
    let source = Arc::new(Scripted::default());
    source.set(vec![stored("a", 1), stored("b", 2)], 2);
    let watch = source.next_watch();
    let relisted = source.next_watch();
    let stop = CancellationToken::new();
    let informers = Informers::new(source.clone(), stop.clone());
    let pods = informers.get(PODS);
    let (h, seen) = recorder();
    pods.subscribe(h);
    pods.wait_synced().await;
    watch
        .send(change(berth_store::EventType::Added, "c", 3))
        .unwrap();
    pods.wait_for(3).await;
    // Meanwhile b changed, a was deleted and d was added; the watch falls behind.
    source.set(vec![stored("b", 4), stored("c", 3), stored("d", 5)], 5);
    watch.send(Step::End(WatchEnd::Lagged)).unwrap();
    pods.wait_for(5).await;
    let mut after: Vec<(DeltaType, String, u64)> = seen.lock().unwrap()[3..].to_vec();
    after.sort_by(|x, y| x.1.cmp(&y.1));
    assert_eq!(
        after,
        [
            (DeltaType::Deleted, "a".to_string(), 1),
            (DeltaType::Modified, "b".to_string(), 4),
            (DeltaType::Added, "d".to_string(), 5),
        ],
        "c, unchanged, is not reported again"
    );
    assert_eq!(pods.list_count(), 2);
    let mut keys: Vec<String> = pods.keys().iter().map(|k| k.name().to_string()).collect();
    keys.sort();
    assert_eq!(keys, ["b", "c", "d"]);
    drop(relisted);
    stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_compacted_watch_relists() {
    let source = Arc::new(Scripted::default());
    source.set(vec![stored("a", 1), stored("z", 6)], 6);
    source
        .next_lists
        .lock()
        .unwrap()
        .push_back((vec![stored("a", 1)], 1));
    source.next_watch_fails(SourceError::Compacted {
        requested: 1,
        oldest: 4,
    });
    let _live = source.next_watch();
    let stop = CancellationToken::new();
    let informers = Informers::new(source.clone(), stop.clone());
    let pods = informers.get(PODS);
    pods.wait_for(6).await;
    assert_eq!(pods.list_count(), 2);
    assert!(pods.get(Some("ns"), "z").is_some());
    stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn catching_up_waits_for_the_revision_of_the_last_write() {
    let source = Arc::new(Scripted::default());
    source.set(vec![], 1);
    let watch = source.next_watch();
    let stop = CancellationToken::new();
    let informers = Informers::new(source.clone(), stop.clone());
    let pods = informers.get(PODS);
    pods.wait_synced().await;
    // A write lands at revision 2: the informer has not seen it yet.
    source.revision.store(2, Ordering::SeqCst);
    let waiting = {
        let (informers, pods) = (informers.clone(), pods.clone());
        tokio::spawn(async move {
            informers
                .catch_up(std::slice::from_ref(&pods), Duration::from_secs(60))
                .await;
            pods.get(Some("ns"), "new").is_some()
        })
    };
    tokio::task::yield_now().await;
    assert!(!waiting.is_finished());
    watch
        .send(change(berth_store::EventType::Added, "new", 2))
        .unwrap();
    assert!(
        waiting.await.unwrap(),
        "caught up means the write is visible"
    );
    stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_pass_over_a_cached_key_runs_while_cached_and_is_done_once_gone() {
    let source = Arc::new(Scripted::default());
    source.set(vec![stored("a", 1)], 1);
    let stop = CancellationToken::new();
    let pods = Informers::new(source, stop.clone()).get(PODS);
    pods.wait_synced().await;
    let requeue = Outcome::RequeueAfter(Duration::from_secs(1));
    let pass = |key: &str| {
        pods.reconcile_cached(&ObjectKey::new(Some("ns"), key), |o| {
            assert_eq!(o.name(), key);
            Ok::<_, SourceError>(requeue)
        })
    };
    assert_eq!(pass("a").unwrap(), requeue);
    assert_eq!(pass("gone").unwrap(), Outcome::Done);
    stop.cancel();
}
