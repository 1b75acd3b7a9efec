//! The files of a config volume (`configMap`, `secret`, `downwardAPI`, `projected`) as a value:
//! relative path → bytes and mode, computed from the pod and the objects it refers to, as the
//! kubelet's volume plugins make the payload they hand to the atomic writer (`items`,
//! `defaultMode`, per-item `mode`, `optional`).
//!
//! Planner: pure, no I/O.

use crate::pod::api_access::{DEFAULT_TOKEN_SECONDS, TokenNeed};
use crate::pod::container_config::{ResolvedSources, resource_value};
use berth_api::k8s_openapi::api::core::v1::{
    DownwardAPIVolumeFile, KeyToPath, Pod, ServiceAccountTokenProjection, Volume,
};
use std::collections::BTreeMap;

/// One file of a payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProjection {
    pub data: Vec<u8>,
    /// Permission bits (before any `fsGroup` mask).
    pub mode: u32,
}

/// Relative path (`/`-separated, no `..`) → file.
pub type Payload = BTreeMap<String, FileProjection>;

/// The config volume kinds, each with its directory under the pod's `volumes/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigKind {
    ConfigMap,
    Secret,
    DownwardApi,
    Projected,
}

impl ConfigKind {
    pub fn of(v: &Volume) -> Option<ConfigKind> {
        if v.config_map.is_some() {
            Some(ConfigKind::ConfigMap)
        } else if v.secret.is_some() {
            Some(ConfigKind::Secret)
        } else if v.downward_api.is_some() {
            Some(ConfigKind::DownwardApi)
        } else if v.projected.is_some() {
            Some(ConfigKind::Projected)
        } else {
            None
        }
    }

    pub fn dir_name(self) -> &'static str {
        match self {
            ConfigKind::ConfigMap => "configmap",
            ConfigKind::Secret => "secret",
            ConfigKind::DownwardApi => "downward-api",
            ConfigKind::Projected => "projected",
        }
    }

    /// Whether the volume lives in memory (a tmpfs): the kubelet backs secret, projected and
    /// downwardAPI volumes with a memory-medium emptyDir, so their values never reach a disk.
    pub fn in_memory(self) -> bool {
        !matches!(self, ConfigKind::ConfigMap)
    }
}

/// The default `defaultMode` of every config volume (upstream's 0644).
pub const DEFAULT_MODE: u32 = 0o644;

/// Upstream's checks of a payload path (`validatePath` of the atomic writer).
pub fn validate_path(p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Err("invalid path: must not be empty".to_string());
    }
    if p.len() > 4096 {
        return Err(format!(
            "invalid path: must be less than or equal to 4096 characters: {p:?}"
        ));
    }
    if p.starts_with('/') {
        return Err(format!("invalid path: must be relative path: {p}"));
    }
    if p.split('/').any(|s| s == "..") {
        return Err(format!("invalid path: must not contain '..': {p}"));
    }
    if p.starts_with("..") {
        return Err(format!("invalid path: must not start with '..': {p}"));
    }
    if p.split('/').any(|s| s.len() > 255) {
        return Err(format!(
            "invalid path: a segment is longer than 255 characters: {p}"
        ));
    }
    Ok(())
}

fn mode_of(m: Option<i32>, default: u32) -> u32 {
    m.map_or(default, |m| (m as u32) & 0o7777)
}

/// `data` as files: every key, or only the listed items (key → path, mode). A listed key that
/// is missing fails unless the source is optional (`missing_key` gives the message).
fn project_keys(
    out: &mut Payload,
    data: &BTreeMap<String, String>,
    items: Option<&Vec<KeyToPath>>,
    default_mode: u32,
    optional: bool,
    missing_key: impl Fn(&str) -> String,
) -> Result<(), String> {
    match items.filter(|i| !i.is_empty()) {
        None => {
            for (k, v) in data {
                validate_path(k)?;
                out.insert(k.clone(), file(v.as_bytes(), default_mode));
            }
        }
        Some(items) => {
            for item in items {
                validate_path(&item.path)?;
                match data.get(&item.key) {
                    Some(v) => {
                        out.insert(
                            item.path.clone(),
                            file(v.as_bytes(), mode_of(item.mode, default_mode)),
                        );
                    }
                    None if optional => {}
                    None => return Err(missing_key(&item.key)),
                }
            }
        }
    }
    Ok(())
}

