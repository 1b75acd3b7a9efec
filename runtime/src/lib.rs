//! The controller runtime: a [`Controller`] builder that wires a [`Reconciler`] to shared
//! informers and to the reconcile queue. The primary kind's changes enqueue its key,
//! `.owns(kind)` maps a child's controller reference to its owner's key, `.adopts(kind, s)` (a
//! live orphan) and `.selects(kind, s)` (any child) map it to the owners whose selector `s`
//! matches it, `.watches(kind, f)` maps any change to keys with `f`, `.resync(period)`
//! re-enqueues every primary key. Passes run on the blocking pool (the registry blocks on the
//! store's fsync), at most `workers` at once, never two of one key; after each pass the key is
//! held until the informers the controller reads have caught up with the store
//! (read-your-writes), and a failure is retried as its error asks ([`ErrorPolicy`]): a
//! conflict at once, a transient error with backoff, a permanent one not until the key is
//! added again.
//!
//! The crate also holds the [`informer`]s the builder wires to, so that the controllers, the
//! scheduler and the API server share one runtime without depending on each other.

mod clock;
pub mod informer;
pub mod leader_election;
mod metrics;
pub mod pod_usage;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;

pub use clock::{Clock, SetClock};
pub use metrics::ControllerMetrics;

use crate::informer::{Delta, DeltaType, Informer, Informers, Object, ObjectKey, View};
use berth_registry::Registry;
use berth_registry::events::Recorder;
use berth_shared::reconcile::{self, ErrorPolicy, Failure, Outcome, Queue};
use berth_shared::resource::ResourceType;
use berth_shared::selector::LabelSelector;
use std::fmt::Display;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long a finished pass waits for the informers to reflect its writes before its key is
/// released anyway (only reached if an informer is stuck relisting).
const CATCH_UP_LIMIT: Duration = Duration::from_secs(5);

/// What every controller is started with.
#[derive(Clone)]
pub struct Context {
    pub registry: Registry,
    pub informers: Informers,
    /// The controllers' metrics (their work queues and what else they register).
    pub metrics: ControllerMetrics,
    /// The wall clock reconcilers read `now` from (never `Timestamp::now()` themselves).
    pub clock: Clock,
}

impl Context {
    pub fn informer(&self, rt: &'static ResourceType) -> Arc<Informer> {
        self.informers.get(rt)
    }

    /// An event recorder for `component`.
    pub fn recorder(&self, component: &str) -> Recorder {
        let clock = self.clock.clone();
        Recorder::with_clock(self.registry.clone(), component, move || clock.now())
    }
}

/// One controller's decisions: a pass over one key. Blocking.
pub trait Reconciler: Send + Sync + 'static {
    type Key: Clone + Eq + Hash + Send + Sync + Display + 'static;
    type Error: std::error::Error + ErrorPolicy + Send + 'static;

    fn reconcile(&self, key: &Self::Key) -> Result<Outcome, Self::Error>;
}

type KeysFn<K> = Arc<dyn Fn() -> Vec<K> + Send + Sync>;

/// A controller being wired; [`Controller::run`] starts it.
pub struct Controller<K> {
    name: &'static str,
    ctx: Context,
    queue: Queue<K>,
    reads: Vec<Arc<Informer>>,
    /// The keys a resync enqueues (the primary's, or given), and how often (none: never).
    resync_keys: Option<KeysFn<K>>,
    resync_period: Option<Duration>,
    workers: usize,
    primary: Option<&'static ResourceType>,
}

impl Controller<ObjectKey> {
    /// A controller of `primary` objects, keyed by namespace and name: every change of one
    /// enqueues it.
    pub fn new(name: &'static str, ctx: &Context, primary: &'static ResourceType) -> Self {
        let informer = ctx.informer(primary);
        let keys_of = informer.clone();
        let mut c = Controller::keyed(name, ctx)
            .watches(primary, |d: &Delta| vec![d.object.key().clone()])
            .with_resync_keys(Arc::new(move || keys_of.keys()));
        c.primary = Some(primary);
        c
    }

    /// Maps changes of `child` objects to the key of their controller of the primary kind,
    /// before and after the change (a released child concerns its old owner).
    pub fn owns(self, child: &'static ResourceType) -> Self {
        self.with_primary(|c, owner| c.owns_as(child, owner, ObjectKey::new))
    }

    /// Orphan routing (upstream's `addPod`/`updatePod` for a pod without a controller): a live
    /// `child` without a controller enqueues every primary object of its namespace whose
    /// selector matches its labels, as `selector` reads it from the primary's view `V`.
    pub fn adopts<V: View>(
        self,
        child: &'static ResourceType,
        selector: impl Fn(&V) -> Option<&LabelSelector> + Send + Sync + 'static,
    ) -> Self {
        self.with_primary(|c, owner| {
            c.adopts_as(child, owner, selector, |o: &Object| o.key().clone())
        })
    }

