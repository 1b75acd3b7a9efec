//! What a container's writable layer holds: the snapshotter's usage of the container's rootfs
//! snapshot (its key is the container id), as the kubelet's stats read a container's `rootfs`.

use super::Runtime;
use super::containerd::grpc_error;
use containerd_client::services::v1::snapshots::UsageRequest;
use containerd_client::tonic::Code;

impl Runtime {
    /// (bytes, inodes) the writable layer of the container with snapshot `key` uses; `None`
    /// when the snapshot is gone.
    pub async fn snapshot_usage(
        &self,
        key: &str,
    ) -> Result<Option<(i64, i64)>, super::RuntimeError> {
        let c = &self.conn;
        match c
            .snapshots()
            .usage(c.req(UsageRequest {
                snapshotter: c.opts.snapshotter.clone(),
                key: key.to_string(),
            }))
            .await
        {
            Ok(r) => {
                let u = r.into_inner();
                Ok(Some((u.size, u.inodes)))
            }
            Err(s) if s.code() == Code::NotFound => Ok(None),
            Err(s) => Err(grpc_error("snapshot usage", &format!("snapshot {key}"), s)),
        }
    }
}