/// A ConfigMap or Secret a volume (or a projected source) takes its keys from, by name.
#[derive(Clone, Copy)]
enum Source<'a> {
    ConfigMap(&'a str),
    Secret(&'a str),
}

/// The keys of `source` as files; a missing object fails unless `optional`, with the
/// kubelet's words for a missing object and a missing key.
fn project_object(
    out: &mut Payload,
    sources: &ResolvedSources,
    source: Source<'_>,
    items: Option<&Vec<KeyToPath>>,
    mode: u32,
    optional: Option<bool>,
) -> Result<(), String> {
    let optional = optional.unwrap_or(false);
    let (data, missing_object, missing_key): (_, _, fn(&str) -> String) = match source {
        Source::ConfigMap(name) => (
            sources.configmaps.get(name),
            format!("configmap \"{name}\" not found"),
            |k| format!("configmap references non-existent config key: {k}"),
        ),
        Source::Secret(name) => (
            sources.secrets.get(name),
            format!("secret \"{name}\" not found"),
            |k| format!("references non-existent secret key: {k}"),
        ),
    };
    match data {
        Some(data) => project_keys(out, data, items, mode, optional, missing_key),
        None if optional => Ok(()),
        None => Err(missing_object),
    }
}

fn file(data: &[u8], mode: u32) -> FileProjection {
    FileProjection {
        data: data.to_vec(),
        mode,
    }
}

/// The payload of config volume `v`; `None` for a volume of another kind. `Err` is the
/// message of the kubelet's `MountVolume.SetUp failed` for it.
pub fn plan_payload(
    pod: &Pod,
    v: &Volume,
    sources: &ResolvedSources,
    fs_group: Option<u32>,
) -> Result<Option<Payload>, String> {
    let mut out = Payload::new();
    let object = [
        (v.config_map.as_ref()).map(|c| {
            let source = Source::ConfigMap(&c.name);
            (source, c.items.as_ref(), c.default_mode, c.optional)
        }),
        (v.secret.as_ref()).map(|s| {
            let source = Source::Secret(s.secret_name.as_deref().unwrap_or_default());
            (source, s.items.as_ref(), s.default_mode, s.optional)
        }),
    ];
    if let Some((source, items, mode, optional)) = object.into_iter().flatten().next() {
        let mode = mode_of(mode, DEFAULT_MODE);
        project_object(&mut out, sources, source, items, mode, optional)?;
        return Ok(Some(out));
    }
    if let Some(d) = &v.downward_api {
        let mode = mode_of(d.default_mode, DEFAULT_MODE);
        project_downward(&mut out, pod, &d.items, mode, sources)?;
        return Ok(Some(out));
    }
    let Some(p) = &v.projected else {
        return Ok(None);
    };
    let mode = mode_of(p.default_mode, DEFAULT_MODE);
    for src in p.sources.iter().flatten() {
        let objects = [
            (src.config_map.as_ref()).map(|c| (Source::ConfigMap(&c.name), &c.items, c.optional)),
            (src.secret.as_ref()).map(|s| (Source::Secret(&s.name), &s.items, s.optional)),
        ];
        for (source, items, optional) in objects.into_iter().flatten() {
            project_object(&mut out, sources, source, items.as_ref(), mode, optional)?;
        }
        if let Some(d) = &src.downward_api {
            project_downward(&mut out, pod, &d.items, mode, sources)?;
        }
        if let Some(t) = &src.service_account_token {
            project_token(&mut out, t, sources, mode, fs_group)?;
        }
    }
    Ok(Some(out))
}

fn project_downward(
    out: &mut Payload,
    pod: &Pod,
    items: &Option<Vec<DownwardAPIVolumeFile>>,
    default_mode: u32,
    sources: &ResolvedSources,
) -> Result<(), String> {
    let allocatable = sources.allocatable;
    for item in items.iter().flatten() {
        validate_path(&item.path)?;
        let value = match (&item.field_ref, &item.resource_field_ref) {
            (Some(f), _) => downward_value(pod, &f.field_path),
            (None, Some(r)) => {
                let name = r.container_name.as_deref().unwrap_or_default();
                let spec = pod.spec.as_ref();
                let container = spec
                    .into_iter()
                    .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers))
                    .find(|c| c.name == name)
                    .ok_or_else(|| format!("container {name:?} not found in the pod"))?;
                resource_value(container, &r.resource, r.divisor.as_ref(), allocatable)
                    .map_err(|e| e.0)?
            }
            (None, None) => String::new(),
        };
        out.insert(
            item.path.clone(),
            file(value.as_bytes(), mode_of(item.mode, default_mode)),
        );
    }
    Ok(())
}

