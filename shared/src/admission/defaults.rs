//! Pod-spec defaulting shared by Pods and every pod template (upstream `SetDefaults_PodSpec`,
//! `SetDefaults_Container`, probe, handler, env and volume defaults), plus the PVC-template
//! defaults StatefulSets need.

use k8s_openapi::api::core::v1::{
    Container, HTTPGetAction, LifecycleHandler, ObjectFieldSelector, PersistentVolumeClaim,
    PodSpec, Probe, ResourceFieldSelector, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Default file mode (0644) for configMap, secret, downwardAPI and projected volumes.
const DEFAULT_FILE_MODE: i32 = 0o644;

/// Go treats a zero int as unset, so defaulting replaces zero as well as absence.
fn default_nonzero<T: Copy + Default + PartialEq>(field: &mut Option<T>, value: T) {
    if field.is_none_or(|v| v == T::default()) {
        *field = Some(value);
    }
}

fn default_str(field: &mut Option<String>, value: &str) {
    if field.as_deref().is_none_or(str::is_empty) {
        *field = Some(value.to_string());
    }
}

/// `SetDefaults_PodSpec` plus the container, probe, env and volume defaults beneath it.
pub(crate) fn default_pod_spec(spec: &mut PodSpec) {
    default_str(&mut spec.dns_policy, "ClusterFirst");
    default_str(&mut spec.restart_policy, "Always");
    if spec.security_context.is_none() {
        spec.security_context = Some(Default::default());
    }
    spec.termination_grace_period_seconds.get_or_insert(30);
    default_str(&mut spec.scheduler_name, "default-scheduler");
    // v1 conversion keeps the deprecated `serviceAccount` in step with `serviceAccountName`.
    if spec
        .service_account_name
        .as_deref()
        .is_none_or(str::is_empty)
    {
        spec.service_account_name = spec.service_account.clone().filter(|s| !s.is_empty());
    }
    if spec.service_account_name.is_some() {
        spec.service_account.clone_from(&spec.service_account_name);
    }
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        default_container(c);
    }
    for v in spec.volumes.iter_mut().flatten() {
        default_volume(v);
    }
}

/// Upstream pull-policy rule: `Always` when the tag is `latest` (or absent without a digest).
pub(crate) fn pull_policy_for(image: &str) -> &'static str {
    if image.is_empty() {
        return "IfNotPresent";
    }
    let (name, has_digest) = match image.split_once('@') {
        Some((n, _)) => (n, true),
        None => (image, false),
    };
    let last_segment = name.rsplit('/').next().unwrap_or(name);
    let tag = last_segment.split_once(':').map(|(_, t)| t);
    match tag {
        Some("latest") => "Always",
        Some(_) => "IfNotPresent",
        None if has_digest => "IfNotPresent",
        None => "Always",
    }
}

fn default_container(c: &mut Container) {
    if c.image_pull_policy.as_deref().is_none_or(str::is_empty) {
        let policy = pull_policy_for(c.image.as_deref().unwrap_or_default());
        c.image_pull_policy = Some(policy.to_string());
    }
    default_str(&mut c.termination_message_path, "/dev/termination-log");
    default_str(&mut c.termination_message_policy, "File");
    if c.resources.is_none() {
        c.resources = Some(Default::default());
    }
    for p in c.ports.iter_mut().flatten() {
        default_str(&mut p.protocol, "TCP");
    }
    for p in [
        &mut c.liveness_probe,
        &mut c.readiness_probe,
        &mut c.startup_probe,
    ]
    .into_iter()
    .flatten()
    {
        default_probe(p);
    }
    if let Some(lc) = &mut c.lifecycle {
        for h in [&mut lc.post_start, &mut lc.pre_stop].into_iter().flatten() {
            default_handler(h);
        }
    }
    for e in c.env.iter_mut().flatten() {
        if let Some(src) = &mut e.value_from {
            if let Some(f) = &mut src.field_ref {
                default_field_ref(f);
            }
            if let Some(r) = &mut src.resource_field_ref {
                default_resource_field_ref(r);
            }
        }
    }
}

