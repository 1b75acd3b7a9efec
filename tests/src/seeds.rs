//! The seed manifests (`tests/manifests/seeds/*.yaml`, copied from the documentation the project
//! was seeded with): where they are, and each one's kind, name and namespace, read from the YAML.
//! One file per manifest, named `<metadata.name>.<kind>[.<variant>].yaml`.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// One seed manifest.
#[derive(Debug, Clone)]
pub struct Seed {
    pub path: PathBuf,
    /// File name without `.yaml`, e.g. `mypod.pod.two-constraints`.
    pub stem: String,
    pub text: String,
    /// The manifest as JSON.
    pub object: Value,
    pub kind: String,
    pub api_version: String,
    pub name: String,
    /// `metadata.namespace`, when the manifest sets one.
    pub namespace: Option<String>,
}

impl Seed {
    /// Reads and parses one manifest file.
    pub fn load(path: &Path) -> Result<Seed, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let object: Value = serde_saphyr::from_str(&text)
            .map_err(|e| format!("{}: not YAML: {e}", path.display()))?;
        let field = |v: &Value, what: &str| {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("{}: no {what}", path.display()))
        };
        let kind = field(&object["kind"], "kind")?;
        let api_version = field(&object["apiVersion"], "apiVersion")?;
        let name = field(&object["metadata"]["name"], "metadata.name")?;
        let namespace = object["metadata"]["namespace"].as_str().map(str::to_string);
        let stem = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".yaml"))
            .ok_or_else(|| format!("{}: not a .yaml file", path.display()))?
            .to_string();
        Ok(Seed {
            path: path.to_path_buf(),
            stem,
            text,
            object,
            kind,
            api_version,
            name,
            namespace,
        })
    }

    /// The first container image in the manifest's pod spec (or pod template).
    pub fn first_image(&self) -> Option<&str> {
        let spec = &self.object["spec"];
        let pod_spec = match self.kind.as_str() {
            "Pod" => spec,
            "CronJob" => &spec["jobTemplate"]["spec"]["template"]["spec"],
            _ => &spec["template"]["spec"],
        };
        pod_spec["containers"][0]["image"].as_str()
    }
}

/// `tests/manifests/seeds`
pub fn seed_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("manifests")
        .join("seeds")
}

/// Every seed manifest, sorted by file name. Panics on an unreadable or malformed file: the
/// fixtures are part of the test suite.
pub fn seeds() -> Vec<Seed> {
    let dir = seed_dir();
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| Seed::load(&p).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

/// The seed in `<stem>.yaml`.
pub fn seed(stem: &str) -> Seed {
    let path = seed_dir().join(format!("{stem}.yaml"));
    Seed::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// The seed's `hpa-rs.yaml` (ReplicaSet page): kept inline, not under `seeds/`,
/// so that what walks every seed file is unchanged.
pub const SEED_HPA: &str = "apiVersion: autoscaling/v1
kind: HorizontalPodAutoscaler
metadata:
  name: frontend-scaler
spec:
  scaleTargetRef:
    kind: ReplicaSet
    name: frontend
  minReplicas: 3
  maxReplicas: 10
  targetCPUUtilizationPercentage: 50
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_parses_and_is_named_after_its_name_and_kind() {
        let all = seeds();
        assert!(all.len() >= 20, "only {} seeds", all.len());
        for s in &all {
            let expected = format!("{}.{}", s.name, s.kind.to_ascii_lowercase());
            assert!(
                s.stem == expected || s.stem.starts_with(&format!("{expected}.")),
                "{} should be named {expected}[.variant].yaml",
                s.path.display()
            );
        }
    }

    #[test]
    fn every_seed_is_a_served_kind_with_its_api_version() {
        for s in seeds() {
            let k = crate::kinds::kind(&s.kind);
            assert_eq!(s.api_version, k.api_version, "{}", s.path.display());
        }
    }

    #[test]
    fn every_seed_says_where_it_came_from() {
        for s in seeds() {
            assert!(
                s.text.starts_with("# Seed 00"),
                "{} lacks its source line",
                s.path.display()
            );
        }
    }

    #[test]
    fn every_workload_seed_has_a_container_image() {
        for s in seeds().into_iter().filter(|s| s.kind != "Service") {
            assert!(
                s.first_image().is_some(),
                "{} has no image",
                s.path.display()
            );
        }
    }

    #[test]
    fn no_two_seeds_are_the_same_manifest() {
        let all = seeds();
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a.object, b.object, "{} and {}", a.stem, b.stem);
            }
        }
    }
}