/// The token for `t`, 0600 when the pod sets an `fsGroup` (upstream: the group gets read
/// through the ownership change, nobody else).
fn project_token(
    out: &mut Payload,
    t: &ServiceAccountTokenProjection,
    sources: &ResolvedSources,
    default_mode: u32,
    fs_group: Option<u32>,
) -> Result<(), String> {
    validate_path(&t.path)?;
    let need = token_need(t);
    let token = sources.tokens.get(&need.key()).ok_or_else(|| {
        "failed to fetch token: the service account token is not available yet".to_string()
    })?;
    let mode = if fs_group.is_some() {
        0o600
    } else {
        default_mode
    };
    out.insert(t.path.clone(), file(token.as_bytes(), mode));
    Ok(())
}

/// What token a projection needs.
pub fn token_need(t: &ServiceAccountTokenProjection) -> TokenNeed {
    TokenNeed {
        audience: t.audience.clone().filter(|a| !a.is_empty()),
        expiration_seconds: t.expiration_seconds.unwrap_or(DEFAULT_TOKEN_SECONDS),
    }
}

/// Upstream's `FormatMap`: `key="value"` lines, sorted, no trailing newline.
fn format_map(map: Option<&BTreeMap<String, String>>) -> String {
    map.map(|m| {
        m.iter()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect::<Vec<_>>()
            .join("\n")
    })
    .unwrap_or_default()
}