    /// Selector routing for children that no controller reference leads from (the
    /// StatefulSet's claims): any change of a `child`, owned or not, enqueues every primary
    /// object of its namespace whose selector, read as [`Controller::adopts`] reads it,
    /// matches its labels.
    pub fn selects<V: View>(
        self,
        child: &'static ResourceType,
        selector: impl Fn(&V) -> Option<&LabelSelector> + Send + Sync + 'static,
    ) -> Self {
        let key = |o: &Object| o.key().clone();
        self.with_primary(|c, owner| {
            let owners = c.ctx.informer(owner);
            c.watches(child, move |d: &Delta| {
                selecting(&owners, &selector, &d.object, key)
            })
        })
    }

    /// `wire(self, primary)` for a controller made by [`Controller::new`]; a controller without
    /// a primary kind (from [`Controller::keyed`]) is returned as it is.
    fn with_primary(self, wire: impl FnOnce(Self, &'static ResourceType) -> Self) -> Self {
        match self.primary {
            Some(owner) => wire(self, owner),
            None => self,
        }
    }
}

/// The CPU time (user and system) the calling thread has used; zero when it cannot be read.
/// A pass runs on one thread (the blocking pool's, or the caller's), so the difference over
/// a pass is what the pass cost.
fn thread_cpu() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    use nix::sys::time::TimeValLike;
    getrusage(UsageWho::RUSAGE_THREAD).map_or(Duration::ZERO, |u| {
        let micros = u.user_time().num_microseconds() + u.system_time().num_microseconds();
        Duration::from_micros(u64::try_from(micros).unwrap_or(0))
    })
}

/// The keys of the `owners` in `child`'s namespace whose selector (read from their view `V`;
/// `None` or empty: they select nothing) matches its labels.
fn selecting<V: View, K>(
    owners: &Informer,
    selector: &impl Fn(&V) -> Option<&LabelSelector>,
    child: &Object,
    key: impl Fn(&Object) -> K,
) -> Vec<K> {
    owners
        .in_namespace(child.namespace().unwrap_or_default())
        .iter()
        .filter(|p| {
            selector(&p.view::<V>()).is_some_and(|s| !s.is_empty() && s.matches(child.labels()))
        })
        .map(|p| key(p))
        .collect()
}

