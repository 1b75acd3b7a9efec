//! The ConfigMaps and Secrets a pod's volumes and environment refer to and its claims' volumes,
//! read for a container start (ConfigMaps and Secrets through the node's watched copies), the
//! Services of its namespace (for the service variables, unless `enableServiceLinks: false`),
//! and the ServiceAccount tokens of its projected volumes. A missing or unreadable one is left
//! out; the container config reports what it lacks.

use super::{PodWorker, ns_of};
use crate::pod::container_config::{Allocatable, ResolvedSources};
use berth_api::k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;

impl PodWorker {
    /// What the pod's config volumes are made of: its ConfigMaps, Secrets and tokens, and
    /// whether all could be read (an error is not an absence: a refresh then waits).
    pub(super) async fn config_sources(&self, pod: &Pod) -> (ResolvedSources, bool) {
        let ns = ns_of(pod);
        let node = &self.cx.node;
        let mut out = ResolvedSources {
            allocatable: Allocatable {
                cpu_millis: i64::from(node.cpus) * 1000,
                memory_bytes: node.memory_bytes,
            },
            ..ResolvedSources::default()
        };
        let (cms, secrets) = crate::pod::config_objects::referenced(pod);
        let mut complete = true;
        for name in cms {
            match self.cx.api.config_map(&ns, &name).await {
                Ok(Some(cm)) => {
                    let mut data = cm.data.unwrap_or_default();
                    for (k, b) in cm.binary_data.unwrap_or_default() {
                        data.insert(k, String::from_utf8_lossy(&b.0).into_owned());
                    }
                    out.configmaps.insert(name, data);
                }
                Ok(None) => {}
                Err(_) => complete = false,
            }
        }
        for name in secrets {
            match self.cx.api.secret(&ns, &name).await {
                Ok(Some(s)) => {
                    let mut data: BTreeMap<String, String> = s
                        .data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                        .collect();
                    data.extend(s.string_data.unwrap_or_default());
                    out.secrets.insert(name, data);
                }
                Ok(None) => {}
                Err(_) => complete = false,
            }
        }
        out.tokens = self.tokens_for(pod).await;
        (out, complete)
    }

    pub(super) async fn sources(&self, pod: &Pod) -> ResolvedSources {
        let ns = ns_of(pod);
        let (mut out, _) = self.config_sources(pod).await;
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
        out
    }
}
