//! Kubernetes Events about this Node (as the kubelet records them: namespace `default`,
//! involvedObject the Node with its name as uid, component `kubelet`).

use berth_api::client::Client;
use berth_api::resource;
use serde_json::{Value, json};

/// Records events on one Node.
#[derive(Clone)]
pub struct NodeEvents {
    client: Client,
    node: String,
}

impl NodeEvents {
    pub fn new(client: Client, node: String) -> NodeEvents {
        NodeEvents { client, node }
    }

    /// Records an event; failures are logged, never fatal.
    pub async fn record(&self, warning: bool, reason: &str, message: &str) {
        if warning {
            tracing::warn!(node = %self.node, reason, "{message}");
        } else {
            tracing::info!(node = %self.node, reason, "{message}");
        }
        let Some(events) = resource::by_plural("", "v1", "events") else {
            return;
        };
        let now = jiff::Timestamp::now();
        let stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": format!("{}.{:x}", self.node, now.as_nanosecond()),
                "namespace": "default",
            },
            "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": self.node},
            "reason": reason,
            "message": message,
            "type": if warning { "Warning" } else { "Normal" },
            "source": {"component": "kubelet", "host": self.node},
            "reportingComponent": "kubelet",
            "reportingInstance": self.node,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        });
        if let Err(e) = self
            .client
            .create::<Value>(events, Some("default"), &event)
            .await
        {
            tracing::debug!(error = %e, reason, "recording a node event failed");
        }
    }
}
