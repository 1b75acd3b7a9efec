//! Imports images from files for air-gapped hosts: an OCI image layout (a directory, or a tar
//! of one, maybe gzipped) or a `docker save` tarball (`manifest.json` with uncompressed layer
//! tars, for which a Docker v2 manifest is synthesised). Tarballs are unpacked into a temporary
//! directory first.
//!
//! Image names come from `io.containerd.image.name`, else from a full reference in
//! `org.opencontainers.image.ref.name` (OCI layouts), or from `RepoTags` (docker save).

use std::collections::HashMap;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use super::manifest::{self, Descriptor, Index};
use super::reference::ImageReference;
use super::store::{self, BlobSource};
use super::{PullError, PulledImage};
use crate::runtime::Runtime;

const LEASE_EXPIRY: std::time::Duration = std::time::Duration::from_secs(3600);

/// Blobs of a layout on disk, plus synthesised documents kept in memory.
struct DirSource {
    root: PathBuf,
    files: HashMap<String, PathBuf>,
    memory: HashMap<String, Vec<u8>>,
}

impl DirSource {
    fn path_of(&self, digest: &str) -> Result<PathBuf, PullError> {
        if let Some(p) = self.files.get(digest) {
            return Ok(p.clone());
        }
        let (alg, hex) = digest
            .split_once(':')
            .ok_or_else(|| self.error(format!("bad digest {digest}")))?;
        if hex.contains('/') || alg.contains('/') || hex.contains("..") {
            return Err(self.error(format!("bad digest {digest}")));
        }
        Ok(self.root.join("blobs").join(alg).join(hex))
    }

    fn error(&self, message: String) -> PullError {
        PullError::Import {
            path: self.root.display().to_string(),
            message,
        }
    }
}

impl BlobSource for DirSource {
    async fn bytes(&self, desc: &Descriptor) -> Result<Vec<u8>, PullError> {
        if let Some(b) = self.memory.get(&desc.digest) {
            return Ok(b.clone());
        }
        let path = self.path_of(&desc.digest)?;
        tokio::fs::read(&path)
            .await
            .map_err(|e| self.error(format!("reading {}: {e}", path.display())))
    }

    async fn manifest(&self, desc: &Descriptor) -> Result<Vec<u8>, PullError> {
        self.bytes(desc).await
    }

