//! Test support for controllers and the scheduler: a control plane in process over a real
//! store in a temporary directory (registry, informers, queue metrics) with the controllers a
//! test runs on it, and waits that wake on store changes instead of sleeping; and writing an
//! object (or its status, in the place of the kubelet or a node) as the controllers' tests do.

use crate::informer::Informers;
use crate::{Clock, Context, ControllerMetrics};
use berth_registry::{DeleteOptions, Part, Propagation, Registry, RegistryError, WriteOptions};
use berth_shared::resource::ResourceType;
use berth_store::Store;
use serde_json::Value;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long a wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(30);

pub use berth_registry::testing::registry;

/// A control plane without HTTP: what controllers are started with.
pub struct ControlPlane {
    pub ctx: Context,
    pub stop: CancellationToken,
    store: Store,
    /// The controllers [`ControlPlane::run`] started.
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    _dir: tempfile::TempDir,
}

impl ControlPlane {
    /// Starts it (informers start as controllers ask for them). Call within a tokio runtime.
    pub fn start() -> ControlPlane {
        let dir = tempfile::tempdir().expect("temp dir");
        let registry = registry(dir.path());
        let store = registry.store().clone();
        let stop = CancellationToken::new();
        let informers = Informers::new(Arc::new(store.clone()), stop.clone());
        ControlPlane {
            ctx: Context {
                registry,
                informers,
                metrics: ControllerMetrics::default(),
                clock: Clock::system(),
            },
            stop,
            store,
            tasks: Mutex::new(Vec::new()),
            _dir: dir,
        }
    }

    /// Starts a controller (`run(ctx, shutdown)`) on this control plane.
    pub fn run<F>(&self, run: impl FnOnce(Context, CancellationToken) -> F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.keep(tokio::spawn(run(self.ctx.clone(), self.stop.clone())));
    }

    /// Keeps a task started otherwise (the scheduler's) to stop with the controllers.
    pub fn keep(&self, task: tokio::task::JoinHandle<()>) {
        self.tasks.lock().expect("tasks").push(task);
    }

    /// Stops every controller and waits for them to end.
    pub async fn shut_down(&self) {
        self.stop.cancel();
        let tasks = std::mem::take(&mut *self.tasks.lock().expect("tasks"));
        for t in tasks {
            let _ = t.await;
        }
    }

    /// The events of `default` with `reason`, as JSON.
    pub fn events(&self, reason: &str) -> Vec<Value> {
        let mut events = self.list(berth_shared::resource::EVENTS);
        events.retain(|e| e["reason"] == reason);
        events
    }

    /// Deletes `name` of `rt` (in `default` when the type is namespaced) with `propagation`.
    pub fn delete(&self, rt: &ResourceType, name: &str, propagation: Option<Propagation>) {
        let ns = rt.namespaced.then_some("default");
        let opts = DeleteOptions {
            propagation_policy: propagation,
            ..DeleteOptions::default()
        };
        self.ctx
            .registry
            .delete(rt, ns, name, &opts)
            .expect("delete");
    }

    /// The object `name` of `rt` (in `default` when the type is namespaced), as JSON.
    pub fn get(&self, rt: &ResourceType, name: &str) -> Option<Value> {
        let ns = rt.namespaced.then_some("default");
        let obj = self.ctx.registry.get(rt, ns, name).ok()?;
        Some(obj.value().expect("stored JSON"))
    }

    pub fn registry(&self) -> &Registry {
        &self.ctx.registry
    }

    /// Every object of `rt` in `default`, as JSON, read from the store.
    pub fn list(&self, rt: &ResourceType) -> Vec<Value> {
        self.ctx
            .registry
            .list_values(rt, Some("default"))
            .expect("list")
    }

    /// Waits until every started informer reflects every write made so far.
    pub async fn caught_up(&self) {
        let informers = self.ctx.informers.started();
        self.ctx.informers.catch_up(&informers, DEADLINE).await;
    }

    /// Waits until `check` holds, evaluating it again after every change in the store; panics
    /// with `what` and `dump()` after [`DEADLINE`].
    pub async fn wait_until(
        &self,
        what: &str,
        check: impl Fn() -> bool,
        dump: impl Fn() -> String,
    ) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let from = self.store.current_revision();
            if check() {
                return;
            }
            let Ok(mut watch) = self.store.watch(from) else {
                continue;
            };
            if !watch.backlog.is_empty() {
                continue;
            }
            if tokio::time::timeout_at(deadline, watch.live.recv())
                .await
                .is_err()
            {
                panic!("timed out waiting for {what}: {}", dump());
            }
        }
    }
}

/// Edits the status of `name` (in `default` when the type is namespaced) with `edit`.
pub fn edit_status(registry: &Registry, rt: &ResourceType, name: &str, edit: impl Fn(&mut Value)) {
    write(registry, rt, name, Part::Status, edit);
}

/// Edits `name` (in `default` when the type is namespaced) with `edit`, as a user would.
pub fn edit_object(registry: &Registry, rt: &ResourceType, name: &str, edit: impl Fn(&mut Value)) {
    write(registry, rt, name, Part::Main, edit);
}

fn write(
    registry: &Registry,
    rt: &ResourceType,
    name: &str,
    part: Part,
    edit: impl Fn(&mut Value),
) {
    let ns = rt.namespaced.then_some("default");
    let opts = WriteOptions::default();
    let edited = registry.update_with(rt, ns, name, part, &opts, |mut obj| {
        edit(&mut obj);
        Ok::<_, RegistryError>(obj)
    });
    edited.expect("write");
}
