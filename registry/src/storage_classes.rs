//! The storage admission plugins that read StorageClasses from the store: upstream's
//! DefaultStorageClass (a claim created without a class gets the default one) and
//! PersistentVolumeClaimResize (a claim's request grows only if its class allows expansion).
//! The decisions are [`berth_shared::admission::storage`]'s; this module only observes.

use berth_shared::admission::storage;
use berth_shared::k8s_openapi::api::core::v1::PersistentVolumeClaim;
use berth_shared::k8s_openapi::api::storage::v1::StorageClass;
use berth_shared::resource::STORAGE_CLASSES;
use serde_json::Value;

use super::{Registry, RegistryError};

/// Every stored class that decodes.
fn observe_classes(registry: &Registry) -> Result<Vec<StorageClass>, RegistryError> {
    Ok(registry
        .list_values(STORAGE_CLASSES, None)?
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect())
}

/// DefaultStorageClass on a claim being created.
pub fn admit_new_claim(registry: &Registry, claim: &mut Value) -> Result<(), RegistryError> {
    let named = claim
        .pointer("/spec/storageClassName")
        .is_some_and(|c| !c.is_null());
    if !claim["spec"].is_object() || named {
        return Ok(());
    }
    let classes = observe_classes(registry)?;
    storage::fill_default_class(claim, &classes);
    Ok(())
}

/// PersistentVolumeClaimResize on an admitted claim update (`new` replacing `old`).
pub fn admit_claim_update(
    registry: &Registry,
    new: &Value,
    old: &Value,
) -> Result<(), RegistryError> {
    let (Ok(new_claim), Ok(old_claim)) = (
        serde_json::from_value::<PersistentVolumeClaim>(new.clone()),
        serde_json::from_value::<PersistentVolumeClaim>(old.clone()),
    ) else {
        return Ok(());
    };
    let class_name = new_claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default();
    let class = match class_name.as_str() {
        "" => None,
        name => match registry.get(STORAGE_CLASSES, None, name) {
            Ok(o) => serde_json::from_value(o.value()?).ok(),
            Err(RegistryError::NotFound { .. }) => None,
            Err(e) => return Err(e),
        },
    };
    if storage::resize_forbidden(&new_claim, &old_claim, class.as_ref()) {
        let name = new_claim.metadata.name.unwrap_or_default();
        return Err(RegistryError::Forbidden(format!(
            "persistentvolumeclaims \"{name}\" is forbidden: {}",
            storage::RESIZE_FORBIDDEN
        )));
    }
    Ok(())
}