    async fn stream(
        &self,
        desc: &Descriptor,
    ) -> Result<BoxStream<'static, Result<Bytes, io::Error>>, PullError> {
        if let Some(b) = self.memory.get(&desc.digest) {
            let b = Bytes::from(b.clone());
            return Ok(futures::stream::iter([Ok(b)]).boxed());
        }
        let path = self.path_of(&desc.digest)?;
        let file = tokio::fs::File::open(&path)
            .await
            .map_err(|e| self.error(format!("opening {}: {e}", path.display())))?;
        let stream = futures::stream::unfold(Some(file), |file| async move {
            let mut file = file?;
            let mut buf = vec![0u8; 1024 * 1024];
            match file.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok(Bytes::from(buf)), Some(file)))
                }
                Err(e) => Some((Err(e), None)),
            }
        });
        Ok(stream.boxed())
    }

    fn origin(&self) -> Option<(String, String)> {
        None
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DockerSaveEntry {
    config: String,
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
    layers: Vec<String>,
}

fn import_error(path: &Path, message: impl std::fmt::Display) -> PullError {
    PullError::Import {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

/// Unpacks a (maybe gzipped) tarball into `dest`.
fn unpack_tar(file: &Path, dest: &Path) -> io::Result<()> {
    let mut f = std::fs::File::open(file)?;
    let mut magic = [0u8; 2];
    let n = f.read(&mut magic)?;
    let f = std::fs::File::open(file)?;
    let reader: Box<dyn Read> = if n == 2 && magic == [0x1f, 0x8b] {
        Box::new(flate2::read::GzDecoder::new(f))
    } else {
        Box::new(f)
    };
    let mut archive = tar::Archive::new(reader);
    archive.set_preserve_permissions(false);
    archive.unpack(dest)
}

/// sha256 digest and size of a file.
fn hash_file(path: &Path) -> io::Result<(String, i64)> {
    let mut f = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1024 * 1024];
    let mut size = 0i64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as i64;
    }
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok((format!("sha256:{hex}"), size))
}

/// The image name an OCI layout entry carries, normalised.
fn entry_name(desc: &Descriptor) -> Option<String> {
    let from = |key: &str| desc.annotations.get(key).filter(|v| !v.is_empty());
    let raw = from("io.containerd.image.name").or_else(|| {
        from("org.opencontainers.image.ref.name").filter(|v| v.contains('/') || v.contains(':'))
    })?;
    ImageReference::parse(raw).ok().map(|r| r.to_string())
}

pub(super) async fn import(rt: &Runtime, path: &Path) -> Result<Vec<PulledImage>, PullError> {
    let meta = tokio::fs::metadata(path)
        .await
        .map_err(|e| import_error(path, e))?;
    if meta.is_dir() {
        return import_dir(rt, path, path).await;
    }
    let tmp = std::env::temp_dir().join(format!(
        "berth-import-{}-{}",
        std::process::id(),
        jiff::Timestamp::now().as_nanosecond()
    ));
    let (file, dest) = (path.to_path_buf(), tmp.clone());
    let unpacked = tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(&dest)?;
        unpack_tar(&file, &dest)
    })
    .await
    .map_err(|e| import_error(path, e))
    .and_then(|r| r.map_err(|e| import_error(path, format!("unpacking: {e}"))));
    let result = match unpacked {
        Ok(()) => import_dir(rt, &tmp, path).await,
        Err(e) => Err(e),
    };
    let _ = tokio::fs::remove_dir_all(&tmp).await;
    result
}

async fn import_dir(rt: &Runtime, dir: &Path, shown: &Path) -> Result<Vec<PulledImage>, PullError> {
    let mut source = DirSource {
        root: dir.to_path_buf(),
        files: HashMap::new(),
        memory: HashMap::new(),
    };
    // (name, top descriptor)
    let mut images: Vec<(String, Descriptor)> = Vec::new();
    let index_path = dir.join("index.json");
    let docker_path = dir.join("manifest.json");
    if let Ok(bytes) = tokio::fs::read(&index_path).await {
        let index: Index = serde_json::from_slice(&bytes)
            .map_err(|e| import_error(shown, format!("index.json: {e}")))?;
        for desc in &index.manifests {
            let name = entry_name(desc).ok_or_else(|| {
                import_error(
                    shown,
                    format!(
                        "manifest {} has no image name (io.containerd.image.name annotation)",
                        desc.digest
                    ),
                )
            })?;
            images.push((name, desc.clone()));
        }
    } else if let Ok(bytes) = tokio::fs::read(&docker_path).await {
        let entries: Vec<DockerSaveEntry> = serde_json::from_slice(&bytes)
            .map_err(|e| import_error(shown, format!("manifest.json: {e}")))?;
        for entry in entries {
            let top = docker_manifest(&mut source, dir, &entry, shown).await?;
            let tags = entry.repo_tags.unwrap_or_default();
            if tags.is_empty() {
                return Err(import_error(
                    shown,
                    "an image in manifest.json has no RepoTags",
                ));
            }
            for tag in tags {
                let name = ImageReference::parse(&tag)
                    .map_err(|e| import_error(shown, e))?
                    .to_string();
                images.push((name, top.clone()));
            }
        }
    } else {
        return Err(import_error(
            shown,
            "neither an OCI image layout (index.json) nor a docker save archive (manifest.json)",
        ));
    }

    let mut out = Vec::new();
    for (name, top) in images {
        let started = Instant::now();
        let top_bytes = source.bytes(&top).await?;
        if manifest::sha256_digest(&top_bytes) != top.digest {
            return Err(import_error(
                shown,
                format!("{} does not match its digest", top.digest),
            ));
        }
        let top = Descriptor {
            size: top_bytes.len() as i64,
            ..top
        };
        let lease = rt.lease_create(LEASE_EXPIRY).await?;
        // An imported image is the node's: everyone may use it (no pull credentials).
        let labels = std::collections::BTreeMap::from([(
            super::PULL_CREDENTIALS_LABEL.to_string(),
            String::new(),
        )]);
        let stored = store::store_image(rt, &lease, &source, &name, &top, top_bytes, &labels).await;
        if let Err(e) = rt.lease_delete(&lease, false).await {
            tracing::debug!(error = %e, "deleting the import lease failed; it expires by itself");
        }
        let stored = stored?;
        out.push(PulledImage::stored(name, stored, started.elapsed(), false));
    }
    Ok(out)
}

