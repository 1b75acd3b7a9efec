//! Following a Deployment, a DaemonSet or a StatefulSet through rollouts from outside the
//! controller: a background watch ([`Watcher`]) of its pods ([`census::Census`], per node
//! [`daemon::DaemonPods`], by name [`ordinals::Ordinals`]) or of its ReplicaSets' sizes
//! ([`sizes::Sizes`]) that samples after every event, so rollout bounds are checked at every
//! version the API stored ([`bounds`] checks the surge on both together); reads of the
//! Deployment and its ReplicaSets (revisions, conditions, template images, sizes); and
//! kubectl's rollout output read back ([`output`]).

pub mod bounds;
pub mod census;
pub mod daemon;
pub mod objects;
pub mod ordinals;
pub mod output;
pub mod sizes;
pub mod tally;

pub use objects::*;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::api::{Api, Next};
use crate::client::Credentials;
use crate::cluster::Cluster;
use census::Census;
use daemon::DaemonPods;
use sizes::Sizes;
use tally::{Stamp, Tally, Timeline};

/// How long the watch thread waits for an event before it looks at its stop flag.
const POLL: Duration = Duration::from_millis(200);

/// What the watch thread shares with the test.
struct Shared<T: Tally> {
    tally: T,
    timeline: Timeline<T::Sample>,
    /// Why the watch stopped seeing every event (a refused or expired watch); the samples
    /// after it would be wrong, so readers panic with it.
    failure: Option<String>,
}

/// A watch on the objects of one collection, folded into a `T` by a thread until `finish`.
pub struct Watcher<T: Tally> {
    shared: Arc<Mutex<Shared<T>>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    what: String,
}

/// The pods of a Deployment, counted as [`census`] says.
pub type PodWatch = Watcher<Census>;

/// The sizes of a Deployment's ReplicaSets.
pub type SizeWatch = Watcher<Sizes>;

/// A DaemonSet's pods per node.
pub type DaemonPodWatch = Watcher<DaemonPods>;

/// A StatefulSet's pods by name.
pub type OrdinalWatch = Watcher<ordinals::Ordinals>;

impl Watcher<ordinals::Ordinals> {
    /// Follows the pods of `ns` that `selector` picks, by name.
    pub fn ordinals(c: &Cluster, ns: &str, selector: &str) -> OrdinalWatch {
        Watcher::start(c, &format!("/api/v1/namespaces/{ns}/pods"), selector)
    }
}

impl Watcher<DaemonPods> {
    /// Follows the daemon pods of `ns` that `selector` picks.
    pub fn daemon_pods(c: &Cluster, ns: &str, selector: &str) -> DaemonPodWatch {
        Watcher::start(c, &format!("/api/v1/namespaces/{ns}/pods"), selector)
    }
}

impl Watcher<Census> {
    /// Follows the pods of `ns` that `selector` (`app=nginx`) picks.
    pub fn pods(c: &Cluster, ns: &str, selector: &str) -> PodWatch {
        Watcher::start(c, &format!("/api/v1/namespaces/{ns}/pods"), selector)
    }
}

impl Watcher<Sizes> {
    /// Follows the ReplicaSets of `ns` that `selector` picks.
    pub fn replica_sets(c: &Cluster, ns: &str, selector: &str) -> SizeWatch {
        Watcher::start(
            c,
            &format!("/apis/apps/v1/namespaces/{ns}/replicasets"),
            selector,
        )
    }
}

impl<T: Tally> Watcher<T> {
    /// Lists `collection` with `selector`, then follows it from the list's resourceVersion in
    /// a thread, so no change after the list is missed. Returns after the list.
    pub fn start(c: &Cluster, collection: &str, selector: &str) -> Watcher<T> {
        Watcher::start_via(c, c.controller(), collection, selector)
    }

    /// [`Watcher::start`] through `controller` (one of several serving the cluster).
    pub fn start_via(
        c: &Cluster,
        controller: &crate::Controller,
        collection: &str,
        selector: &str,
    ) -> Watcher<T> {
        Watcher::start_with(c, controller, collection, selector, false)
    }

    /// [`Watcher::start_via`] through a controller the test kills and restarts: when it cannot
    /// resume the watch (`410 Expired`: its history starts after the last version delivered),
    /// the watch relists as a reflector does (a `RELIST` sample), instead of failing. Changes
    /// in between are then seen only as their sum.
    pub fn start_relisting(
        c: &Cluster,
        controller: &crate::Controller,
        collection: &str,
        selector: &str,
    ) -> Watcher<T> {
        Watcher::start_with(c, controller, collection, selector, true)
    }

