//! What a container's writable layer holds: the snapshotter's usage of the container's rootfs
//! snapshot (its key is the container id), as the kubelet's stats read a container's `rootfs`.

use super::Runtime;
use super::containerd::found;
use containerd_client::services::v1::snapshots::UsageRequest;

impl Runtime {
    /// (bytes, inodes) the writable layer of the container with snapshot `key` uses; `None`
    /// when the snapshot is gone.
    pub async fn snapshot_usage(
        &self,
        key: &str,
    ) -> Result<Option<(i64, i64)>, super::RuntimeError> {
        let c = &self.conn;
        let request = c.req(UsageRequest {
            snapshotter: c.opts.snapshotter.clone(),
            key: key.to_string(),
        });
        let answer = c.snapshots().usage(request).await;
        let usage = found(answer, "snapshot usage", &format!("snapshot {key}"))?;
        Ok(usage.map(|u| (u.size, u.inodes)))
    }
}
