//! Puts an image into containerd and reads it back: blobs into the content store with their
//! GC labels, layers unpacked into committed snapshots named by chain id, the image record.
//! Shared by registry pulls and imports; the blobs come from a [`BlobSource`].
//!
//! Order matters for GC safety (everything happens under the caller's lease): layers and
//! config first, then the manifest whose labels reference them, then the index, then the
//! unpack, then the image record pointing at the top document.

use std::future::Future;
use std::io;

use bytes::Bytes;
use futures::stream::BoxStream;

use super::PullError;
use super::manifest::{self, Descriptor, Document, Manifest};
use crate::runtime::{ImageConfig, Lease, Runtime};

/// Where an image's blobs come from.
pub(crate) trait BlobSource: Sync {
    /// A whole (small) blob.
    fn bytes(&self, desc: &Descriptor) -> impl Future<Output = Result<Vec<u8>, PullError>> + Send;
    /// A manifest by digest (registries serve these apart from blobs).
    fn manifest(
        &self,
        desc: &Descriptor,
    ) -> impl Future<Output = Result<Vec<u8>, PullError>> + Send;
    /// A blob as a stream (layers).
    fn stream(
        &self,
        desc: &Descriptor,
    ) -> impl Future<Output = Result<BoxStream<'static, Result<Bytes, io::Error>>, PullError>> + Send;
    /// `(host, repository)` for the `containerd.io/distribution.source.*` label.
    fn origin(&self) -> Option<(String, String)>;
}

/// What is known about an image once it is in containerd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StoredImage {
    /// Digest of the top document (index or manifest).
    pub digest: String,
    pub size_bytes: u64,
    pub config: ImageConfig,
    pub chain_id: String,
}

fn invalid(name: &str, e: impl std::fmt::Display) -> PullError {
    PullError::Invalid {
        reference: name.to_string(),
        message: e.to_string(),
    }
}

/// The platform manifest a top document leads to.
struct Resolved {
    /// The index and its entry that was chosen, when the top document is an index.
    index: Option<(manifest::Index, Descriptor)>,
    manifest: Manifest,
    manifest_desc: Descriptor,
    manifest_bytes: Vec<u8>,
}

/// Resolves an index to its linux/amd64 manifest.
async fn platform_manifest<F, Fut>(
    name: &str,
    top: &Descriptor,
    top_bytes: &[u8],
    fetch: F,
) -> Result<Resolved, PullError>
where
    F: Fn(Descriptor) -> Fut,
    Fut: Future<Output = Result<Vec<u8>, PullError>>,
{
    match manifest::parse_document(top_bytes, &top.media_type).map_err(|e| invalid(name, e))? {
        Document::Manifest(m) => Ok(Resolved {
            index: None,
            manifest: m,
            manifest_desc: top.clone(),
            manifest_bytes: top_bytes.to_vec(),
        }),
        Document::Index(index) => {
            let desc = manifest::select_platform(&index).cloned().ok_or_else(|| {
                invalid(
                    name,
                    "no matching manifest for linux/amd64 in the manifest list entries",
                )
            })?;
            let bytes = fetch(desc.clone()).await?;
            match manifest::parse_document(&bytes, &desc.media_type)
                .map_err(|e| invalid(name, e))?
            {
                Document::Manifest(m) => Ok(Resolved {
                    index: Some((index, desc.clone())),
                    manifest: m,
                    manifest_desc: desc,
                    manifest_bytes: bytes,
                }),
                Document::Index(_) => Err(invalid(name, "nested image indexes are not supported")),
            }
        }
    }
}

/// Writes one blob unless present; sets `labels` either way.
async fn ensure_blob(
    rt: &Runtime,
    lease: &Lease,
    desc: &Descriptor,
    labels: std::collections::BTreeMap<String, String>,
    data: Option<Vec<u8>>,
    stream: Option<BoxStream<'static, Result<Bytes, io::Error>>>,
) -> Result<bool, PullError> {
    if rt.content_info(&desc.digest).await?.is_some() {
        rt.content_set_labels(&desc.digest, &labels).await?;
        return Ok(false);
    }
    let stream: BoxStream<'static, Result<Bytes, io::Error>> = match (data, stream) {
        (Some(bytes), _) => Box::pin(futures::stream::iter([Ok(Bytes::from(bytes))])),
        (None, Some(s)) => s,
        (None, None) => Box::pin(futures::stream::empty()),
    };
    rt.content_write(lease, Some(&desc.blob()), labels, stream)
        .await?;
    Ok(true)
}

