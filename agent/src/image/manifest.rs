//! Image manifests, indexes and configs: parsing, platform choice, chain ids and the GC labels
//! containerd needs to keep an image's content and snapshots (pure).
//!
//! Planner: pure, no I/O.
//!
//! Chain ids: chain(L0) = diff_id(L0); chain(Ln) = sha256(chain(Ln-1) + " " + diff_id(Ln)).

use std::collections::BTreeMap;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::runtime::{BlobDescriptor, ImageConfig};

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
pub const DOCKER_LAYER: &str = "application/vnd.docker.image.rootfs.diff.tar";

/// The media types asked for when resolving a reference.
pub const ACCEPTED: [&str; 4] = [OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST];

#[derive(Debug, thiserror::Error)]
#[error("invalid image: {0}")]
pub struct ManifestError(pub String);

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Platform {
    #[serde(default)]
    pub architecture: String,
    #[serde(default)]
    pub os: String,
    #[serde(default)]
    pub variant: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    #[serde(default)]
    pub media_type: String,
    pub digest: String,
    pub size: i64,
    #[serde(default)]
    pub platform: Option<Platform>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

impl Descriptor {
    pub fn blob(&self) -> BlobDescriptor {
        BlobDescriptor {
            media_type: self.media_type.clone(),
            digest: self.digest.clone(),
            size: self.size,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    #[serde(default)]
    pub media_type: Option<String>,
    pub manifests: Vec<Descriptor>,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    #[serde(default)]
    pub media_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
}

/// A document a reference resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Document {
    Index(Index),
    Manifest(Manifest),
}

/// Parses a manifest or an index, by media type when known, else by shape.
pub fn parse_document(bytes: &[u8], media_type: &str) -> Result<Document, ManifestError> {
    let bad = |e: serde_json::Error| ManifestError(format!("cannot parse {media_type}: {e}"));
    let is_index = match media_type {
        OCI_INDEX | DOCKER_LIST => true,
        OCI_MANIFEST | DOCKER_MANIFEST => false,
        _ => {
            let v: serde_json::Value = serde_json::from_slice(bytes).map_err(bad)?;
            v.get("manifests").is_some()
        }
    };
    if is_index {
        serde_json::from_slice(bytes)
            .map(Document::Index)
            .map_err(bad)
    } else {
        serde_json::from_slice(bytes)
            .map(Document::Manifest)
            .map_err(bad)
    }
}

/// The media type a document declares, or the one its shape implies.
pub fn document_media_type(doc: &Document) -> &str {
    match doc {
        Document::Index(i) => i.media_type.as_deref().unwrap_or(OCI_INDEX),
        Document::Manifest(m) => m.media_type.as_deref().unwrap_or(OCI_MANIFEST),
    }
}

/// The index entry for linux/amd64 (a plain `amd64` entry preferred over variants).
pub fn select_platform(index: &Index) -> Option<&Descriptor> {
    let matches = |d: &&Descriptor| {
        d.platform
            .as_ref()
            .is_some_and(|p| p.os == "linux" && p.architecture == "amd64")
    };
    index.manifests.iter().filter(matches).min_by_key(|d| {
        d.platform
            .as_ref()
            .and_then(|p| p.variant.clone())
            .is_some()
    })
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ConfigSection {
    #[serde(default)]
    env: Option<Vec<String>>,
    #[serde(default)]
    entrypoint: Option<Vec<String>>,
    #[serde(default)]
    cmd: Option<Vec<String>>,
    #[serde(default)]
    working_dir: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    stop_signal: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct RootFs {
    #[serde(default)]
    diff_ids: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    config: Option<ConfigSection>,
    #[serde(default)]
    rootfs: RootFs,
}

/// The runtime-relevant config and the layer diff ids of an image config blob.
pub fn parse_config(bytes: &[u8]) -> Result<(ImageConfig, Vec<String>), ManifestError> {
    let file: ConfigFile = serde_json::from_slice(bytes)
        .map_err(|e| ManifestError(format!("cannot parse the image config: {e}")))?;
    let c = file.config.unwrap_or_default();
    let config = ImageConfig {
        env: c.env.unwrap_or_default(),
        entrypoint: c.entrypoint.unwrap_or_default(),
        cmd: c.cmd.unwrap_or_default(),
        working_dir: c.working_dir.unwrap_or_default(),
        user: c.user.unwrap_or_default(),
        stop_signal: c.stop_signal.filter(|s| !s.is_empty()),
    };
    if file.rootfs.diff_ids.is_empty() {
        return Err(ManifestError(
            "the image config lists no layers".to_string(),
        ));
    }
    Ok((config, file.rootfs.diff_ids))
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in hash.iter() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The chain id of every layer prefix.
pub fn chain_ids(diff_ids: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(diff_ids.len());
    for diff in diff_ids {
        let next = match out.last() {
            None => diff.clone(),
            Some(prev) => sha256_digest(format!("{prev} {diff}").as_bytes()),
        };
        out.push(next);
    }
    out
}

/// Labels of a manifest blob: GC references to its config and layers.
pub fn manifest_labels(manifest: &Manifest) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    labels.insert(
        "containerd.io/gc.ref.content.config".to_string(),
        manifest.config.digest.clone(),
    );
    for (i, layer) in manifest.layers.iter().enumerate() {
        labels.insert(
            format!("containerd.io/gc.ref.content.l.{i}"),
            layer.digest.clone(),
        );
    }
    labels
}

/// Labels of an index blob: a GC reference to the platform manifest that was fetched.
pub fn index_labels(index: &Index, selected: &str) -> BTreeMap<String, String> {
    index
        .manifests
        .iter()
        .enumerate()
        .filter(|(_, m)| m.digest == selected)
        .map(|(i, m)| {
            (
                format!("containerd.io/gc.ref.content.m.{i}"),
                m.digest.clone(),
            )
        })
        .collect()
}

/// Labels of a config blob: a GC reference to the image's top snapshot.
pub fn config_labels(snapshotter: &str, top_chain_id: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(
        format!("containerd.io/gc.ref.snapshot.{snapshotter}"),
        top_chain_id.to_string(),
    )])
}

/// Labels of a layer blob: its uncompressed digest and where it came from.
pub fn layer_labels(diff_id: &str, source: Option<(&str, &str)>) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([(
        "containerd.io/uncompressed".to_string(),
        diff_id.to_string(),
    )]);
    if let Some((host, repository)) = source {
        labels.insert(
            format!("containerd.io/distribution.source.{host}"),
            repository.to_string(),
        );
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_ids_hash_the_previous_chain_and_the_diff_id() {
        let diffs = vec![
            "sha256:aaaa".to_string(),
            "sha256:bbbb".to_string(),
            "sha256:cccc".to_string(),
        ];
        let chains = chain_ids(&diffs);
        assert_eq!(chains[0], "sha256:aaaa");
        assert_eq!(chains[1], sha256_digest(b"sha256:aaaa sha256:bbbb"));
        assert_eq!(
            chains[2],
            sha256_digest(format!("{} sha256:cccc", chains[1]).as_bytes())
        );
        assert!(chain_ids(&[]).is_empty());
    }

    #[test]
    fn sha256_digest_is_lower_hex() {
        assert_eq!(
            sha256_digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn documents_parse_by_media_type_or_shape() {
        let manifest = br#"{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",
            "config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:c","size":3},
            "layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","digest":"sha256:l0","size":10}]}"#;
        let Document::Manifest(m) = parse_document(manifest, "").unwrap() else {
            panic!("not a manifest");
        };
        assert_eq!(m.layers[0].digest, "sha256:l0");
        assert_eq!(
            document_media_type(&Document::Manifest(m.clone())),
            DOCKER_MANIFEST
        );
        let labels = manifest_labels(&m);
        assert_eq!(labels["containerd.io/gc.ref.content.config"], "sha256:c");
        assert_eq!(labels["containerd.io/gc.ref.content.l.0"], "sha256:l0");

        let index = br#"{"schemaVersion":2,"manifests":[
            {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:arm","size":1,"platform":{"architecture":"arm64","os":"linux"}},
            {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:v2","size":1,"platform":{"architecture":"amd64","os":"linux","variant":"v2"}},
            {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:amd","size":1,"platform":{"architecture":"amd64","os":"linux"}}]}"#;
        let Document::Index(i) = parse_document(index, OCI_INDEX).unwrap() else {
            panic!("not an index");
        };
        assert_eq!(select_platform(&i).unwrap().digest, "sha256:amd");
        assert_eq!(
            index_labels(&i, "sha256:amd"),
            BTreeMap::from([(
                "containerd.io/gc.ref.content.m.2".to_string(),
                "sha256:amd".to_string()
            )])
        );
        let only_arm = Index {
            media_type: None,
            manifests: vec![i.manifests[0].clone()],
        };
        assert!(select_platform(&only_arm).is_none());
    }

    #[test]
    fn configs_yield_runtime_settings_and_diff_ids() {
        let cfg = br#"{"architecture":"amd64","os":"linux",
            "config":{"Env":["PATH=/bin"],"Cmd":["sh"],"WorkingDir":"/w","User":"1000","StopSignal":"SIGQUIT"},
            "rootfs":{"type":"layers","diff_ids":["sha256:d0","sha256:d1"]}}"#;
        let (config, diffs) = parse_config(cfg).unwrap();
        assert_eq!(config.env, vec!["PATH=/bin"]);
        assert_eq!(config.cmd, vec!["sh"]);
        assert!(config.entrypoint.is_empty());
        assert_eq!(config.working_dir, "/w");
        assert_eq!(config.user, "1000");
        assert_eq!(config.stop_signal.as_deref(), Some("SIGQUIT"));
        assert_eq!(diffs, vec!["sha256:d0", "sha256:d1"]);
        // null config fields (as Docker writes them) are fine.
        let cfg = br#"{"config":{"Env":null,"Cmd":null},"rootfs":{"diff_ids":["sha256:d0"]}}"#;
        assert!(parse_config(cfg).is_ok());
        assert!(parse_config(br#"{"config":{}}"#).is_err());
    }
}
