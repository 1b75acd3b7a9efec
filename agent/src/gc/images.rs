//! Image garbage collection, applied: observe containerd's image records and the containers
//! using them, plan with [`super::plan::images`], delete the chosen images' records with a
//! synchronous containerd GC (which removes the content and snapshots only they referenced).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::plan::images::{
    Deletion, ImageRecords, ImageState, ObservedImage, plan_free_space, plan_old_images,
};
use super::{GcError, Inner, disk, period};

/// How often the image filesystem's usage is looked at.
const CHECK_PERIOD: Duration = Duration::from_secs(10);
/// How often image use is recorded (and the maximum-age pass runs).
const DETECT_PERIOD: Duration = Duration::from_secs(30);
/// After a pass that failed, the next one waits this long (the kubelet's GC period).
const RETRY_PERIOD: Duration = Duration::from_secs(300);
/// containerd CRI's label on images that are never garbage-collected.
pub const PINNED_LABEL: &str = "io.cri-containerd.pinned";

/// What the collector remembers between passes.
#[derive(Default)]
pub(super) struct State {
    records: ImageRecords,
    /// Image sizes by digest (a digest's size never changes).
    sizes: HashMap<String, u64>,
}

/// Observes every image and whether containers use it, and records it.
async fn observe(inner: &Inner) -> Result<Vec<ImageState>, GcError> {
    let records = inner.runtime.image_list().await?;
    let used: BTreeSet<String> = inner
        .runtime
        .list()
        .await?
        .into_iter()
        .map(|c| c.image)
        .collect();
    let known: HashMap<String, u64> = inner
        .state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .sizes
        .clone();
    let mut observed = Vec::with_capacity(records.len());
    for r in records {
        let id = r.target.digest.clone();
        let size = match known.get(&id) {
            Some(s) => *s,
            None => match inner.images.get(&r.name).await {
                Ok(Some(i)) => i.size_bytes,
                _ => u64::try_from(r.target.size).unwrap_or(0),
            },
        };
        observed.push(ObservedImage {
            pinned: r.labels.get(PINNED_LABEL).is_some_and(|v| v == "pinned"),
            name: r.name,
            id,
            size_bytes: size,
            created_at: r.created_at,
        });
    }
    let mut state = inner.state.lock().unwrap_or_else(|e| e.into_inner());
    for o in &observed {
        state.sizes.insert(o.id.clone(), o.size_bytes);
    }
    Ok(state.records.observe(&observed, &used, Timestamp::now()))
}

/// Deletes the planned images (every name of each); returns those deleted. A failure is
/// logged and the image skipped: the others still go.
async fn apply(inner: &Inner, plan: Vec<Deletion>) -> Vec<Deletion> {
    let mut done = Vec::new();
    'images: for d in plan {
        for name in &d.names {
            if let Err(e) = inner.runtime.image_delete(name, true).await {
                tracing::warn!(image = %name, error = %e, "failed to remove image");
                continue 'images;
            }
        }
        tracing::info!(image = ?d.names, size = d.size_bytes, "removed unused image");
        let mut state = inner.state.lock().unwrap_or_else(|e| e.into_inner());
        state.records.forget(&d.id);
        state.sizes.remove(&d.id);
        done.push(d);
    }
    done
}

/// The `FreedDiskSpace` event for what a pass deleted (nothing when it deleted nothing).
pub(super) async fn report_freed(inner: &Inner, deleted: &[Deletion], freed: u64) {
    if deleted.is_empty() {
        return;
    }
    let names: Vec<&str> = deleted
        .iter()
        .flat_map(|d| d.names.iter().map(String::as_str))
        .collect();
    let message = format!(
        "Deleted {} unused image(s) to free {freed} bytes: {}",
        deleted.len(),
        names.join(", ")
    );
    if let Some(events) = &inner.events {
        events.record(false, "FreedDiskSpace", &message).await;
    } else {
        tracing::info!("{message}");
    }
}

/// Deletes unused images until `bytes` are freed (the eviction manager's reclaim).
pub(super) async fn free(inner: &Inner, bytes: u64) -> Result<Vec<Deletion>, GcError> {
    let states = observe(inner).await?;
    let plan = plan_free_space(
        &states,
        Timestamp::now(),
        inner.config.images.minimum_age,
        bytes,
    );
    Ok(apply(inner, plan).await)
}

/// One threshold pass: over the high threshold, free down to the low one. `Ok(false)`: below.
async fn collect(inner: &Inner) -> Result<bool, GcError> {
    let Some(fs) = &inner.config.image_fs else {
        return Ok(false);
    };
    let usage = disk::usage(fs)?;
    let policy = inner.config.images;
    let Some(wanted) = policy.bytes_to_free(usage) else {
        return Ok(false);
    };
    let _pass = inner.image_pass.lock().await;
    tracing::info!(
        usage = usage.usage_percent(),
        high_threshold = policy.high_threshold_percent,
        amount_to_free = wanted,
        low_threshold = policy.low_threshold_percent,
        "Disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold"
    );
    let deleted = free(inner, wanted).await?;
    let freed: u64 = deleted.iter().map(|d| d.size_bytes).sum();
    report_freed(inner, &deleted, freed).await;
    if freed < wanted {
        let err = GcError::NotEnoughFreed { wanted, freed };
        if let Some(events) = &inner.events {
            events
                .record(true, "FreeDiskSpaceFailed", &err.to_string())
                .await;
        }
        return Err(err);
    }
    Ok(true)
}

/// The maximum-age pass (upstream's `freeOldImages`), with the use recording it needs.
async fn detect(inner: &Inner) -> Result<(), GcError> {
    let _pass = inner.image_pass.lock().await;
    let states = observe(inner).await?;
    let old = plan_old_images(&states, Timestamp::now(), inner.config.images.maximum_age);
    let deleted = apply(inner, old).await;
    let freed = deleted.iter().map(|d| d.size_bytes).sum();
    report_freed(inner, &deleted, freed).await;
    Ok(())
}

/// The image loop: use recorded every 30 s, the filesystem checked every 10 s; a pass that
/// failed twice in a row raises `ImageGCFailed` (as the kubelet does) and the next try waits
/// 5 minutes.
pub(super) async fn run(inner: Arc<Inner>, shutdown: CancellationToken) {
    let mut tick = period(CHECK_PERIOD);
    let mut last_detect: Option<Instant> = None;
    let mut retry_at: Option<Instant> = None;
    let mut failed_before = false;
    loop {
        tokio::select! { _ = tick.tick() => {}, _ = shutdown.cancelled() => return }
        let now = Instant::now();
        if last_detect.is_none_or(|t| now.duration_since(t) >= DETECT_PERIOD) {
            last_detect = Some(now);
            if let Err(e) = detect(&inner).await {
                tracing::warn!(error = %e, "recording image use failed");
            }
        }
        if retry_at.is_some_and(|t| now < t) {
            continue;
        }
        match collect(&inner).await {
            Ok(_) => {
                failed_before = false;
                retry_at = None;
            }
            Err(e) => {
                retry_at = Some(now + RETRY_PERIOD);
                if failed_before {
                    if let Some(events) = &inner.events {
                        events.record(true, "ImageGCFailed", &e.to_string()).await;
                    }
                } else {
                    tracing::warn!(error = %e, "image garbage collection failed");
                }
                failed_before = true;
            }
        }
    }
}
