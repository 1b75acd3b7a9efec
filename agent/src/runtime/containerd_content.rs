//! containerd's content store and leases, as narrow calls for the image service (containerd
//! 1.6 has no Transfer service, so pulls are done by hand; records and unpacking are in
//! `containerd_images.rs`).
//!
//! Content.Write is a bidirectional stream in which the server answers every message, so the
//! messages are sent from a spawned task while the answers are drained here. The final
//! `Commit` carries the labels; containerd checks size and digest there.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bytes::Bytes;
use containerd_client::services::v1::{
    AbortRequest, CreateRequest, DeleteRequest, InfoRequest, ReadContentRequest, UpdateRequest,
    WriteAction, WriteContentRequest,
};
use containerd_client::services::v1::{Info as ContentInfo, content_client::ContentClient};
use containerd_client::tonic::Code;
use futures::{Stream, StreamExt};
use jiff::Timestamp;
use prost_types::FieldMask;
use tokio_stream::wrappers::ReceiverStream;

use super::containerd::{Connection, found, grpc_error};
use super::{Runtime, RuntimeError};

/// Chunks sent per Content.Write message (the server's default limit is 4 MiB).
const WRITE_CHUNK: usize = 1024 * 1024;

/// A containerd lease: resources created under it are safe from GC until it is deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease(pub(crate) String);

impl Lease {
    pub fn id(&self) -> &str {
        &self.0
    }
}

/// A content descriptor (media type, digest, size).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlobDescriptor {
    pub media_type: String,
    pub digest: String,
    pub size: i64,
}

/// What the content store knows about a blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobInfo {
    pub digest: String,
    pub size: i64,
    pub labels: BTreeMap<String, String>,
}

impl Connection {
    fn content(&self) -> ContentClient<containerd_client::tonic::transport::Channel> {
        ContentClient::new(self.channel.clone())
    }

    fn leases(
        &self,
    ) -> containerd_client::services::v1::leases_client::LeasesClient<
        containerd_client::tonic::transport::Channel,
    > {
        containerd_client::services::v1::leases_client::LeasesClient::new(self.channel.clone())
    }

    /// A lease that containerd's GC drops by itself after `expire` (in case we crash).
    pub(crate) async fn lease_create(&self, expire: Duration) -> Result<String, RuntimeError> {
        let expire_at = Timestamp::now()
            .checked_add(jiff::SignedDuration::try_from(expire).unwrap_or_default())
            .unwrap_or_else(|_| Timestamp::now());
        let id = format!(
            "berth-{}-{}",
            std::process::id(),
            Timestamp::now().as_nanosecond()
        );
        self.leases()
            .create(self.req(CreateRequest {
                id: id.clone(),
                labels: HashMap::from([(
                    "containerd.io/gc.expire".to_string(),
                    expire_at.to_string(),
                )]),
            }))
            .await
            .map_err(|s| grpc_error("create lease", &format!("lease {id}"), s))?;
        Ok(id)
    }

    pub(crate) async fn lease_delete(&self, id: &str) -> Result<(), RuntimeError> {
        let request = self.req(DeleteRequest {
            id: id.to_string(),
            sync: false,
        });
        let answer = self.leases().delete(request).await;
        found(answer, "delete lease", &format!("lease {id}"))?;
        Ok(())
    }
}

fn info(i: ContentInfo) -> BlobInfo {
    BlobInfo {
        digest: i.digest,
        size: i.size,
        labels: i.labels.into_iter().collect(),
    }
}

impl Runtime {
    /// Creates a lease that expires by itself after `expire`.
    pub async fn lease_create(&self, expire: Duration) -> Result<Lease, RuntimeError> {
        self.conn.lease_create(expire).await.map(Lease)
    }

    /// Deletes a lease; with `sync`, containerd collects garbage before answering.
    pub async fn lease_delete(&self, lease: &Lease, sync: bool) -> Result<(), RuntimeError> {
        let c = &self.conn;
        let request = c.req(DeleteRequest {
            id: lease.0.clone(),
            sync,
        });
        let answer = c.leases().delete(request).await;
        found(answer, "delete lease", &format!("lease {}", lease.0))?;
        Ok(())
    }

    /// The content store's record of `digest`, if present.
    pub async fn content_info(&self, digest: &str) -> Result<Option<BlobInfo>, RuntimeError> {
        let c = &self.conn;
        let request = c.req(InfoRequest {
            digest: digest.to_string(),
        });
        let answer = c.content().info(request).await;
        let got = found(answer, "content info", &format!("blob {digest}"))?;
        Ok(got.and_then(|r| r.info).map(info))
    }

