//! Docker-style image reference normalisation and Kubernetes' default pull policy (pure).
//!
//! Planner: pure, no I/O.
//!
//! `nginx:1.14.2` → `docker.io/library/nginx:1.14.2`; `user/app` → `docker.io/user/app:latest`;
//! `localhost:5000/app` keeps its registry; `app@sha256:…` pins a digest (no default tag).
//! The first path component is a registry when it contains `.` or `:` or is `localhost`.

use std::fmt;

pub const DEFAULT_REGISTRY: &str = "docker.io";
pub const DEFAULT_TAG: &str = "latest";

/// A parsed, normalised reference.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ImageReference {
    /// e.g. `docker.io`, `127.0.0.1:5000`
    pub registry: String,
    /// e.g. `library/nginx`
    pub repository: String,
    /// `None` only when a digest is given without tag.
    pub tag: Option<String>,
    /// e.g. `sha256:…`
    pub digest: Option<String>,
}

/// Kubernetes' imagePullPolicy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

impl PullPolicy {
    /// Parses the API's spelling.
    pub fn parse(s: &str) -> Option<PullPolicy> {
        match s {
            "Always" => Some(PullPolicy::Always),
            "IfNotPresent" => Some(PullPolicy::IfNotPresent),
            "Never" => Some(PullPolicy::Never),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("couldn't parse image reference {reference:?}: {reason}")]
pub struct ReferenceError {
    pub reference: String,
    pub reason: String,
}

fn valid_component(c: &str) -> bool {
    // lowercase alphanumerics separated by `.`, `_`, `__` or runs of `-`.
    !c.is_empty()
        && c.starts_with(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
        && c.ends_with(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
        && c.chars()
            .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || "._-".contains(ch))
        && !c.contains("..")
        && !c.contains("___")
}

fn valid_tag(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 128
        && t.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

fn valid_digest(d: &str) -> bool {
    match d.split_once(':') {
        Some((alg, hex)) => {
            !alg.is_empty()
                && alg
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+._-".contains(c))
                && hex.len() >= 32
                && hex
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        }
        None => false,
    }
}

impl ImageReference {
    /// Parses and normalises `input`.
    pub fn parse(input: &str) -> Result<ImageReference, ReferenceError> {
        let err = |reason: &str| ReferenceError {
            reference: input.to_string(),
            reason: reason.to_string(),
        };
        if input.is_empty() || input.len() > 255 + 128 + 80 {
            return Err(err("empty or too long"));
        }
        let (rest, digest) = match input.split_once('@') {
            Some((r, d)) => {
                if !valid_digest(d) {
                    return Err(err("invalid digest"));
                }
                (r, Some(d.to_string()))
            }
            None => (input, None),
        };
        // The tag is after the last ':' that follows the last '/'.
        let last_slash = rest.rfind('/').map(|i| i + 1).unwrap_or(0);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => {
                let tag = &rest[last_slash + i + 1..];
                if !valid_tag(tag) {
                    return Err(err("invalid tag"));
                }
                (&rest[..last_slash + i], Some(tag.to_string()))
            }
            None => (rest, None),
        };
        let (registry, path) = match name.split_once('/') {
            Some((first, path))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_string(), path.to_string())
            }
            _ => (DEFAULT_REGISTRY.to_string(), name.to_string()),
        };
        let registry = if registry == "index.docker.io" {
            DEFAULT_REGISTRY.to_string()
        } else {
            registry
        };
        if path.chars().any(|c| c.is_ascii_uppercase()) {
            return Err(err("repository name must be lowercase"));
        }
        if !path.split('/').all(valid_component) {
            return Err(err("invalid repository name"));
        }
        let repository = if registry == DEFAULT_REGISTRY && !path.contains('/') {
            format!("library/{path}")
        } else {
            path
        };
        let tag = match (tag, &digest) {
            (None, None) => Some(DEFAULT_TAG.to_string()),
            (tag, _) => tag,
        };
        Ok(ImageReference {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// `registry/repository`, e.g. `docker.io/library/nginx`.
    pub fn repository_name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// `registry/repository@digest` for a content digest (the image's repo digest).
    pub fn with_digest(&self, digest: &str) -> String {
        format!("{}@{}", self.repository_name(), digest)
    }

    /// The tag or digest the registry is asked for.
    pub fn reference_part(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or(DEFAULT_TAG)
    }
}

impl fmt::Display for ImageReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// Kubernetes' default imagePullPolicy: `Always` when the tag is `latest` or absent and no
/// digest is given, `IfNotPresent` otherwise. An unparsable reference gets `IfNotPresent`
/// (the pull reports the parse error).
pub fn default_pull_policy(image: &str) -> PullPolicy {
    let has_digest = image.contains('@');
    let name = image.split('@').next().unwrap_or(image);
    let last_slash = name.rfind('/').map(|i| i + 1).unwrap_or(0);
    let tag = name[last_slash..].rsplit_once(':').map(|(_, t)| t);
    match (has_digest, tag) {
        (true, _) => PullPolicy::IfNotPresent,
        (false, None) | (false, Some("latest")) => PullPolicy::Always,
        (false, Some(_)) => PullPolicy::IfNotPresent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0ab44aa9e5cb2e3c9d0a3b1a2d7c5d1f8a6e2b4c0d9f7e5a3b1c2d4e6f8a0b2c";

    #[test]
    fn references_normalise_like_docker() {
        let cases = [
            ("nginx", "docker.io/library/nginx:latest"),
            ("nginx:1.14.2", "docker.io/library/nginx:1.14.2"),
            ("user/app", "docker.io/user/app:latest"),
            ("docker.io/nginx", "docker.io/library/nginx:latest"),
            (
                "index.docker.io/library/nginx:1",
                "docker.io/library/nginx:1",
            ),
            ("127.0.0.1:5000/busybox:1", "127.0.0.1:5000/busybox:1"),
            ("localhost/app", "localhost/app:latest"),
            (
                "localhost:5000/a/b/c:v1.0-rc_1",
                "localhost:5000/a/b/c:v1.0-rc_1",
            ),
            ("quay.io/coreos/etcd:v3.5", "quay.io/coreos/etcd:v3.5"),
            ("registry.k8s.io/pause:3.9", "registry.k8s.io/pause:3.9"),
            ("my-registry:5000/x", "my-registry:5000/x:latest"),
        ];
        for (input, want) in cases {
            assert_eq!(
                ImageReference::parse(input).unwrap().to_string(),
                want,
                "{input}"
            );
        }
    }

    #[test]
    fn digests_are_kept_without_a_default_tag() {
        let r = ImageReference::parse(&format!("busybox@{DIGEST}")).unwrap();
        assert_eq!(r.tag, None);
        assert_eq!(r.to_string(), format!("docker.io/library/busybox@{DIGEST}"));
        assert_eq!(r.reference_part(), DIGEST);
        let r = ImageReference::parse(&format!("busybox:1.28@{DIGEST}")).unwrap();
        assert_eq!(r.tag.as_deref(), Some("1.28"));
        assert_eq!(r.reference_part(), DIGEST);
        assert_eq!(
            r.with_digest("sha256:ab"),
            "docker.io/library/busybox@sha256:ab"
        );
    }

    #[test]
    fn invalid_references_are_rejected() {
        for input in [
            "",
            "Nginx",
            "nginx:",
            "nginx:bad tag",
            "nginx@sha256:xyz",
            "nginx@md5",
            "-leading/app",
            "a//b",
            "app:tag:extra",
        ] {
            assert!(
                ImageReference::parse(input).is_err(),
                "{input:?} should fail"
            );
        }
    }

    #[test]
    fn default_pull_policy_follows_kubernetes() {
        let cases = [
            ("nginx", PullPolicy::Always),
            ("nginx:latest", PullPolicy::Always),
            ("nginx:1.14.2", PullPolicy::IfNotPresent),
            ("localhost:5000/app", PullPolicy::Always),
            ("localhost:5000/app:v1", PullPolicy::IfNotPresent),
            ("nginx@sha256:abc", PullPolicy::IfNotPresent),
            ("nginx:latest@sha256:abc", PullPolicy::IfNotPresent),
        ];
        for (image, want) in cases {
            assert_eq!(default_pull_policy(image), want, "{image}");
        }
    }

    #[test]
    fn pull_policy_parses_the_api_spelling() {
        assert_eq!(PullPolicy::parse("Never"), Some(PullPolicy::Never));
        assert_eq!(PullPolicy::parse("never"), None);
    }
}