fn default_probe(p: &mut Probe) {
    default_nonzero(&mut p.timeout_seconds, 1);
    default_nonzero(&mut p.period_seconds, 10);
    default_nonzero(&mut p.success_threshold, 1);
    default_nonzero(&mut p.failure_threshold, 3);
    if let Some(h) = &mut p.http_get {
        default_http_get(h);
    }
    if let Some(g) = &mut p.grpc {
        g.service.get_or_insert_with(String::new);
    }
}

fn default_handler(h: &mut LifecycleHandler) {
    if let Some(g) = &mut h.http_get {
        default_http_get(g);
    }
}

fn default_http_get(h: &mut HTTPGetAction) {
    default_str(&mut h.path, "/");
    default_str(&mut h.scheme, "HTTP");
}

fn default_field_ref(f: &mut ObjectFieldSelector) {
    default_str(&mut f.api_version, "v1");
}

fn default_resource_field_ref(r: &mut ResourceFieldSelector) {
    r.divisor.get_or_insert_with(|| Quantity("0".to_string()));
}

/// The number of volume sources set on a volume (every key but `name`).
pub(crate) fn volume_source_count(v: &Volume) -> usize {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::Object(m)) => m.keys().filter(|k| *k != "name").count(),
        _ => 0,
    }
}

fn default_volume(v: &mut Volume) {
    if volume_source_count(v) == 0 {
        v.empty_dir = Some(Default::default());
    }
    if let Some(s) = &mut v.secret {
        s.default_mode.get_or_insert(DEFAULT_FILE_MODE);
    }
    if let Some(c) = &mut v.config_map {
        c.default_mode.get_or_insert(DEFAULT_FILE_MODE);
    }
    if let Some(d) = &mut v.downward_api {
        d.default_mode.get_or_insert(DEFAULT_FILE_MODE);
        for item in d.items.iter_mut().flatten() {
            if let Some(f) = &mut item.field_ref {
                default_field_ref(f);
            }
            if let Some(r) = &mut item.resource_field_ref {
                default_resource_field_ref(r);
            }
        }
    }
    if let Some(p) = &mut v.projected {
        p.default_mode.get_or_insert(DEFAULT_FILE_MODE);
        for src in p.sources.iter_mut().flatten() {
            if let Some(t) = &mut src.service_account_token {
                t.expiration_seconds.get_or_insert(3600);
            }
            for item in src
                .downward_api
                .iter_mut()
                .flat_map(|d| d.items.iter_mut().flatten())
            {
                if let Some(f) = &mut item.field_ref {
                    default_field_ref(f);
                }
            }
        }
    }
    if let Some(h) = &mut v.host_path {
        h.type_.get_or_insert_with(String::new);
    }
    if let Some(spec) = v
        .ephemeral
        .as_mut()
        .and_then(|e| e.volume_claim_template.as_mut())
        .map(|t| &mut t.spec)
    {
        default_str(&mut spec.volume_mode, "Filesystem");
    }
}