impl<K: Clone + Eq + Hash + Send + Sync + Display + 'static> Controller<K> {
    /// A controller whose keys come only from `.watches` mappers.
    pub fn keyed(name: &'static str, ctx: &Context) -> Self {
        let queue = Queue::new();
        ctx.metrics.register(name, &queue);
        Controller {
            name,
            ctx: ctx.clone(),
            queue,
            reads: Vec::new(),
            resync_keys: None,
            resync_period: None,
            workers: 1,
            primary: None,
        }
    }

    /// Enqueues the keys `map` finds in each change of `rt` objects.
    pub fn watches(
        mut self,
        rt: &'static ResourceType,
        map: impl Fn(&Delta) -> Vec<K> + Send + Sync + 'static,
    ) -> Self {
        let informer = self.ctx.informer(rt);
        let queue = self.queue.clone();
        informer.subscribe(Arc::new(move |deltas: &[Delta]| {
            for d in deltas {
                for k in map(d) {
                    queue.add(k);
                }
            }
        }));
        self.add_read(informer);
        self
    }

    /// Maps changes of `child` objects to `key(namespace, name)` of their controller of type
    /// `owner`, before and after the change (a released child concerns its old owner).
    pub fn owns_as(
        self,
        child: &'static ResourceType,
        owner: &'static ResourceType,
        key: impl Fn(Option<&str>, &str) -> K + Send + Sync + 'static,
    ) -> Self {
        let api_version = owner.api_version();
        self.watches(child, move |d: &Delta| {
            let mut keys = Vec::new();
            for obj in std::iter::once(&d.object).chain(d.old.iter()) {
                if let Some(c) = obj.controller()
                    && c.kind == owner.kind
                    && c.api_version == api_version
                {
                    let k = key(obj.namespace(), &c.name);
                    if !keys.contains(&k) {
                        keys.push(k);
                    }
                }
            }
            keys
        })
    }

    /// [`Controller::adopts`] for an `owner` kind keyed by `key`: a live orphan `child`
    /// enqueues the `owner` objects of its namespace whose selector (read from their view `V`;
    /// `None` or empty: they adopt nothing) matches it.
    pub fn adopts_as<V: View>(
        self,
        child: &'static ResourceType,
        owner: &'static ResourceType,
        selector: impl Fn(&V) -> Option<&LabelSelector> + Send + Sync + 'static,
        key: impl Fn(&Object) -> K + Send + Sync + 'static,
    ) -> Self {
        let owners = self.ctx.informer(owner);
        self.watches(child, move |d: &Delta| {
            let o = &d.object;
            if d.kind == DeltaType::Deleted || o.controller().is_some() || o.is_deleting() {
                return Vec::new();
            }
            selecting(&owners, &selector, o, &key)
        })
    }

    /// Names an informer the passes read without reacting to its changes (so that passes
    /// wait for it to sync and to catch up with their writes).
    pub fn reads(mut self, rt: &'static ResourceType) -> Self {
        let informer = self.ctx.informer(rt);
        self.add_read(informer);
        self
    }

    fn add_read(&mut self, informer: Arc<Informer>) {
        if !self.reads.iter().any(|i| Arc::ptr_eq(i, &informer)) {
            self.reads.push(informer);
        }
    }

    fn with_resync_keys(mut self, keys: KeysFn<K>) -> Self {
        self.resync_keys = Some(keys);
        self
    }

    /// Every primary key is enqueued this often (a controller without a primary names its
    /// keys with [`Controller::resync_with`]).
    pub fn resync(mut self, period: Duration) -> Self {
        self.resync_period = Some(period);
        self
    }

    /// Re-enqueues the keys `keys` returns every `period` (for controllers without a primary).
    pub fn resync_with(
        self,
        period: Duration,
        keys: impl Fn() -> Vec<K> + Send + Sync + 'static,
    ) -> Self {
        self.with_resync_keys(Arc::new(keys)).resync(period)
    }

    /// Paces each key: it runs again no sooner than `factor` times its last pass's duration
    /// after it (see [`Queue::set_pace`]), for controllers whose passes grow with the number
    /// of objects they own.
    pub fn paced(self, factor: u32) -> Self {
        self.queue.set_pace(factor);
        self
    }

    /// Passes of different keys that may run at once.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n.max(1);
        self
    }

    /// The queue, to add keys from outside the informers.
    pub fn queue(&self) -> Queue<K> {
        self.queue.clone()
    }

    /// Runs the controller until `shutdown`: waits for its informers to sync, then reconciles.
    pub async fn run<R: Reconciler<Key = K>>(
        self,
        reconciler: Arc<R>,
        shutdown: CancellationToken,
    ) {
        for i in &self.reads {
            tokio::select! {
                _ = i.wait_synced() => {}
                _ = shutdown.cancelled() => return,
            }
        }
        tracing::debug!(controller = self.name, "informers synced");
        if self.resync_period.is_some() && self.resync_keys.is_none() {
            tracing::warn!(
                controller = self.name,
                "resync asked without keys to resync"
            );
        }
        let resync = self
            .resync_period
            .filter(|p| !p.is_zero())
            .zip(self.resync_keys.clone())
            .map(|(period, keys)| {
                let queue = self.queue.clone();
                let stop = shutdown.clone();
                tokio::spawn(async move {
                    let mut tick = tokio::time::interval(period);
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    tick.tick().await;
                    loop {
                        tokio::select! {
                            _ = tick.tick() => keys().into_iter().for_each(|k| queue.add(k)),
                            _ = stop.cancelled() => return,
                        }
                    }
                })
            });
        let reads = Arc::new(self.reads);
        let informers = self.ctx.informers.clone();
        let name = self.name;
        let queue = self.queue.clone();
        reconcile::run_with_policy(self.queue, self.workers, shutdown, name, move |key: K| {
            let (r, reads, informers) = (reconciler.clone(), reads.clone(), informers.clone());
            let queue = queue.clone();
            async move {
                let span_key = key.to_string();
                let result = crate::informer::blocking(|| {
                    let _span =
                        tracing::debug_span!("reconcile", controller = name, key = %span_key)
                            .entered();
                    let cpu = thread_cpu();
                    let result = r.reconcile(&key).map_err(|e| Failure::of(&e));
                    // A paced key is paced by the CPU its pass used, not by the pass's waits
                    // on the store's fsyncs nor by the informers' catching up below.
                    queue.pace_by(&key, thread_cpu().saturating_sub(cpu));
                    result
                });
                informers.catch_up(&reads, CATCH_UP_LIMIT).await;
                result
            }
        })
        .await;
        if let Some(t) = resync {
            let _ = t.await;
        }
    }
}

#[cfg(test)]
mod cpu_tests {
    use super::thread_cpu;

    #[test]
    fn the_threads_cpu_time_only_grows() {
        let before = thread_cpu();
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu() >= before);
    }
}
