//! The scheduler's writer loops: bindings (`binders` at a time, on the blocking pool), events
//! (yielding the store to bindings), and the unschedulable condition of waiting pods (on the
//! shared reconcile runtime).

use super::binder::{self, Bound, EventJob};
use super::facts::{PodInfo, PodKey};
use super::{Shared, Unwritten, lock};
use berth_registry::Registry;
use berth_registry::RegistryError;
use berth_registry::events::Recorder;
use berth_shared::reconcile::{self, Outcome as Pass, Queue};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

/// Writes bindings, `binders` at a time, and reports each outcome to the state.
pub(super) async fn bind_all(
    registry: Registry,
    shared: Arc<Shared>,
    mut jobs: mpsc::UnboundedReceiver<(Arc<PodInfo>, Arc<str>)>,
    events: mpsc::Sender<EventJob>,
    binders: usize,
    shutdown: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(binders));
    loop {
        let job = tokio::select! {
            j = jobs.recv() => j,
            _ = shutdown.cancelled() => None,
        };
        let Some((pod, node)) = job else { break };
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        let (r, sh, ev) = (registry.clone(), shared.clone(), events.clone());
        tokio::task::spawn_blocking(move || {
            let result = binder::bind(&r, &pod, &node);
            let now = Instant::now();
            match &result {
                Bound::Done => sh.lock().bound(&pod.key),
                Bound::Gone => sh.lock().bind_failed(&pod.key, true, now),
                Bound::Failed(e) => {
                    tracing::warn!(pod = %pod.key, node = %node, error = %e, "binding failed");
                    sh.lock().bind_failed(&pod.key, false, now);
                }
            }
            let job = match &result {
                Bound::Done => Some(EventJob::scheduled(&pod, &node)),
                Bound::Gone => None,
                Bound::Failed(e) => Some(EventJob::failed(&pod, &format!("Binding rejected: {e}"))),
            };
            if let Some(job) = job {
                let _ = ev.try_send(job);
            }
            if result != Bound::Done {
                sh.wake.notify_one();
            }
            sh.binding.fetch_sub(1, Ordering::SeqCst);
            drop(permit);
        });
    }
    let _ = permits.acquire_many(binders as u32).await;
}

/// Writes queued events in small batches, yielding the store to bindings while there are
/// any; a full queue drops new events meanwhile.
pub(super) async fn record_events(
    recorder: Recorder,
    mut jobs: mpsc::Receiver<EventJob>,
    shared: Arc<Shared>,
    pace: Duration,
    shutdown: CancellationToken,
) {
    let mut last = tokio::time::Instant::now();
    loop {
        while shared.binding.load(Ordering::SeqCst) > 0 && last.elapsed() < pace {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(5)) => {}
                _ = shutdown.cancelled() => return,
            }
        }
        let first = tokio::select! {
            j = jobs.recv() => j,
            _ = shutdown.cancelled() => None,
        };
        let Some(first) = first else { return };
        let mut batch = vec![first];
        while batch.len() < 64 {
            match jobs.try_recv() {
                Ok(j) => batch.push(j),
                Err(_) => break,
            }
        }
        let r = recorder.clone();
        last = tokio::time::Instant::now();
        let written = tokio::task::spawn_blocking(move || {
            for job in &batch {
                if let Err(e) = job.record(&r) {
                    tracing::debug!(pod = %job.name, error = %e, "event not recorded");
                }
            }
        });
        if written.await.is_err() {
            return;
        }
    }
}

/// Writes the unschedulable condition of each pod in the queue (latest message), on the
/// shared reconcile runtime (retries with backoff on errors).
pub(super) async fn write_statuses(
    registry: Registry,
    unwritten: Unwritten,
    queue: Queue<PodKey>,
    shutdown: CancellationToken,
) {
    reconcile::run(
        queue,
        2,
        shutdown,
        "scheduler-status",
        move |key: PodKey| {
            let (r, u) = (registry.clone(), unwritten.clone());
            async move {
                let Some((pod, message)) = lock(&u).get(&key).cloned() else {
                    return Ok(Pass::Done);
                };
                let m = message.clone();
                tokio::task::spawn_blocking(move || binder::write_unschedulable(&r, &pod, &m))
                    .await
                    .map_err(|e| RegistryError::Internal(e.to_string()))??;
                let mut u = lock(&u);
                if u.get(&key).is_some_and(|(_, m)| *m == message) {
                    u.remove(&key);
                }
                Ok::<_, RegistryError>(Pass::Done)
            }
        },
    )
    .await;
}
