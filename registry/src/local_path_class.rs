//! The built-in `local-path` StorageClass, as k3s ships its own: provisioner
//! `berth.io/local-path`, reclaim policy Delete, WaitForFirstConsumer, annotated as the
//! default class. Created at start when absent; a class someone changed is left as it is
//! (and one someone deleted comes back at the next start).

use berth_shared::admission::storage::{
    DEFAULT_CLASS_ANNOTATION, LOCAL_PATH_CLASS, LOCAL_PATH_PROVISIONER,
};
use berth_shared::resource::STORAGE_CLASSES;
use serde_json::json;

use crate::{Registry, RegistryError};

/// Creates the class unless a class of that name exists.
pub fn ensure(registry: &Registry) -> Result<(), RegistryError> {
    let class = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": LOCAL_PATH_CLASS,
                     "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
        "provisioner": LOCAL_PATH_PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer"});
    registry.create_if_missing(STORAGE_CLASSES, None, LOCAL_PATH_CLASS, class)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Part;
    use crate::WriteOptions;
    use serde_json::Value;

    fn stored_class(registry: &Registry) -> Value {
        registry
            .get(STORAGE_CLASSES, None, LOCAL_PATH_CLASS)
            .expect("stored")
            .value()
            .expect("json")
    }

    #[test]
    fn the_class_is_created_once_and_a_changed_one_is_kept() {
        let dir = tempfile::tempdir().expect("temp dir");
        let registry = crate::testing::registry(dir.path());
        ensure(&registry).expect("created");
        let sc = stored_class(&registry);
        assert_eq!(sc["provisioner"], LOCAL_PATH_PROVISIONER);
        assert_eq!(sc["volumeBindingMode"], "WaitForFirstConsumer");
        assert_eq!(sc["reclaimPolicy"], "Delete");
        assert_eq!(
            sc["metadata"]["annotations"][DEFAULT_CLASS_ANNOTATION],
            "true"
        );

        registry
            .update_with(
                STORAGE_CLASSES,
                None,
                LOCAL_PATH_CLASS,
                Part::Main,
                &WriteOptions::default(),
                |mut sc| {
                    sc["metadata"]["annotations"][DEFAULT_CLASS_ANNOTATION] = json!("false");
                    Ok::<_, RegistryError>(sc)
                },
            )
            .expect("changed");
        ensure(&registry).expect("kept");
        let sc = stored_class(&registry);
        assert_eq!(
            sc["metadata"]["annotations"][DEFAULT_CLASS_ANNOTATION],
            "false"
        );
    }
}
