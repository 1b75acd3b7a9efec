//! containerd's image records and snapshots for the image service: get/list/put/delete of
//! image records, snapshot lookups, and unpacking a layer into a committed snapshot named by
//! its chain id (Prepare → Diff.Apply → Commit).

use std::collections::{BTreeMap, HashMap};

use containerd_client::services::v1::images_client::ImagesClient;
use containerd_client::services::v1::snapshots::{
    CommitSnapshotRequest, ListSnapshotsRequest, PrepareSnapshotRequest, RemoveSnapshotRequest,
    StatSnapshotRequest,
};
use containerd_client::services::v1::{
    ApplyRequest, CreateImageRequest, DeleteImageRequest, GetImageRequest, Image,
    ListImagesRequest, UpdateImageRequest,
};
use containerd_client::tonic::Code;
use containerd_client::tonic::transport::Channel;
use containerd_client::types::Descriptor;
use futures::StreamExt;
use jiff::Timestamp;
use prost_types::FieldMask;

use super::containerd::{Connection, found, grpc_error, timestamp};
use super::{BlobDescriptor, Lease, Runtime, RuntimeError};

/// An image record: a name pointing at a manifest or index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRecord {
    pub name: String,
    pub target: BlobDescriptor,
    pub labels: BTreeMap<String, String>,
    pub created_at: Option<Timestamp>,
    pub updated_at: Option<Timestamp>,
}

pub(crate) fn to_descriptor(d: &BlobDescriptor) -> Descriptor {
    Descriptor {
        media_type: d.media_type.clone(),
        digest: d.digest.clone(),
        size: d.size,
        annotations: HashMap::new(),
    }
}

fn from_image(image: Image) -> ImageRecord {
    let target = image.target.unwrap_or_default();
    ImageRecord {
        name: image.name,
        target: BlobDescriptor {
            media_type: target.media_type,
            digest: target.digest,
            size: target.size,
        },
        labels: image.labels.into_iter().collect(),
        created_at: timestamp(image.created_at),
        updated_at: timestamp(image.updated_at),
    }
}

/// The images service of `c`'s containerd.
fn images(c: &Connection) -> ImagesClient<Channel> {
    ImagesClient::new(c.channel.clone())
}

impl Runtime {
    pub async fn image_get(&self, name: &str) -> Result<Option<ImageRecord>, RuntimeError> {
        let c = &self.conn;
        let what = format!("image {name}");
        let request = c.req(GetImageRequest {
            name: name.to_string(),
        });
        let got = found(images(c).get(request).await, "get image", &what)?;
        Ok(got.and_then(|r| r.image).map(from_image))
    }

    pub async fn image_list(&self) -> Result<Vec<ImageRecord>, RuntimeError> {
        let c = &self.conn;
        let mut client = images(c);
        let images = client
            .list(c.req(ListImagesRequest { filters: vec![] }))
            .await
            .map_err(|s| grpc_error("list images", "images", s))?
            .into_inner()
            .images;
        Ok(images.into_iter().map(from_image).collect())
    }

    /// Creates the image record, or points an existing one at `target`.
    pub async fn image_put(
        &self,
        lease: &Lease,
        name: &str,
        target: &BlobDescriptor,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), RuntimeError> {
        let c = &self.conn;
        let mut client = images(c);
        let image = Image {
            name: name.to_string(),
            labels: labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            target: Some(to_descriptor(target)),
            ..Default::default()
        };
        let what = format!("image {name}");
        match client
            .create(c.req_lease(
                CreateImageRequest {
                    image: Some(image.clone()),
                    source_date_epoch: None,
                },
                &lease.0,
            )?)
            .await
        {
            Ok(_) => Ok(()),
            Err(s) if s.code() == Code::AlreadyExists => {
                let mut paths = vec!["target".to_string()];
                paths.extend(labels.keys().map(|k| format!("labels.{k}")));
                client
                    .update(c.req_lease(
                        UpdateImageRequest {
                            image: Some(image),
                            update_mask: Some(FieldMask { paths }),
                            source_date_epoch: None,
                        },
                        &lease.0,
                    )?)
                    .await
                    .map_err(|s| grpc_error("update image", &what, s))?;
                Ok(())
            }
            Err(s) => Err(grpc_error("create image", &what, s)),
        }
    }