/// PVC templates (StatefulSet `volumeClaimTemplates`): volumeMode Filesystem, phase Pending.
pub(crate) fn default_claim_template(pvc: &mut PersistentVolumeClaim) {
    let spec = pvc.spec.get_or_insert_with(Default::default);
    default_str(&mut spec.volume_mode, "Filesystem");
    let status = pvc.status.get_or_insert_with(Default::default);
    default_str(&mut status.phase, "Pending");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> PodSpec {
        let mut s: PodSpec = serde_json::from_value(v).unwrap();
        default_pod_spec(&mut s);
        s
    }

    #[test]
    fn pull_policy_depends_on_the_tag() {
        let cases = [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.25", "IfNotPresent"),
            ("localhost:5000/app", "Always"),
            ("localhost:5000/app:v2", "IfNotPresent"),
            ("nginx@sha256:abc", "IfNotPresent"),
            ("nginx:latest@sha256:abc", "Always"),
            ("", "IfNotPresent"),
        ];
        for (image, want) in cases {
            assert_eq!(pull_policy_for(image), want, "{image}");
        }
    }

    #[test]
    fn pod_spec_defaults_fill_every_upstream_field() {
        let s = spec(
            json!({"containers": [{"name": "c", "image": "nginx:1", "ports": [{"containerPort": 80}]}]}),
        );
        assert_eq!(s.dns_policy.as_deref(), Some("ClusterFirst"));
        assert_eq!(s.restart_policy.as_deref(), Some("Always"));
        assert_eq!(s.scheduler_name.as_deref(), Some("default-scheduler"));
        assert_eq!(s.termination_grace_period_seconds, Some(30));
        assert!(s.security_context.is_some());
        let c = &s.containers[0];
        assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
        assert_eq!(
            c.termination_message_path.as_deref(),
            Some("/dev/termination-log")
        );
        assert_eq!(c.termination_message_policy.as_deref(), Some("File"));
        assert!(c.resources.is_some());
        assert_eq!(
            c.ports.as_ref().unwrap()[0].protocol.as_deref(),
            Some("TCP")
        );
    }

    #[test]
    fn explicit_values_survive_defaulting() {
        let s = spec(
            json!({"restartPolicy": "Never", "dnsPolicy": "Default", "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "c", "image": "nginx", "imagePullPolicy": "Never"}]}),
        );
        assert_eq!(s.restart_policy.as_deref(), Some("Never"));
        assert_eq!(s.dns_policy.as_deref(), Some("Default"));
        assert_eq!(s.termination_grace_period_seconds, Some(5));
        assert_eq!(s.containers[0].image_pull_policy.as_deref(), Some("Never"));
    }

    #[test]
    fn probes_get_timing_defaults_and_http_scheme_and_path() {
        let s = spec(json!({"containers": [{"name": "c", "image": "x",
            "livenessProbe": {"httpGet": {"port": 80}, "periodSeconds": 0},
            "readinessProbe": {"grpc": {"port": 9000}, "failureThreshold": 7}}]}));
        let l = s.containers[0].liveness_probe.as_ref().unwrap();
        assert_eq!(
            (
                l.timeout_seconds,
                l.period_seconds,
                l.success_threshold,
                l.failure_threshold
            ),
            (Some(1), Some(10), Some(1), Some(3))
        );
        let h = l.http_get.as_ref().unwrap();
        assert_eq!(
            (h.scheme.as_deref(), h.path.as_deref()),
            (Some("HTTP"), Some("/"))
        );
        let r = s.containers[0].readiness_probe.as_ref().unwrap();
        assert_eq!(r.failure_threshold, Some(7));
        assert_eq!(r.grpc.as_ref().unwrap().service.as_deref(), Some(""));
    }

    #[test]
    fn env_field_refs_default_to_v1() {
        let s = spec(json!({"containers": [{"name": "c", "image": "x", "env": [
            {"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}]}));
        let env = &s.containers[0].env.as_ref().unwrap()[0];
        let f = env.value_from.as_ref().unwrap().field_ref.as_ref().unwrap();
        assert_eq!(f.api_version.as_deref(), Some("v1"));
    }

    #[test]
    fn volumes_get_modes_types_and_an_empty_dir_when_sourceless() {
        let s = spec(
            json!({"containers": [{"name": "c", "image": "x"}], "volumes": [
                {"name": "a"},
                {"name": "b", "configMap": {"name": "cm"}},
                {"name": "c", "secret": {"secretName": "s", "defaultMode": 256}},
                {"name": "d", "hostPath": {"path": "/x"}},
            ]}),
        );
        let v = s.volumes.unwrap();
        assert!(v[0].empty_dir.is_some());
        assert_eq!(v[1].config_map.as_ref().unwrap().default_mode, Some(420));
        assert_eq!(v[2].secret.as_ref().unwrap().default_mode, Some(256));
        assert_eq!(v[3].host_path.as_ref().unwrap().type_.as_deref(), Some(""));
    }

    #[test]
    fn deprecated_service_account_follows_the_name() {
        let s = spec(json!({"containers": [], "serviceAccount": "old"}));
        assert_eq!(s.service_account_name.as_deref(), Some("old"));
        let s = spec(json!({"containers": [], "serviceAccountName": "new"}));
        assert_eq!(s.service_account.as_deref(), Some("new"));
    }
}
