//! Node-level reclaim before pods are evicted, as the kubelet's eviction manager does it for
//! disk signals: delete dead containers, then unused images. Which steps a signal gets depends
//! on whether the image filesystem is the node filesystem (upstream's
//! `buildSignalToNodeReclaimFuncs`): on one filesystem, every disk signal reclaims both; with a
//! dedicated image filesystem, the image signals reclaim both and the node signals nothing
//! (what fills the node filesystem there — logs and emptyDirs — belongs to pods). Memory and
//! pids are never reclaimed at node level.
//!
//! The steps run through [`NodeReclaim`], implemented by the agent's garbage collector.

use crate::node::pressure::Signal;
use futures::future::BoxFuture;

/// A node-level reclaim step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    DeadContainers,
    UnusedImages,
}

/// The steps for `signal`, in order.
pub fn steps(signal: Signal, dedicated_imagefs: bool) -> &'static [Step] {
    const BOTH: &[Step] = &[Step::DeadContainers, Step::UnusedImages];
    match signal {
        Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable | Signal::PidAvailable => &[],
        Signal::NodeFsAvailable | Signal::NodeFsInodesFree if dedicated_imagefs => &[],
        _ => BOTH,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReclaimError {
    #[error("node-level reclaim is not available: {0}")]
    Unavailable(&'static str),
    #[error("{0}")]
    Failed(String),
}

impl ReclaimError {
    pub fn is_transient(&self) -> bool {
        matches!(self, ReclaimError::Failed(_))
    }
}

/// What the eviction manager asks of the garbage collector.
pub trait NodeReclaim: Send + Sync {
    /// Deletes every dead container (all of them, not only those beyond the per-pod count
    /// container GC keeps); returns the bytes freed, as far as known.
    fn delete_dead_containers(&self) -> BoxFuture<'_, Result<u64, ReclaimError>>;
    /// Deletes unused images, least recently used first, until `bytes` are freed; returns the
    /// bytes freed.
    fn free_image_space(&self, bytes: u64) -> BoxFuture<'_, Result<u64, ReclaimError>>;
}

/// No garbage collector to call: every step fails as unavailable (pods are evicted instead).
pub struct Unavailable;

impl NodeReclaim for Unavailable {
    fn delete_dead_containers(&self) -> BoxFuture<'_, Result<u64, ReclaimError>> {
        Box::pin(async { Err(ReclaimError::Unavailable("no container garbage collector")) })
    }

    fn free_image_space(&self, _bytes: u64) -> BoxFuture<'_, Result<u64, ReclaimError>> {
        Box::pin(async { Err(ReclaimError::Unavailable("no image garbage collector")) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_signals_reclaim_containers_then_images_on_their_filesystem() {
        let both = [Step::DeadContainers, Step::UnusedImages];
        let cases = [
            (Signal::MemoryAvailable, false, &[][..]),
            (Signal::PidAvailable, true, &[][..]),
            (Signal::NodeFsAvailable, false, &both[..]),
            (Signal::NodeFsInodesFree, false, &both[..]),
            (Signal::NodeFsAvailable, true, &[][..]),
            (Signal::ImageFsAvailable, true, &both[..]),
            (Signal::ImageFsInodesFree, false, &both[..]),
        ];
        for (signal, dedicated, want) in cases {
            assert_eq!(
                steps(signal, dedicated),
                want,
                "{signal:?} dedicated={dedicated}"
            );
        }
    }
}
