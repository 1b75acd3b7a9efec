//! Which images to delete, as the kubelet's image manager decides it: unused images (no
//! container of any state refers to them, not pinned) least recently used first — ties broken by
//! when they were first detected — skipping those younger than `--image-minimum-gc-age`, until
//! the bytes asked for are freed; and, with `--image-maximum-gc-age`, every unused image not
//! used for that long. The trigger is upstream's arithmetic on the image filesystem: over the
//! high threshold, free down to the low one.
//!
//! Worked example: a 1000-byte filesystem with 130 bytes available is 87% used; with a high
//! threshold of 85% and a low one of 80% the goal is 1000 × (100 − 80) / 100 − 130 = 70 bytes.
//!
//! Planner: pure, no I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;

/// The image filesystem's size and free space, in bytes (statfs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskUsage {
    pub capacity: u64,
    pub available: u64,
}

impl DiskUsage {
    /// `100 - available * 100 / capacity`, as upstream rounds it.
    pub fn usage_percent(&self) -> u64 {
        if self.capacity == 0 {
            return 0;
        }
        100 - (self.available.min(self.capacity) * 100 / self.capacity)
    }
}

/// `--image-gc-high-threshold`, `--image-gc-low-threshold`, `--image-minimum-gc-age`,
/// `--image-maximum-gc-age`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageGcPolicy {
    pub high_threshold_percent: u8,
    pub low_threshold_percent: u8,
    pub minimum_age: Duration,
    /// `None`: off (the flag's `0`).
    pub maximum_age: Option<Duration>,
}

impl Default for ImageGcPolicy {
    /// The kubelet's defaults: 85 / 80, 2 minutes, no maximum age.
    fn default() -> Self {
        ImageGcPolicy {
            high_threshold_percent: 85,
            low_threshold_percent: 80,
            minimum_age: Duration::from_secs(120),
            maximum_age: None,
        }
    }
}

impl ImageGcPolicy {
    /// Upstream's validation: thresholds within 0–100, low not above high.
    pub fn validate(&self) -> Result<(), String> {
        let (high, low) = (self.high_threshold_percent, self.low_threshold_percent);
        if high > 100 {
            return Err(format!(
                "invalid HighThresholdPercent {high}, must be in range [0-100]"
            ));
        }
        if low > 100 {
            return Err(format!(
                "invalid LowThresholdPercent {low}, must be in range [0-100]"
            ));
        }
        if low > high {
            return Err(format!(
                "LowThresholdPercent {low} can not be higher than HighThresholdPercent {high}"
            ));
        }
        Ok(())
    }

    /// Bytes to free when usage reached the high threshold (`None`: below it, or GC is off at
    /// a high threshold of 100%).
    pub fn bytes_to_free(&self, disk: DiskUsage) -> Option<u64> {
        if self.high_threshold_percent >= 100 || disk.capacity == 0 {
            return None;
        }
        if disk.usage_percent() < u64::from(self.high_threshold_percent) {
            return None;
        }
        let goal = u128::from(disk.capacity) * u128::from(100 - self.low_threshold_percent) / 100;
        Some(
            u64::try_from(goal)
                .unwrap_or(u64::MAX)
                .saturating_sub(disk.available),
        )
    }
}

/// One image (all the names pointing at one manifest or index) as the collector knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageState {
    /// The digest the names point at.
    pub id: String,
    pub names: Vec<String>,
    pub size_bytes: u64,
    pub first_detected: Timestamp,
    /// When a container was last seen using it; `None`: never seen in use.
    pub last_used: Option<Timestamp>,
    /// A container (running or not) refers to it now.
    pub in_use: bool,
    /// `io.cri-containerd.pinned=pinned` (or the sandbox image): never collected.
    pub pinned: bool,
}

/// An image to delete and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deletion {
    pub id: String,
    pub names: Vec<String>,
    pub size_bytes: u64,
}

impl Deletion {
    fn of(i: &ImageState) -> Deletion {
        Deletion {
            id: i.id.clone(),
            names: i.names.clone(),
            size_bytes: i.size_bytes,
        }
    }
}

/// The unused images in the order they go: never-used first, then least recently used, ties
/// by first detection, then by id (a stable order).
fn candidates(images: &[ImageState]) -> Vec<&ImageState> {
    let mut out: Vec<&ImageState> = images.iter().filter(|i| !i.in_use && !i.pinned).collect();
    out.sort_by(|a, b| {
        (a.last_used, a.first_detected, &a.id).cmp(&(b.last_used, b.first_detected, &b.id))
    });
    out
}

