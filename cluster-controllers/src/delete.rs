//! Deleting exactly the version of an object that a pass planned with.

use berth_registry::{DeleteOptions, DeletePreconditions, Registry, RegistryError};
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use berth_shared::resource::ResourceType;

/// Deletes `name` of type `rt` in `ns` if it is still the object `read` describes (its uid
/// and resourceVersion); one already gone is fine, one written meanwhile is a conflict.
pub(crate) fn delete_unchanged(
    registry: &Registry,
    rt: &ResourceType,
    ns: Option<&str>,
    name: &str,
    read: &ObjectMeta,
) -> Result<(), RegistryError> {
    let opts = DeleteOptions {
        preconditions: Some(DeletePreconditions {
            uid: read.uid.clone(),
            resource_version: read.resource_version.clone(),
        }),
        ..DeleteOptions::default()
    };
    match registry.delete(rt, ns, name, &opts) {
        Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}
