//! What the controllers' in-process tests share: writing an object's status in the place of
//! the kubelet or a node, as the tests play them.

use crate::registry::{Part, Registry, RegistryError, WriteOptions};
use berth_shared::resource::ResourceType;
use serde_json::Value;

/// Edits the status of `name` (in `default` when the type is namespaced) with `edit`.
pub fn edit_status(registry: &Registry, rt: &ResourceType, name: &str, edit: impl Fn(&mut Value)) {
    let ns = rt.namespaced.then_some("default");
    registry
        .update_with(
            rt,
            ns,
            name,
            Part::Status,
            &WriteOptions::default(),
            |mut obj| {
                edit(&mut obj);
                Ok::<_, RegistryError>(obj)
            },
        )
        .expect("status write");
}