/// Images to delete to free `bytes` (upstream's `freeSpace`): the eligible ones in LRU order
/// until their sizes add up to `bytes`. Fewer may be returned when not enough are eligible.
pub fn plan_free_space(
    images: &[ImageState],
    now: Timestamp,
    minimum_age: Duration,
    bytes: u64,
) -> Vec<Deletion> {
    let mut freed = 0u64;
    let mut out = Vec::new();
    for i in candidates(images) {
        if freed >= bytes {
            break;
        }
        if age(now, i.first_detected) < minimum_age {
            continue;
        }
        freed = freed.saturating_add(i.size_bytes);
        out.push(Deletion::of(i));
    }
    out
}

/// Unused images not used for longer than `maximum_age` (upstream's
/// `freeOldImages`); measured from the last use, or from detection for an image never used.
pub fn plan_old_images(
    images: &[ImageState],
    now: Timestamp,
    maximum_age: Option<Duration>,
) -> Vec<Deletion> {
    let Some(max) = maximum_age.filter(|m| !m.is_zero()) else {
        return Vec::new();
    };
    candidates(images)
        .into_iter()
        .filter(|i| age(now, i.last_used.unwrap_or(i.first_detected)) > max)
        .map(Deletion::of)
        .collect()
}

fn age(now: Timestamp, since: Timestamp) -> Duration {
    now.duration_since(since)
        .try_into()
        .unwrap_or(Duration::ZERO)
}

/// An image record as containerd lists it, with what the collector saw of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedImage {
    pub name: String,
    pub id: String,
    pub size_bytes: u64,
    pub created_at: Option<Timestamp>,
    pub pinned: bool,
}

/// First-detected and last-used times per image id, kept across passes (upstream's
/// `imageRecords`). An image's first detection is its record's creation when containerd
/// knows it (a restarted agent does not make every image young again), else the pass that saw
/// it first.
#[derive(Clone, Debug, Default)]
pub struct ImageRecords {
    records: BTreeMap<String, (Timestamp, Option<Timestamp>)>,
}

impl ImageRecords {
    /// Folds one observation in: `used` holds the image names and ids containers refer to.
    /// Records of images that are gone are dropped. Returns every image's state.
    pub fn observe(
        &mut self,
        images: &[ObservedImage],
        used: &BTreeSet<String>,
        now: Timestamp,
    ) -> Vec<ImageState> {
        let mut by_id: BTreeMap<&str, ImageState> = BTreeMap::new();
        for i in images {
            let s = by_id.entry(&i.id).or_insert_with(|| ImageState {
                id: i.id.clone(),
                names: Vec::new(),
                size_bytes: i.size_bytes,
                first_detected: now,
                last_used: None,
                in_use: false,
                pinned: false,
            });
            s.names.push(i.name.clone());
            s.size_bytes = s.size_bytes.max(i.size_bytes);
            s.pinned |= i.pinned;
            s.in_use |= used.contains(&i.name) || used.contains(&i.id);
            if let Some(c) = i.created_at {
                s.first_detected = s.first_detected.min(c.min(now));
            }
        }
        self.records.retain(|id, _| by_id.contains_key(id.as_str()));
        let mut out = Vec::new();
        for (id, mut s) in by_id {
            let rec = self
                .records
                .entry(id.to_string())
                .or_insert((s.first_detected, None));
            if s.in_use {
                rec.1 = Some(now);
            }
            s.first_detected = rec.0;
            s.last_used = rec.1;
            out.push(s);
        }
        out
    }