    /// Deletes an image record (its content is then garbage); absent is fine.
    pub async fn image_delete(&self, name: &str, sync: bool) -> Result<(), RuntimeError> {
        let c = &self.conn;
        let request = c.req(DeleteImageRequest {
            name: name.to_string(),
            sync,
            target: None,
        });
        let what = format!("image {name}");
        found(images(c).delete(request).await, "delete image", &what)?;
        Ok(())
    }

    /// Whether the snapshotter has a snapshot named `key` (e.g. a layer's chain id).
    pub async fn snapshot_exists(&self, key: &str) -> Result<bool, RuntimeError> {
        let c = &self.conn;
        let request = c.req(StatSnapshotRequest {
            snapshotter: c.opts.snapshotter.clone(),
            key: key.to_string(),
        });
        let answer = c.snapshots().stat(request).await;
        Ok(found(answer, "stat snapshot", &format!("snapshot {key}"))?.is_some())
    }

    /// Every snapshot key in the namespace (for tests and cleanup checks).
    pub async fn snapshot_keys(&self) -> Result<Vec<String>, RuntimeError> {
        let c = &self.conn;
        let mut stream = c
            .snapshots()
            .list(c.req(ListSnapshotsRequest {
                snapshotter: c.opts.snapshotter.clone(),
                filters: vec![],
            }))
            .await
            .map_err(|s| grpc_error("list snapshots", "snapshots", s))?
            .into_inner();
        let mut keys = Vec::new();
        while let Some(resp) = stream.next().await {
            let resp = resp.map_err(|s| grpc_error("list snapshots", "snapshots", s))?;
            keys.extend(resp.info.into_iter().map(|i| i.name));
        }
        Ok(keys)
    }

    /// Unpacks one layer on top of `parent` into the committed snapshot `chain_id`: Prepare,
    /// Diff.Apply (which decompresses and handles whiteouts), check the applied digest against
    /// `diff_id`, Commit. Losing a race to another unpack of the same layer is success.
    pub async fn unpack_layer(
        &self,
        lease: &Lease,
        parent: Option<&str>,
        chain_id: &str,
        layer: &BlobDescriptor,
        diff_id: &str,
    ) -> Result<(), RuntimeError> {
        let c = &self.conn;
        let snapshotter = c.opts.snapshotter.clone();
        let key = format!(
            "extract-{}-{}-{}",
            std::process::id(),
            Timestamp::now().as_nanosecond(),
            chain_id
        );
        let what = format!("layer {}", layer.digest);
        let mounts = c
            .snapshots()
            .prepare(c.req_lease(
                PrepareSnapshotRequest {
                    snapshotter: snapshotter.clone(),
                    key: key.clone(),
                    parent: parent.unwrap_or_default().to_string(),
                    labels: HashMap::from([(
                        "containerd.io/snapshot.ref".to_string(),
                        chain_id.to_string(),
                    )]),
                },
                &lease.0,
            )?)
            .await
            .map_err(|s| grpc_error("prepare snapshot", &what, s))?
            .into_inner()
            .mounts;
        let result = async {
            let mut diff =
                containerd_client::services::v1::diff_client::DiffClient::new(c.channel.clone());
            let applied = diff
                .apply(c.req_lease(
                    ApplyRequest {
                        diff: Some(to_descriptor(layer)),
                        mounts,
                        payloads: HashMap::new(),
                        sync_fs: false,
                    },
                    &lease.0,
                )?)
                .await
                .map_err(|s| grpc_error("apply diff", &what, s))?
                .into_inner()
                .applied
                .unwrap_or_default();
            if applied.digest != diff_id {
                return Err(RuntimeError::InvalidConfig(format!(
                    "{what} unpacked to {} but the image config says {diff_id}",
                    applied.digest
                )));
            }
            match c
                .snapshots()
                .commit(c.req_lease(
                    CommitSnapshotRequest {
                        snapshotter: snapshotter.clone(),
                        name: chain_id.to_string(),
                        key: key.clone(),
                        labels: HashMap::new(),
                    },
                    &lease.0,
                )?)
                .await
            {
                Ok(_) => Ok(false),
                Err(s) if s.code() == Code::AlreadyExists => Ok(true),
                Err(s) => Err(grpc_error("commit snapshot", &what, s)),
            }
        }
        .await;
        // The active key is consumed by a successful commit; otherwise remove it.
        if !matches!(result, Ok(false)) {
            let _ = c
                .snapshots()
                .remove(c.req(RemoveSnapshotRequest { snapshotter, key }))
                .await;
        }
        result.map(|_| ())
    }
}
