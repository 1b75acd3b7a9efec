//! The containerd label schema of pod containers: what a worker writes on every container
//! attempt it creates, and how the worker, the manager and the log/exec backend read it back.
//!
//! These labels are the agent's memory: a restarted agent rebuilds each pod's attempts (restart
//! and sandbox numbers, the image the spec asked for, the crash-loop back-off entry) from them
//! alone, so changing a key or a format breaks adoption of running containers.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;

use super::restart::Backoff;

pub const LABEL_POD_UID: &str = "io.berth.pod.uid";
pub const LABEL_POD_NAME: &str = "io.berth.pod.name";
pub const LABEL_POD_NAMESPACE: &str = "io.berth.pod.namespace";
pub const LABEL_CONTAINER: &str = "io.berth.container.name";
pub const LABEL_RESTART: &str = "io.berth.container.restart";
pub const LABEL_SANDBOX: &str = "io.berth.container.sandbox";
pub const LABEL_SPEC_IMAGE: &str = "io.berth.container.spec-image";
pub const LABEL_IMAGE_ID: &str = "io.berth.container.image-id";
pub const LABEL_BACKOFF_DELAY: &str = "io.berth.backoff.delay-ms";
pub const LABEL_BACKOFF_SINCE: &str = "io.berth.backoff.since";
pub const LABEL_TERMINATION_LOG: &str = "io.berth.container.termination-log";

/// A container's labels as containerd returns them.
pub type Labels = BTreeMap<String, String>;

/// Everything recorded on a new container attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptLabels<'a> {
    pub pod_uid: &'a str,
    pub pod_name: &'a str,
    pub pod_namespace: &'a str,
    pub container: &'a str,
    pub restart: u32,
    pub sandbox: u32,
    /// The image as the pod spec spells it (an in-place image update is detected against it).
    pub spec_image: &'a str,
    /// `repository@digest` of the image the attempt runs.
    pub image_id: String,
    /// The host file behind the container's terminationMessagePath.
    pub termination_log: &'a Path,
    /// The crash-loop back-off entry the attempt was started under.
    pub backoff: Option<Backoff>,
}

impl AttemptLabels<'_> {
    /// The label map handed to containerd.
    pub fn to_labels(&self) -> Labels {
        let mut labels = Labels::new();
        let mut put = |k: &str, v: String| {
            labels.insert(k.to_string(), v);
        };
        put(LABEL_POD_UID, self.pod_uid.to_string());
        put(LABEL_POD_NAME, self.pod_name.to_string());
        put(LABEL_POD_NAMESPACE, self.pod_namespace.to_string());
        put(LABEL_CONTAINER, self.container.to_string());
        put(LABEL_RESTART, self.restart.to_string());
        put(LABEL_SANDBOX, self.sandbox.to_string());
        put(LABEL_SPEC_IMAGE, self.spec_image.to_string());
        put(LABEL_IMAGE_ID, self.image_id.clone());
        put(
            LABEL_TERMINATION_LOG,
            self.termination_log.display().to_string(),
        );
        if let Some(b) = self.backoff {
            put(LABEL_BACKOFF_DELAY, b.delay.as_millis().to_string());
            put(LABEL_BACKOFF_SINCE, b.since.to_string());
        }
        labels
    }
}

/// The uid of the pod the container belongs to.
pub fn pod_uid(labels: &Labels) -> Option<&str> {
    labels.get(LABEL_POD_UID).map(String::as_str)
}

/// The container's name in the pod spec.
pub fn container_name(labels: &Labels) -> Option<&str> {
    labels.get(LABEL_CONTAINER).map(String::as_str)
}

/// The attempt's restart number.
pub fn restart_index(labels: &Labels) -> Option<u32> {
    labels.get(LABEL_RESTART).and_then(|v| v.parse().ok())
}

/// The sandbox generation the attempt ran in.
pub fn sandbox_attempt(labels: &Labels) -> Option<u32> {
    labels.get(LABEL_SANDBOX).and_then(|v| v.parse().ok())
}

/// The back-off entry the attempt was started under; both halves must be present and valid.
pub fn backoff(labels: &Labels) -> Option<Backoff> {
    let ms = labels.get(LABEL_BACKOFF_DELAY)?.parse::<u64>().ok()?;
    let since = labels.get(LABEL_BACKOFF_SINCE)?.parse::<Timestamp>().ok()?;
    Some(Backoff {
        delay: Duration::from_millis(ms),
        since,
    })
}

/// Whether the labels are those of attempt `restart` of container `container` in pod `uid`.
pub fn is_attempt(labels: &Labels, uid: &str, container: &str, restart: u32) -> bool {
    pod_uid(labels) == Some(uid)
        && container_name(labels) == Some(container)
        && restart_index(labels) == Some(restart)
}

/// Whether the labels are those of container `container` of pod `namespace/name`.
pub fn is_container_of(labels: &Labels, namespace: &str, name: &str, container: &str) -> bool {
    labels.get(LABEL_POD_NAMESPACE).map(String::as_str) == Some(namespace)
        && labels.get(LABEL_POD_NAME).map(String::as_str) == Some(name)
        && container_name(labels) == Some(container)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(backoff: Option<Backoff>) -> Labels {
        AttemptLabels {
            pod_uid: "u1",
            pod_name: "web",
            pod_namespace: "default",
            container: "app",
            restart: 3,
            sandbox: 1,
            spec_image: "busybox:1.28",
            image_id: "docker.io/library/busybox@sha256:abc".into(),
            termination_log: Path::new("/var/lib/berth/agent/pods/u1/t"),
            backoff,
        }
        .to_labels()
    }

    #[test]
    fn an_attempt_reads_back_what_was_written() {
        let since = Timestamp::from_second(1_700_000_000).unwrap();
        let b = Backoff {
            delay: Duration::from_secs(20),
            since,
        };
        let l = attempt(Some(b));
        assert_eq!(pod_uid(&l), Some("u1"));
        assert_eq!(container_name(&l), Some("app"));
        assert_eq!(restart_index(&l), Some(3));
        assert_eq!(sandbox_attempt(&l), Some(1));
        assert_eq!(backoff(&l), Some(b));
        assert!(is_attempt(&l, "u1", "app", 3));
        assert!(!is_attempt(&l, "u1", "app", 2));
        assert!(is_container_of(&l, "default", "web", "app"));
    }

    #[test]
    fn an_attempt_without_back_off_has_no_back_off_labels() {
        let l = attempt(None);
        assert!(!l.contains_key(LABEL_BACKOFF_DELAY) && !l.contains_key(LABEL_BACKOFF_SINCE));
        assert_eq!(backoff(&l), None);
    }

    #[test]
    fn a_half_written_back_off_entry_is_no_entry() {
        let mut l = attempt(None);
        l.insert(LABEL_BACKOFF_DELAY.into(), "10000".into());
        assert_eq!(backoff(&l), None);
    }
}
