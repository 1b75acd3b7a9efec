//! The ConfigMaps and Secrets a pod's volumes and environment refer to and its claims' volumes,
//! read from the API for a container start, the Services of its namespace (for the service variables, unless
//! `enableServiceLinks: false`), and the ServiceAccount tokens of its projected volumes. A missing or
//! unreadable one is left out; the container config reports what it lacks.

use super::{PodWorker, ns_of};
use crate::pod::container_config::ResolvedSources;
use berth_shared::k8s_openapi::api::core::v1::Pod;
use std::collections::{BTreeMap, BTreeSet};

impl PodWorker {
    pub(super) async fn sources(&self, pod: &Pod) -> ResolvedSources {
        let ns = ns_of(pod);
        let mut out = ResolvedSources::default();
        let v = serde_json::to_value(pod).unwrap_or_default();
        let mut cms = BTreeSet::new();
        let mut secrets = BTreeSet::new();
        collect_refs(&v["spec"], &mut cms, &mut secrets);
        for name in cms {
            if let Ok(Some(cm)) = self.cx.api.config_map(&ns, &name).await {
                let mut data = cm.data.unwrap_or_default();
                for (k, b) in cm.binary_data.unwrap_or_default() {
                    data.insert(k, String::from_utf8_lossy(&b.0).into_owned());
                }
                out.configmaps.insert(name, data);
            }
        }
        out.tokens = self.tokens_for(pod).await;
        if !crate::pod::claims::claims_of(pod).is_empty() {
            // Missing ones are reported by the volume that needs them.
            out.claims = self.observe_claims(pod).await.unwrap_or_default();
        }
        let links = pod.spec.as_ref().and_then(|s| s.enable_service_links) != Some(false);
        if links {
            match self.cx.api.services(&ns).await {
                Ok(services) => out.services = services,
                Err(e) => tracing::warn!(namespace = %ns, error = %e,
                    "listing Services for the service variables failed; starting without them"),
            }
        }
        for name in secrets {
            if let Ok(Some(s)) = self.cx.api.secret(&ns, &name).await {
                let mut data: BTreeMap<String, String> = s
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                    .collect();
                data.extend(s.string_data.unwrap_or_default());
                out.secrets.insert(name, data);
            }
        }
        out
    }
}

/// The names of the ConfigMaps and Secrets referred to anywhere below `v` (a pod spec).
fn collect_refs(v: &serde_json::Value, cms: &mut BTreeSet<String>, secrets: &mut BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, child) in m {
                let name = child.get("name").and_then(|n| n.as_str());
                match k.as_str() {
                    "configMapKeyRef" | "configMapRef" | "configMap" => {
                        if let Some(n) = name {
                            cms.insert(n.to_string());
                        }
                    }
                    "secretKeyRef" | "secretRef" => {
                        if let Some(n) = name {
                            secrets.insert(n.to_string());
                        }
                    }
                    "secret" => {
                        if let Some(n) = child.get("secretName").and_then(|n| n.as_str()).or(name) {
                            secrets.insert(n.to_string());
                        }
                    }
                    _ => {}
                }
                collect_refs(child, cms, secrets);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_refs(x, cms, secrets)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn referenced_configmaps_and_secrets_are_collected() {
        let spec = serde_json::json!({"volumes": [{"name": "v", "configMap": {"name": "cm"}}, {"name": "s", "secret": {"secretName": "sec"}}],
            "containers": [{"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s2", "key": "k"}}}]}]});
        let (mut c, mut s) = (Default::default(), Default::default());
        collect_refs(&spec, &mut c, &mut s);
        assert!(c.contains("cm"));
        assert!(s.contains("sec") && s.contains("s2"));
    }
}
