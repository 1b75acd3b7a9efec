//! The seam between the resource metrics the API server scrapes and the controllers that read
//! them (the HorizontalPodAutoscaler): here, below both, so neither depends on the other.

/// Where the autoscaler reads a pod's usage: by container, CPU in nanocores and memory in
/// bytes, over the last metrics window (the controller's resource metrics scraper).
pub trait PodUsage: Send + Sync + 'static {
    fn pod_usage(&self, namespace: &str, pod: &str) -> Option<Vec<(String, u64, u64)>>;
}
