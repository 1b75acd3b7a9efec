//! Kubernetes Events about pods, from component `kubelet` (as `kubectl describe` expects):
//! repeats of the same reason and message on the same pod fold into one Event with a count.

use berth_api::client::Client;
use berth_api::k8s_openapi::api::core::v1::Pod;
use berth_api::resource;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Mutex;

/// (pod uid, type, reason, message): what makes two events the same.
type EventKey = (String, String, String, String);

/// Records events for the pods of one node.
pub struct Recorder {
    client: Client,
    node: String,
    /// (pod uid, type, reason, message) → (event name, count): the fold of repeats.
    seen: Mutex<HashMap<EventKey, (String, i64)>>,
}

impl Recorder {
    pub fn new(client: Client, node: String) -> Recorder {
        Recorder {
            client,
            node,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// Records an event; failures are logged, never fatal.
    pub async fn record(
        &self,
        pod: &Pod,
        warning: bool,
        reason: &str,
        message: &str,
        field_path: Option<&str>,
    ) {
        let Some(events) = resource::by_plural("", "v1", "events") else {
            return;
        };
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let event_type = if warning { "Warning" } else { "Normal" };
        // Each pod lifecycle step and failure is also a log line, by namespace/name.
        let pod_name = format!("{ns}/{}", pod.metadata.name.as_deref().unwrap_or_default());
        let container = field_path.unwrap_or_default();
        if warning {
            tracing::warn!(pod = %pod_name, container, reason, "{message}");
        } else {
            tracing::info!(pod = %pod_name, container, reason, "{message}");
        }
        let now = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let key = (
            uid.clone(),
            event_type.to_string(),
            reason.to_string(),
            message.to_string(),
        );
        let existing = self
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        if let Some((name, count)) = existing {
            let patch = json!({"count": count + 1, "lastTimestamp": now});
            if self
                .client
                .merge_patch::<Value>(events, Some(&ns), &name, &patch, false)
                .await
                .is_ok()
            {
                self.seen
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, (name, count + 1));
                return;
            }
        }
        let name = format!(
            "{}.{:x}",
            pod.metadata.name.clone().unwrap_or_default(),
            jiff::Timestamp::now().as_nanosecond()
        );
        let mut involved = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod.metadata.name,
            "namespace": ns,
            "uid": uid,
        });
        if let Some(f) = field_path {
            involved["fieldPath"] = json!(f);
        }
        let event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": event_type,
            "source": {"component": "kubelet", "host": self.node},
            "reportingComponent": "kubelet",
            "reportingInstance": self.node,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        });
        match self.client.create::<Value>(events, Some(&ns), &event).await {
            Ok(_) => {
                self.seen
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, (name, 1));
            }
            Err(e) => tracing::debug!(error = %e, reason, "recording an event failed"),
        }
    }

    /// Forgets the folds of a pod that is gone.
    pub fn forget(&self, uid: &str) {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|k, _| k.0 != uid);
    }
}