    /// Forgets a deleted image.
    pub fn forget(&mut self, id: &str) {
        self.records.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn image(id: &str, size: u64, detected: i64, used: Option<i64>) -> ImageState {
        ImageState {
            id: id.into(),
            names: vec![format!("docker.io/library/{id}:1")],
            size_bytes: size,
            first_detected: t(detected),
            last_used: used.map(t),
            in_use: false,
            pinned: false,
        }
    }

    /// `i`, used by a container now.
    fn in_use(i: ImageState) -> ImageState {
        ImageState { in_use: true, ..i }
    }

    fn ids(d: &[Deletion]) -> Vec<&str> {
        d.iter().map(|d| d.id.as_str()).collect()
    }

    #[test]
    fn the_trigger_frees_down_to_the_low_threshold_once_usage_reaches_the_high_one() {
        let policy = ImageGcPolicy::default();
        let cases = [
            (1000, 130, Some(70), "87% used: down to 80%"),
            (1000, 150, Some(50), "exactly 85%"),
            // 100 - 151 * 100 / 1000 = 85: upstream's integer arithmetic rounds usage up.
            (1000, 151, Some(49), "84.9% counts as 85%"),
            (1000, 161, None, "83% used"),
            (0, 0, None, "no capacity known"),
        ];
        for (capacity, available, want, what) in cases {
            let got = policy.bytes_to_free(DiskUsage {
                capacity,
                available,
            });
            assert_eq!(got, want, "{what}");
        }
        let off = ImageGcPolicy {
            high_threshold_percent: 100,
            ..policy
        };
        assert_eq!(
            off.bytes_to_free(DiskUsage {
                capacity: 1000,
                available: 0
            }),
            None,
            "a high threshold of 100% turns GC off"
        );
    }

    #[test]
    fn thresholds_are_validated_as_upstream() {
        let bad = ImageGcPolicy {
            high_threshold_percent: 70,
            low_threshold_percent: 80,
            ..ImageGcPolicy::default()
        };
        assert_eq!(
            bad.validate().unwrap_err(),
            "LowThresholdPercent 80 can not be higher than HighThresholdPercent 70"
        );
        assert!(ImageGcPolicy::default().validate().is_ok());
    }

    #[test]
    fn unused_images_go_least_recently_used_first_until_enough_is_freed() {
        let images = vec![
            image("recent", 100, 0, Some(40)),
            image("old", 100, 0, Some(10)),
            image("never", 100, 5, None),
            in_use(image("used", 100, 0, Some(50))),
            ImageState {
                pinned: true,
                ..image("pinned", 100, 0, None)
            },
        ];
        let cases = [
            (1, vec!["never"]),
            (100, vec!["never"]),
            (101, vec!["never", "old"]),
            (10_000, vec!["never", "old", "recent"]),
            (0, vec![]),
        ];
        for (bytes, want) in cases {
            let got = plan_free_space(&images, t(1000), Duration::from_secs(120), bytes);
            assert_eq!(ids(&got), want, "{bytes} bytes");
        }
    }

    #[test]
    fn ties_in_use_go_to_the_image_detected_first() {
        let images = vec![
            image("b", 10, 2, None),
            image("a", 10, 3, None),
            image("c", 10, 1, None),
        ];
        let got = plan_free_space(&images, t(1000), Duration::ZERO, 15);
        assert_eq!(ids(&got), vec!["c", "b"]);
    }

    #[test]
    fn images_younger_than_the_minimum_age_are_skipped() {
        let images = vec![image("young", 10, 950, None), image("old", 10, 0, Some(5))];
        let got = plan_free_space(&images, t(1000), Duration::from_secs(120), 100);
        assert_eq!(ids(&got), vec!["old"]);
    }

    #[test]
    fn the_maximum_age_removes_images_unused_for_longer() {
        let images = vec![
            in_use(image("busy", 10, 0, Some(0))),
            image("stale", 10, 0, Some(100)),
            image("fresh", 10, 0, Some(900)),
            image("never", 10, 200, None),
        ];
        let max = Some(Duration::from_secs(600));
        assert_eq!(
            ids(&plan_old_images(&images, t(1000), max)),
            vec!["never", "stale"]
        );
        assert!(plan_old_images(&images, t(1000), None).is_empty());
        assert!(plan_old_images(&images, t(1000), Some(Duration::ZERO)).is_empty());
    }

    #[test]
    fn records_remember_first_detection_and_last_use_and_drop_gone_images() {
        let obs = |name: &str, id: &str, created: Option<i64>| ObservedImage {
            name: name.into(),
            id: id.into(),
            size_bytes: 7,
            created_at: created.map(t),
            pinned: false,
        };
        let mut r = ImageRecords::default();
        let used = BTreeSet::from(["a:1".to_string()]);
        let images = vec![
            obs("a:1", "A", Some(5)),
            obs("a:latest", "A", None),
            obs("b:1", "B", None),
        ];
        let s = r.observe(&images, &used, t(100));
        assert_eq!(s.len(), 2, "two names of one image are one image");
        assert_eq!(s[0].names, vec!["a:1", "a:latest"]);
        assert_eq!(
            (s[0].first_detected, s[0].last_used, s[0].in_use),
            (t(5), Some(t(100)), true)
        );
        assert_eq!((s[1].first_detected, s[1].last_used), (t(100), None));
        // Later: A is no longer used (its last use stays), B went away.
        let s = r.observe(&images[..2], &BTreeSet::new(), t(200));
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].last_used, s[0].in_use), (Some(t(100)), false));
        let s = r.observe(&images, &BTreeSet::new(), t(300));
        assert_eq!(s[1].first_detected, t(300), "B came back: detected anew");
    }
}