/// Stores the image `name` whose top document (`top`, `top_bytes`) was resolved already; the
/// record gets (or has replaced) `labels`.
pub(crate) async fn store_image<S: BlobSource>(
    rt: &Runtime,
    lease: &Lease,
    source: &S,
    name: &str,
    top: &Descriptor,
    top_bytes: Vec<u8>,
    labels: &std::collections::BTreeMap<String, String>,
) -> Result<StoredImage, PullError> {
    let Resolved {
        index,
        manifest,
        manifest_desc,
        manifest_bytes,
    } = platform_manifest(name, top, &top_bytes, |d| async move {
        source.manifest(&d).await
    })
    .await?;
    let config_bytes = match rt.content_info(&manifest.config.digest).await? {
        Some(_) => rt.content_read(&manifest.config.digest).await?,
        None => source.bytes(&manifest.config).await?,
    };
    let (config, diff_ids) = manifest::parse_config(&config_bytes).map_err(|e| invalid(name, e))?;
    if diff_ids.len() != manifest.layers.len() {
        return Err(invalid(
            name,
            format!(
                "the config lists {} layers but the manifest {}",
                diff_ids.len(),
                manifest.layers.len()
            ),
        ));
    }
    let chains = manifest::chain_ids(&diff_ids);
    let top_chain = chains.last().cloned().unwrap_or_default();
    let origin = source.origin();

    for (layer, diff_id) in manifest.layers.iter().zip(&diff_ids) {
        if rt.content_info(&layer.digest).await?.is_some() {
            continue;
        }
        let labels = manifest::layer_labels(
            diff_id,
            origin.as_ref().map(|(h, r)| (h.as_str(), r.as_str())),
        );
        let stream = source.stream(layer).await?;
        ensure_blob(rt, lease, layer, labels, None, Some(stream)).await?;
    }
    let snapshotter = rt.snapshotter().to_string();
    ensure_blob(
        rt,
        lease,
        &manifest.config,
        manifest::config_labels(&snapshotter, &top_chain),
        Some(config_bytes),
        None,
    )
    .await?;
    ensure_blob(
        rt,
        lease,
        &manifest_desc,
        manifest::manifest_labels(&manifest),
        Some(manifest_bytes),
        None,
    )
    .await?;
    if let Some((index, selected)) = &index {
        ensure_blob(
            rt,
            lease,
            top,
            manifest::index_labels(index, &selected.digest),
            Some(top_bytes),
            None,
        )
        .await?;
    }

    unpack(rt, lease, &manifest, &diff_ids, &chains).await?;
    rt.image_put(lease, name, &top.blob(), labels).await?;
    Ok(StoredImage {
        digest: top.digest.clone(),
        size_bytes: image_size(top, index.as_ref().map(|(_, d)| d), &manifest),
        config,
        chain_id: top_chain,
    })
}

fn image_size(top: &Descriptor, platform: Option<&Descriptor>, manifest: &Manifest) -> u64 {
    let sizes = std::iter::once(top.size)
        .chain(platform.map(|d| d.size))
        .chain(std::iter::once(manifest.config.size))
        .chain(manifest.layers.iter().map(|l| l.size));
    sizes.map(|s| s.max(0) as u64).sum()
}

/// Unpacks the layers whose snapshots are missing, from the highest existing one up.
async fn unpack(
    rt: &Runtime,
    lease: &Lease,
    manifest: &Manifest,
    diff_ids: &[String],
    chains: &[String],
) -> Result<(), PullError> {
    let mut first_missing = chains.len();
    for i in (0..chains.len()).rev() {
        if rt.snapshot_exists(&chains[i]).await? {
            break;
        }
        first_missing = i;
    }
    for i in first_missing..chains.len() {
        let parent = if i == 0 {
            None
        } else {
            Some(chains[i - 1].as_str())
        };
        rt.unpack_layer(
            lease,
            parent,
            &chains[i],
            &manifest.layers[i].blob(),
            &diff_ids[i],
        )
        .await?;
    }
    Ok(())
}

/// Reads an image back from containerd; `None` when there is no record or it is incomplete
/// (content or top snapshot missing).
pub(crate) async fn load_image(rt: &Runtime, name: &str) -> Result<Option<StoredImage>, PullError> {
    let Some(record) = rt.image_get(name).await? else {
        return Ok(None);
    };
    let top = Descriptor {
        media_type: record.target.media_type.clone(),
        digest: record.target.digest.clone(),
        size: record.target.size,
        ..Default::default()
    };
    let read = |d: Descriptor| async move {
        match rt.content_info(&d.digest).await? {
            Some(_) => Ok(rt.content_read(&d.digest).await?),
            None => Err(PullError::Invalid {
                reference: name.to_string(),
                message: format!("content {} is missing", d.digest),
            }),
        }
    };
    let loaded = async {
        let top_bytes = read(top.clone()).await?;
        let Resolved {
            index, manifest, ..
        } = platform_manifest(name, &top, &top_bytes, read).await?;
        let config_bytes = read(manifest.config.clone()).await?;
        let (config, diff_ids) =
            manifest::parse_config(&config_bytes).map_err(|e| invalid(name, e))?;
        let chain_id = manifest::chain_ids(&diff_ids).pop().unwrap_or_default();
        Ok::<_, PullError>((index, manifest, config, chain_id))
    }
    .await;
    let (index, manifest, config, chain_id) = match loaded {
        Ok(v) => v,
        Err(PullError::Invalid { message, .. }) => {
            tracing::debug!(name, message, "image record without complete content");
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    if !rt.snapshot_exists(&chain_id).await? {
        return Ok(None);
    }
    Ok(Some(StoredImage {
        digest: top.digest.clone(),
        size_bytes: image_size(&top, index.as_ref().map(|(_, d)| d), &manifest),
        config,
        chain_id,
    }))
}
