//! The owner's status write every workload controller makes: to the status subresource of the
//! object it read (the same uid: a replacement of the same name is not written), optionally
//! conditional on the `resourceVersion` the pass holds; an owner gone meanwhile is no failure.
//! Also the writer of the counts into a stored status ([`put_counts`]).

use super::controller_ref::uid_of;
use berth_registry::{Part, Registry, RegistryError, WriteOptions};
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use berth_shared::resource::ResourceType;
use jiff::Timestamp;
use serde_json::{Map, Value, json};

/// `now` as the API stores times (whole seconds), so that a condition or a time written and
/// read back compares equal to the one computed.
pub fn stamp(now: Timestamp) -> Time {
    Time(Timestamp::from_second(now.as_second()).unwrap_or(now))
}

/// Which object's status, and on what condition.
pub struct Target<'a> {
    pub resource: &'static ResourceType,
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    /// Written only if the object is still at this `resourceVersion` (else a conflict).
    pub expected_version: Option<&'a str>,
}

impl<'a> Target<'a> {
    /// The object `name` of uid `uid`, whatever its `resourceVersion`.
    pub fn of(
        resource: &'static ResourceType,
        namespace: &'a str,
        name: &'a str,
        uid: &'a str,
    ) -> Target<'a> {
        Target {
            resource,
            namespace,
            name,
            uid,
            expected_version: None,
        }
    }
}

/// Writes the status `edit` makes; the object as written, or `None` when it is gone.
pub fn write(
    registry: &Registry,
    target: &Target<'_>,
    mut edit: impl FnMut(&mut Value),
) -> Result<Option<Value>, RegistryError> {
    let r = registry.update_with(
        target.resource,
        Some(target.namespace),
        target.name,
        Part::Status,
        &WriteOptions::default(),
        |mut obj| {
            if uid_of(&obj) != Some(target.uid) {
                return Err(RegistryError::not_found(target.resource, target.name));
            }
            if let Some(v) = target.expected_version {
                obj["metadata"]["resourceVersion"] = json!(v);
            }
            edit(&mut obj);
            Ok(obj)
        },
    );
    match r {
        Ok(v) => Ok(Some(v)),
        Err(RegistryError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes counts into a stored object's `status` (made an object if it is not), keeping its
/// other fields; a count marked optional is omitted when 0, as the API's `omitempty`. The
/// status, for the caller's other fields (`None` when `obj` is not an object).
pub fn put_counts<'a>(
    obj: &'a mut Value,
    counts: &[(&str, i64, bool)],
) -> Option<&'a mut Map<String, Value>> {
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    let status = obj.get_mut("status").and_then(Value::as_object_mut)?;
    for &(key, n, optional) in counts {
        if optional && n == 0 {
            status.remove(key);
        } else {
            status.insert(key.into(), json!(n));
        }
    }
    Some(status)
}