    fn start_with(
        c: &Cluster,
        controller: &crate::Controller,
        collection: &str,
        selector: &str,
        relist: bool,
    ) -> Watcher<T> {
        let endpoint = controller.endpoint(Credentials::ClientCert(controller.admin_identity()));
        let api = Api::new(endpoint, c.logs());
        let query = selector.replace('=', "%3D").replace(',', "%2C");
        let list = api.get_ok(&format!("{collection}?labelSelector={query}"));
        let mut tally = T::default();
        for obj in list["items"].as_array().into_iter().flatten() {
            tally.insert(obj);
        }
        let rv = list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("0")
            .to_string();
        let mut timeline = Timeline::default();
        timeline.samples.push(tally.sample(Stamp {
            at: Duration::ZERO,
            rv: rv.parse().unwrap_or(0),
            event: "LIST".into(),
        }));
        let shared = Arc::new(Mutex::new(Shared {
            tally,
            timeline,
            failure: None,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let path =
            format!("{collection}?watch=true&labelSelector={query}&allowWatchBookmarks=true");
        let (s, f) = (Arc::clone(&shared), Arc::clone(&stop));
        let started = Instant::now();
        let list_path = relist.then(|| format!("{collection}?labelSelector={query}"));
        let handle = std::thread::spawn(move || {
            follow(&api, &path, list_path.as_deref(), rv, started, &s, &f)
        });
        Watcher {
            shared,
            stop,
            handle: Some(handle),
            what: format!("{collection} {selector}"),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Shared<T>> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn check_failure(&self, shared: &Shared<T>) {
        if let Some(f) = &shared.failure {
            panic!(
                "the watch on {} lost events: {f}\n{}",
                self.what,
                shared.timeline.describe()
            );
        }
    }

    /// Waits until `check` accepts the state and returns what it returned.
    pub fn wait_until<R>(
        &self,
        c: &Cluster,
        timeout: Duration,
        what: &str,
        mut check: impl FnMut(&T) -> Result<R, String>,
    ) -> R {
        c.wait_for(timeout, &format!("{}: {what}", self.what), || {
            let shared = self.lock();
            self.check_failure(&shared);
            check(&shared.tally).map_err(|e| format!("{e}; now: {}", shared.tally.summary()))
        })
    }

    /// The samples so far.
    pub fn timeline(&self) -> Timeline<T::Sample> {
        let shared = self.lock();
        self.check_failure(&shared);
        shared.timeline.clone()
    }

    /// Stops the thread and returns every sample.
    pub fn finish(mut self) -> Timeline<T::Sample> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take()
            && h.join().is_err()
        {
            panic!("the watch thread on {} panicked", self.what);
        }
        self.timeline()
    }
}

impl<T: Tally> Drop for Watcher<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The watch thread: follows `path` from `rv`, reopening a stream the server ended, until
/// `stop`. A refused watch or an `ERROR` event (history expired) is recorded as the failure.
fn follow<T: Tally>(
    api: &Api,
    path: &str,
    list_path: Option<&str>,
    mut rv: String,
    started: Instant,
    shared: &Mutex<Shared<T>>,
    stop: &AtomicBool,
) {
    let fail = |why: String| {
        let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
        s.failure = Some(why);
    };
    while !stop.load(Ordering::SeqCst) {
        // A controller that is restarting (killed on purpose) is waited for, up to a minute:
        // the watch then resumes from the last resourceVersion it delivered.
        let back = Instant::now() + Duration::from_secs(60);
        while api.try_send(crate::Req::get("/readyz")).is_err() && Instant::now() < back {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut watch = match api.watch(&format!("{path}&resourceVersion={rv}")) {
            Ok(w) => w,
            Err(reply) => return fail(format!("watch refused: {}", reply.describe())),
        };
        loop {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let event = match watch.next(POLL) {
                Next::Timeout => continue,
                Next::Closed(_) => break,
                Next::Event(e) => e,
            };
            if let Some(v) = event["object"]["metadata"]["resourceVersion"].as_str() {
                rv = v.to_string();
            }
            match event["type"].as_str() {
                Some("BOOKMARK") => {}
                Some("ERROR") if event["object"]["code"] == 410 && list_path.is_some() => {
                    let list = api.get_ok(list_path.unwrap_or_default());
                    let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
                    s.tally = T::default();
                    for obj in list["items"].as_array().into_iter().flatten() {
                        s.tally.insert(obj);
                    }
                    rv = list["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or("0")
                        .to_string();
                    let sample = s.tally.sample(Stamp {
                        at: started.elapsed(),
                        rv: rv.parse().unwrap_or(0),
                        event: "RELIST".into(),
                    });
                    s.timeline.samples.push(sample);
                    break;
                }
                Some("ERROR") => return fail(format!("watch error event: {event}")),
                _ => {
                    let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
                    if s.tally.apply(&event) {
                        let sample = s.tally.sample(Stamp {
                            at: started.elapsed(),
                            rv: rv.parse().unwrap_or(0),
                            event: crate::api::event_summary(&event),
                        });
                        s.timeline.samples.push(sample);
                    }
                }
            }
        }
    }
}