    /// Reads a whole blob (manifests, configs: small things).
    pub async fn content_read(&self, digest: &str) -> Result<Vec<u8>, RuntimeError> {
        let c = &self.conn;
        let what = format!("blob {digest}");
        let mut stream = c
            .content()
            .read(c.req(ReadContentRequest {
                digest: digest.to_string(),
                offset: 0,
                size: 0,
            }))
            .await
            .map_err(|s| grpc_error("read content", &what, s))?
            .into_inner();
        let mut out = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|s| grpc_error("read content", &what, s))?;
            out.extend_from_slice(&chunk.data);
        }
        Ok(out)
    }

    /// Writes a blob from `data` under `lease` and returns its digest. `expected` (digest and
    /// size) is checked by containerd at commit when given; `labels` are set at commit. A blob
    /// that is already there counts as written.
    pub async fn content_write<S>(
        &self,
        lease: &Lease,
        expected: Option<&BlobDescriptor>,
        labels: BTreeMap<String, String>,
        data: S,
    ) -> Result<String, RuntimeError>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
    {
        let c = &self.conn;
        let reference = format!(
            "berth-write-{}-{}",
            std::process::id(),
            Timestamp::now().as_nanosecond()
        );
        let (total, digest) = expected
            .map(|d| (d.size, d.digest.clone()))
            .unwrap_or((0, String::new()));
        let what = format!(
            "blob {}",
            if digest.is_empty() {
                &reference
            } else {
                &digest
            }
        );
        let (tx, rx) = tokio::sync::mpsc::channel::<WriteContentRequest>(4);
        let (fail_tx, mut fail_rx) = tokio::sync::oneshot::channel::<std::io::Error>();
        let sender_ref = reference.clone();
        let sender_digest = digest.clone();
        let labels: HashMap<String, String> = labels.into_iter().collect();
        let sender = tokio::spawn(async move {
            let mut offset: i64 = 0;
            tokio::pin!(data);
            while let Some(chunk) = data.next().await {
                let chunk = match chunk {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = fail_tx.send(e);
                        return;
                    }
                };
                for piece in chunk.chunks(WRITE_CHUNK) {
                    let msg = WriteContentRequest {
                        action: WriteAction::Write as i32,
                        r#ref: sender_ref.clone(),
                        total,
                        expected: sender_digest.clone(),
                        offset,
                        data: piece.to_vec(),
                        labels: HashMap::new(),
                    };
                    offset += piece.len() as i64;
                    if tx.send(msg).await.is_err() {
                        return;
                    }
                }
            }
            let commit = WriteContentRequest {
                action: WriteAction::Commit as i32,
                r#ref: sender_ref,
                total: if total > 0 { total } else { offset },
                expected: sender_digest,
                offset,
                data: Vec::new(),
                labels,
            };
            let _ = tx.send(commit).await;
        });
        let request = c.req_lease(ReceiverStream::new(rx), &lease.0)?;
        let result: Result<String, RuntimeError> = async {
            let mut responses = match c.content().write(request).await {
                Ok(r) => r.into_inner(),
                Err(s) if s.code() == Code::AlreadyExists => return Ok(digest.clone()),
                Err(s) => return Err(grpc_error("write content", &what, s)),
            };
            let mut committed = None;
            loop {
                match responses.next().await {
                    Some(Ok(resp)) => {
                        if resp.action == WriteAction::Commit as i32 {
                            committed = Some(resp.digest);
                        }
                    }
                    Some(Err(s)) if s.code() == Code::AlreadyExists => {
                        return Ok(digest.clone());
                    }
                    Some(Err(s)) => return Err(grpc_error("write content", &what, s)),
                    None => break,
                }
            }
            if let Ok(e) = fail_rx.try_recv() {
                return Err(RuntimeError::io(format!("reading {what}"), e));
            }
            match committed {
                Some(d) if !d.is_empty() => Ok(d),
                Some(_) if !digest.is_empty() => Ok(digest.clone()),
                _ => Err(RuntimeError::Containerd {
                    op: "write content",
                    message: format!("{what}: the write stream ended without a commit"),
                    transient: true,
                }),
            }
        }
        .await;
        sender.abort();
        if result.is_err() {
            let _ = c
                .content()
                .abort(c.req(AbortRequest {
                    r#ref: reference.clone(),
                }))
                .await;
        }
        result
    }

    /// Adds or replaces labels on a blob (e.g. the GC references of a manifest).
    pub async fn content_set_labels(
        &self,
        digest: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), RuntimeError> {
        if labels.is_empty() {
            return Ok(());
        }
        let c = &self.conn;
        let paths = labels.keys().map(|k| format!("labels.{k}")).collect();
        c.content()
            .update(c.req(UpdateRequest {
                info: Some(ContentInfo {
                    digest: digest.to_string(),
                    labels: labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                    ..Default::default()
                }),
                update_mask: Some(FieldMask { paths }),
            }))
            .await
            .map_err(|s| grpc_error("update content", &format!("blob {digest}"), s))?;
        Ok(())
    }
}