fn downward_value(pod: &Pod, field_path: &str) -> String {
    let m = &pod.metadata;
    match field_path {
        "metadata.name" => m.name.clone().unwrap_or_default(),
        "metadata.namespace" => m.namespace.clone().unwrap_or_default(),
        "metadata.uid" => m.uid.clone().unwrap_or_default(),
        "metadata.labels" => format_map(m.labels.as_ref()),
        "metadata.annotations" => format_map(m.annotations.as_ref()),
        other => {
            let key = |prefix: &str| {
                other
                    .strip_prefix(prefix)?
                    .strip_prefix("['")?
                    .strip_suffix("']")
                    .map(String::from)
            };
            let map = if let Some(k) = key("metadata.labels") {
                m.labels.as_ref().map(|l| (l, k))
            } else if let Some(k) = key("metadata.annotations") {
                m.annotations.as_ref().map(|l| (l, k))
            } else {
                None
            };
            map.and_then(|(l, k)| l.get(&k).cloned())
                .unwrap_or_default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::container_config::Allocatable;
    use serde_json::json;

    fn pod(volumes: serde_json::Value) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u1",
            "labels": {"b": "2", "a": "1"}},
            "spec": {"containers": [], "volumes": volumes}}),
        )
        .unwrap()
    }

    fn sources() -> ResolvedSources {
        let mut s = ResolvedSources::default();
        s.configmaps.insert(
            "cm".into(),
            [("a".to_string(), "1".to_string()), ("b".into(), "2".into())].into(),
        );
        s.secrets
            .insert("s".into(), [("pw".to_string(), "x".to_string())].into());
        s.tokens.insert(
            TokenNeed {
                audience: None,
                expiration_seconds: DEFAULT_TOKEN_SECONDS,
            }
            .key(),
            "tok".into(),
        );
        s
    }

    fn plan(v: serde_json::Value, fs_group: Option<u32>) -> Result<Payload, String> {
        let p = pod(json!([v]));
        let vol = &p.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
        plan_payload(&p, vol, &sources(), fs_group).map(|o| o.unwrap())
    }

    fn listing(p: &Payload) -> Vec<(String, String, u32)> {
        p.iter()
            .map(|(k, f)| (k.clone(), String::from_utf8_lossy(&f.data).into(), f.mode))
            .collect()
    }

    #[test]
    fn a_config_map_without_items_projects_every_key_with_the_default_mode() {
        let p = plan(json!({"name": "v", "configMap": {"name": "cm"}}), None).unwrap();
        assert_eq!(
            listing(&p),
            [
                ("a".into(), "1".into(), 0o644),
                ("b".into(), "2".into(), 0o644)
            ]
        );
    }

    #[test]
    fn items_choose_keys_paths_and_modes() {
        let v = json!({"name": "v", "configMap": {"name": "cm", "defaultMode": 0o400,
            "items": [{"key": "a", "path": "dir/x"}, {"key": "b", "path": "y", "mode": 0o600}]}});
        assert_eq!(
            listing(&plan(v, None).unwrap()),
            [
                ("dir/x".into(), "1".into(), 0o400),
                ("y".into(), "2".into(), 0o600)
            ]
        );
    }

    #[test]
    fn a_missing_key_fails_unless_the_source_is_optional() {
        let v = json!({"name": "v", "configMap": {"name": "cm", "items": [{"key": "zz", "path": "z"}]}});
        assert_eq!(
            plan(v, None).unwrap_err(),
            "configmap references non-existent config key: zz"
        );
        let v = json!({"name": "v", "configMap": {"name": "cm", "optional": true,
            "items": [{"key": "zz", "path": "z"}, {"key": "a", "path": "a"}]}});
        assert_eq!(plan(v, None).unwrap().len(), 1);
    }

    #[test]
    fn a_missing_object_fails_with_upstreams_message_unless_optional() {
        let cases = [
            (
                json!({"name": "v", "configMap": {"name": "nope"}}),
                "configmap \"nope\" not found",
            ),
            (
                json!({"name": "v", "secret": {"secretName": "nope"}}),
                "secret \"nope\" not found",
            ),
        ];
        for (v, want) in cases {
            assert_eq!(plan(v, None).unwrap_err(), want);
        }
        let v = json!({"name": "v", "secret": {"secretName": "nope", "optional": true}});
        assert!(plan(v, None).unwrap().is_empty(), "an empty volume");
    }

    #[test]
    fn paths_that_leave_the_volume_are_refused() {
        for path in ["../x", "/etc/x", "a/../../x", "..data", ""] {
            let v = json!({"name": "v", "configMap": {"name": "cm", "items": [{"key": "a", "path": path}]}});
            assert!(plan(v, None).is_err(), "{path}");
        }
    }

    #[test]
    fn projected_sources_merge_and_a_token_is_0600_with_an_fs_group() {
        let v = json!({"name": "v", "projected": {"sources": [
            {"configMap": {"name": "cm", "items": [{"key": "a", "path": "a"}]}},
            {"secret": {"name": "s"}},
            {"downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
            {"serviceAccountToken": {"path": "token"}}]}});
        let want = |token_mode| -> Vec<(String, String, u32)> {
            vec![
                ("a".into(), "1".into(), 0o644),
                ("labels".into(), "a=\"1\"\nb=\"2\"".into(), 0o644),
                ("pw".into(), "x".into(), 0o644),
                ("token".into(), "tok".into(), token_mode),
            ]
        };
        assert_eq!(listing(&plan(v.clone(), None).unwrap()), want(0o644));
        assert_eq!(listing(&plan(v, Some(2000)).unwrap()), want(0o600));
    }

    #[test]
    fn downward_api_fields_render_as_upstream() {
        let v = json!({"name": "v", "downwardAPI": {"items": [
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
            {"path": "one", "fieldRef": {"fieldPath": "metadata.labels['a']"}},
            {"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}, "mode": 0o400}]}});
        assert_eq!(
            listing(&plan(v, None).unwrap()),
            [
                ("name".into(), "p".into(), 0o644),
                ("ns".into(), "ns".into(), 0o400),
                ("one".into(), "1".into(), 0o644)
            ]
        );
    }

    #[test]
    fn resource_fields_read_a_containers_requests_and_limits_else_the_nodes() {
        let p: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "resources": {
                "requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}}],
            "volumes": [{"name": "v", "downwardAPI": {"items": [
                {"path": "cpu-request", "resourceFieldRef": {"containerName": "c", "resource": "requests.cpu", "divisor": "1m"}},
                {"path": "cpu-limit", "resourceFieldRef": {"containerName": "c", "resource": "limits.cpu"}},
                {"path": "mem-limit", "resourceFieldRef": {"containerName": "c", "resource": "limits.memory", "divisor": "1Mi"}}]}}]}}))
        .unwrap();
        let vol = &p.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
        let mut src = sources();
        src.allocatable = Allocatable {
            cpu_millis: 2000,
            memory_bytes: 1 << 30,
        };
        let files = plan_payload(&p, vol, &src, None).unwrap().unwrap();
        assert_eq!(
            listing(&files),
            [
                ("cpu-limit".into(), "2".into(), 0o644),
                ("cpu-request".into(), "250".into(), 0o644),
                ("mem-limit".into(), "128".into(), 0o644)
            ]
        );
        let mut unknown = p.clone();
        if let Some(v) = unknown.spec.as_mut().and_then(|s| s.volumes.as_mut()) {
            v[0] = serde_json::from_value(json!({"name": "v", "downwardAPI": {"items": [
                {"path": "x", "resourceFieldRef": {"containerName": "ghost", "resource": "limits.cpu"}}]}}))
            .unwrap();
        }
        let vol = &unknown.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
        assert!(plan_payload(&unknown, vol, &src, None).is_err());
    }

    #[test]
    fn other_volume_kinds_have_no_payload() {
        let p = pod(json!([{"name": "e", "emptyDir": {}}]));
        let vol = &p.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0];
        assert_eq!(plan_payload(&p, vol, &sources(), None), Ok(None));
        assert_eq!(ConfigKind::of(vol), None);
    }
}
