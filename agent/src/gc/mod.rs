//! Garbage collection on the node, as the kubelet's image manager, container GC and container
//! log manager do it: unused images deleted least recently used first when the image
//! filesystem passes `--image-gc-high-threshold` (down to the low threshold) or when unused for
//! `--image-maximum-gc-age`; log directories of pods that are gone swept; rotated container
//! logs compressed and pruned to `--container-log-max-files`. The eviction manager reclaims
//! through [`GarbageCollector::delete_dead_containers`] and
//! [`GarbageCollector::free_image_space`].
//!
//! Periods: the image filesystem is looked at every 10 s (one statfs; upstream's 5-minute GC
//! period lets a burst of pulls fill a small disk first) and image use is recorded every 30 s
//! (the kubelet's image-list refresh); after a pass that could not free enough the next try
//! waits 5 minutes (upstream's period), so the warning is not repeated every 10 s. Log
//! directories are swept every minute (upstream's container GC period), rotated logs handled
//! every 10 s (upstream's log monitor period).
//!
//! Events on the Node: `ImageGCFailed` and `FreeDiskSpaceFailed` (Warning, upstream's reasons
//! and messages) and, on success, `FreedDiskSpace` (Normal; upstream records none) naming the
//! images deleted and the bytes freed.

mod containers;
mod disk;
mod events;
mod images;
pub mod log_rotation;
pub mod plan;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::runtime::{Runtime, RuntimeError};
pub use containers::remove_pod_log_dir;
pub use events::NodeEvents;
pub use plan::images::ImageGcPolicy;

/// The pods bound to this node, as the pod manager knows them.
pub trait PodView: Send + Sync {
    /// The uids of the pods bound here, once they have been listed; `None` before (a container
    /// without a pod could not be told from one whose pod is not known yet).
    fn live_pods(&self) -> Option<BTreeSet<String>>;
}

/// Settings of the collector (the agent's flags).
#[derive(Clone, Debug)]
pub struct GcConfig {
    pub images: ImageGcPolicy,
    /// `--log-dir`: `<dir>/<ns>_<pod>_<uid>/<container>/<n>.log`.
    pub log_dir: PathBuf,
    /// `--container-log-max-files` (at least 2).
    pub container_log_max_files: usize,
    /// The image filesystem (the snapshotter's root); `None`: image GC by threshold is off.
    pub image_fs: Option<PathBuf>,
}

/// What reclaiming dead containers freed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Freed {
    pub containers: usize,
    /// Bytes of their log files (their writable layers are not measured).
    pub bytes: u64,
}

/// Why a collection failed.
#[derive(Debug, thiserror::Error)]
pub enum GcError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Image(#[from] crate::image::PullError),
    #[error("invalid capacity 0 on image filesystem")]
    NoCapacity,
    #[error("failed to get imageFs info: {0}")]
    ImageFs(String),
    #[error(
        "Failed to garbage collect required amount of images. Attempted to free {wanted} bytes, but only found {freed} bytes eligible to free."
    )]
    NotEnoughFreed { wanted: u64, freed: u64 },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl GcError {
    /// Whether the next pass may succeed without anything else changing.
    pub fn is_transient(&self) -> bool {
        match self {
            GcError::Runtime(e) => e.is_transient(),
            GcError::Image(e) => e.is_transient(),
            GcError::Io { .. } | GcError::ImageFs(_) => true,
            GcError::NoCapacity | GcError::NotEnoughFreed { .. } => false,
        }
    }
}

struct Inner {
    runtime: Runtime,
    images: crate::image::ImageService,
    config: GcConfig,
    pods: Arc<dyn PodView>,
    events: Option<NodeEvents>,
    state: Mutex<images::State>,
    /// One image pass at a time (the loop and the eviction manager).
    image_pass: tokio::sync::Mutex<()>,
}

/// The node's garbage collector. Cheap to clone.
#[derive(Clone)]
pub struct GarbageCollector {
    inner: Arc<Inner>,
}

impl GarbageCollector {
    pub fn new(
        runtime: Runtime,
        images: crate::image::ImageService,
        config: GcConfig,
        pods: Arc<dyn PodView>,
        events: Option<NodeEvents>,
    ) -> GarbageCollector {
        GarbageCollector {
            inner: Arc::new(Inner {
                runtime,
                images,
                config,
                pods,
                events,
                state: Mutex::new(images::State::default()),
                image_pass: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// Runs the collection loops until `shutdown`.
    pub async fn run(&self, shutdown: CancellationToken) {
        let a = tokio::spawn(self.clone().image_loop(shutdown.clone()));
        let b = tokio::spawn(self.clone().container_loop(shutdown.clone()));
        let c = tokio::spawn(log_rotation::run(
            self.inner.config.log_dir.clone(),
            self.inner.config.container_log_max_files,
            shutdown,
        ));
        let _ = tokio::join!(a, b, c);
    }

    /// Removes every dead container the node can spare (for the eviction manager): all of pods
    /// that are gone and, of live pods, every dead attempt but the latest of each container
    /// name (see [`plan::containers`]), with their logs.
    pub async fn delete_dead_containers(&self) -> Result<Freed, GcError> {
        containers::delete_dead(&self.inner.runtime, self.inner.pods.as_ref()).await
    }

    /// Deletes unused images, least recently used first and not younger than the minimum GC
    /// age, whatever the thresholds, until `bytes` are freed (`u64::MAX`: every one of them);
    /// returns the bytes freed (the images' sizes, as upstream counts them).
    pub async fn free_image_space(&self, bytes: u64) -> Result<u64, GcError> {
        let _pass = self.inner.image_pass.lock().await;
        let deleted = images::free(&self.inner, bytes).await?;
        let freed = deleted.iter().map(|d| d.size_bytes).sum();
        images::report_freed(&self.inner, &deleted, freed).await;
        Ok(freed)
    }

    async fn image_loop(self, shutdown: CancellationToken) {
        images::run(self.inner.clone(), shutdown).await;
    }

    async fn container_loop(self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(containers::SWEEP_PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! { _ = tick.tick() => {}, _ = shutdown.cancelled() => return }
            if let Err(e) = containers::sweep_log_dirs(
                &self.inner.runtime,
                self.inner.pods.as_ref(),
                &self.inner.config.log_dir,
            )
            .await
            {
                tracing::warn!(error = %e, "sweeping pod log directories failed");
            }
        }
    }
}

/// The period of a loop, with a first pass right away.
fn period(d: Duration) -> tokio::time::Interval {
    let mut tick = tokio::time::interval(d);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick
}

/// A Go duration (`2m`, `1h30m`, `300ms`, `0`) as the kubelet's flags take them; `None` when
/// malformed or negative.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let d: jiff::SignedDuration = s.parse().ok()?;
    Duration::try_from(d).ok()
}

impl PodView for crate::pod::manager::PodManager {
    fn live_pods(&self) -> Option<BTreeSet<String>> {
        self.listed_pods()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_as_the_kubelet_flags_take_them() {
        let cases = [
            ("2m", Some(120)),
            ("1h30m", Some(5400)),
            ("0", Some(0)),
            ("0s", Some(0)),
            ("90s", Some(90)),
            ("-1m", None),
            ("soon", None),
        ];
        for (s, want) in cases {
            assert_eq!(parse_go_duration(s), want.map(Duration::from_secs), "{s}");
        }
        assert_eq!(parse_go_duration("300ms"), Some(Duration::from_millis(300)));
    }
}
