//! The `pods/binding` write: sets `spec.nodeName` once and marks the pod scheduled. Pod specs
//! are otherwise immutable, so this bypasses update validation, as upstream's binding does.

use super::RegistryError;
use super::meta::now_rfc3339;
use super::{Registry, object_key, store_error};
use berth_shared::resource;
use berth_store::Precondition;
use serde_json::{Value, json};

impl Registry {
    pub fn bind(&self, ns: &str, name: &str, node: &str) -> Result<Value, RegistryError> {
        let Some(rt) = resource::by_plural("", "v1", "pods") else {
            return Err(RegistryError::UnknownPath);
        };
        loop {
            let current = self.current(rt, Some(ns), name)?;
            let mut pod = current.value()?;
            if pod.pointer("/metadata/deletionTimestamp").is_some() {
                return Err(RegistryError::Conflict {
                    resource: rt.group_resource(),
                    group: String::new(),
                    name: name.to_string(),
                    detail: "pod is being deleted, cannot be assigned to a host".to_string(),
                });
            }
            if let Some(existing) = pod.pointer("/spec/nodeName").and_then(Value::as_str) {
                return Err(RegistryError::Conflict {
                    resource: rt.group_resource(),
                    group: String::new(),
                    name: name.to_string(),
                    detail: format!("pod {name} is already assigned to node \"{existing}\""),
                });
            }
            pod["spec"]["nodeName"] = json!(node);
            let conditions = pod["status"]["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let mut conditions: Vec<Value> = conditions
                .into_iter()
                .filter(|c| c["type"] != "PodScheduled")
                .collect();
            conditions.push(json!({
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": null,
                "lastTransitionTime": now_rfc3339(),
            }));
            pod["status"]["conditions"] = json!(conditions);
            match self.store.put_returning(
                &object_key(rt, Some(ns), name),
                pod,
                Precondition::Revision(current.revision),
            ) {
                Ok((_, written)) => return Ok(written),
                Err(berth_store::StoreError::Conflict) => continue,
                Err(e) => return Err(store_error(rt, name, e)),
            }
        }
    }
}