/// Registers a docker-save image's files with `source` and returns the descriptor of a
/// synthesised Docker v2 manifest for it.
async fn docker_manifest(
    source: &mut DirSource,
    dir: &Path,
    entry: &DockerSaveEntry,
    shown: &Path,
) -> Result<Descriptor, PullError> {
    let inside = |rel: &str| -> Result<PathBuf, PullError> {
        if rel.split('/').any(|c| c == "..") || rel.starts_with('/') {
            return Err(import_error(
                shown,
                format!("bad path {rel:?} in manifest.json"),
            ));
        }
        Ok(dir.join(rel))
    };
    let config_path = inside(&entry.config)?;
    let config_bytes = tokio::fs::read(&config_path)
        .await
        .map_err(|e| import_error(shown, format!("{}: {e}", entry.config)))?;
    let config_digest = manifest::sha256_digest(&config_bytes);
    let config_size = config_bytes.len() as i64;
    source.memory.insert(config_digest.clone(), config_bytes);
    let mut layers = Vec::new();
    for rel in &entry.layers {
        let path = inside(rel)?;
        let p = path.clone();
        let (digest, size) = tokio::task::spawn_blocking(move || hash_file(&p))
            .await
            .map_err(|e| import_error(shown, e))?
            .map_err(|e| import_error(shown, format!("{rel}: {e}")))?;
        source.files.insert(digest.clone(), path);
        layers.push(serde_json::json!({
            "mediaType": manifest::DOCKER_LAYER, "size": size, "digest": digest,
        }));
    }
    let doc = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": manifest::DOCKER_MANIFEST,
        "config": {"mediaType": manifest::DOCKER_CONFIG, "size": config_size, "digest": config_digest},
        "layers": layers,
    });
    let bytes = serde_json::to_vec(&doc).map_err(|e| import_error(shown, e))?;
    let digest = manifest::sha256_digest(&bytes);
    let desc = Descriptor {
        media_type: manifest::DOCKER_MANIFEST.to_string(),
        digest: digest.clone(),
        size: bytes.len() as i64,
        ..Default::default()
    };
    source.memory.insert(digest, bytes);
    Ok(desc)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn desc(annotations: &[(&str, &str)]) -> Descriptor {
        Descriptor {
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            ..Default::default()
        }
    }

    #[test]
    fn layout_entries_are_named_from_their_annotations() {
        let cases = [
            (
                desc(&[
                    (
                        "io.containerd.image.name",
                        "docker.io/library/busybox:local",
                    ),
                    ("org.opencontainers.image.ref.name", "local"),
                ]),
                Some("docker.io/library/busybox:local"),
            ),
            (
                desc(&[("org.opencontainers.image.ref.name", "busybox:1.28")]),
                Some("docker.io/library/busybox:1.28"),
            ),
            (
                desc(&[("org.opencontainers.image.ref.name", "latest")]),
                None,
            ),
            (desc(&[]), None),
        ];
        for (d, want) in cases {
            assert_eq!(entry_name(&d).as_deref(), want);
        }
    }
}
