//! Pods parsed once per version: a pass reads every pod its selector matches (thousands, for a
//! large set) and each pod status change brings another pass, so the controller keeps the
//! parsed view of each pod at the revision it was parsed and parses again only when the stored
//! object changed.

use super::view::Pod;
use crate::store::{Revision, StoreError, StoredObject};
use std::collections::HashMap;
use std::sync::Mutex;

/// (namespace, name) → the revision parsed and its view.
#[derive(Default)]
pub struct ParsedPods {
    by_name: Mutex<HashMap<(String, String), (Revision, Pod)>>,
}

impl ParsedPods {
    /// The view of the stored pod `item` in `namespace`, parsed now if this version was not.
    pub fn view(&self, namespace: &str, item: &StoredObject) -> Result<Pod, StoreError> {
        let name = item.index.field("metadata.name").unwrap_or_default();
        let key = (namespace.to_string(), name);
        let mut map = self.by_name.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((revision, pod)) = map.get(&key)
            && *revision == item.revision
        {
            return Ok(pod.clone());
        }
        let pod = Pod::from_value(&item.value()?);
        map.insert(key, (item.revision, pod.clone()));
        Ok(pod)
    }

    /// Drops a deleted pod.
    pub fn forget(&self, namespace: &str, name: &str) {
        self.by_name
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(namespace.to_string(), name.to_string()));
    }

    /// Drops everything (after a relist, which may have missed deletions).
    pub fn clear(&self) {
        self.by_name
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ObjectIndex;
    use serde_json::json;
    use std::sync::Arc;

    fn stored(revision: Revision, phase: &str) -> StoredObject {
        let v = json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "status": {"phase": phase}});
        StoredObject {
            revision,
            index: Arc::new(ObjectIndex::of(&v)),
            data: serde_json::to_vec(&v).unwrap().into(),
        }
    }

    #[test]
    fn a_pod_is_parsed_again_only_when_its_revision_changes() {
        let parsed = ParsedPods::default();
        assert_eq!(
            parsed.view("ns", &stored(1, "Pending")).unwrap().phase,
            "Pending"
        );
        // Same revision: the remembered view (even though these bytes say otherwise).
        assert_eq!(
            parsed.view("ns", &stored(1, "Running")).unwrap().phase,
            "Pending"
        );
        assert_eq!(
            parsed.view("ns", &stored(2, "Running")).unwrap().phase,
            "Running"
        );
        parsed.forget("ns", "p");
        assert_eq!(
            parsed.view("ns", &stored(2, "Failed")).unwrap().phase,
            "Failed"
        );
    }
}
