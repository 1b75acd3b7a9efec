//! The built-in `berth` IngressClass, as k3s ships Traefik's: controller `berth.io/ingress`
//! (served by every agent's ingress proxy), annotated as the cluster's default class. Created at
//! start when absent; a class someone changed is left as it is (and one someone deleted comes
//! back at the next start).

use berth_shared::ingress_class::{CLASS, CONTROLLER, DEFAULT_CLASS_ANNOTATION};
use berth_shared::resource::INGRESS_CLASSES;
use serde_json::json;

use crate::{Registry, RegistryError};

/// Creates the class unless a class of that name exists.
pub fn ensure(registry: &Registry) -> Result<(), RegistryError> {
    let class = json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
        "metadata": {"name": CLASS,
                     "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
        "spec": {"controller": CONTROLLER}});
    registry.create_if_missing(INGRESS_CLASSES, None, CLASS, class)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Part;
    use crate::WriteOptions;
    use serde_json::Value;

    fn stored(registry: &Registry) -> Value {
        registry
            .get(INGRESS_CLASSES, None, CLASS)
            .expect("stored")
            .value()
            .expect("json")
    }

    #[test]
    fn the_class_is_created_once_and_a_changed_one_is_kept() {
        let dir = tempfile::tempdir().expect("temp dir");
        let registry = crate::testing::registry(dir.path());
        ensure(&registry).expect("created");
        let class = stored(&registry);
        assert_eq!(class["spec"]["controller"], CONTROLLER);
        assert_eq!(
            class["metadata"]["annotations"][DEFAULT_CLASS_ANNOTATION],
            "true"
        );
        registry
            .update_with(
                INGRESS_CLASSES,
                None,
                CLASS,
                Part::Main,
                &WriteOptions::default(),
                |mut c| {
                    c["metadata"]["annotations"][DEFAULT_CLASS_ANNOTATION] = json!("false");
                    Ok::<_, RegistryError>(c)
                },
            )
            .expect("changed");
        ensure(&registry).expect("kept");
        assert_eq!(
            stored(&registry)["metadata"]["annotations"][DEFAULT_CLASS_ANNOTATION],
            "false"
        );
    }
}
