//! Query parameters of resource requests: the parser is `berth_shared::query`; this file turns
//! its values into the registry's write and delete options.

use super::error::ApiError;
use berth_registry::{DeleteOptions, WriteOptions};
pub use berth_shared::query::Query;
use berth_shared::query::QueryError;

impl From<QueryError> for ApiError {
    fn from(e: QueryError) -> ApiError {
        ApiError::BadRequest(e.to_string())
    }
}

/// Create/update options (`dryRun`, `fieldValidation`).
pub fn write_options(q: &Query) -> Result<WriteOptions, ApiError> {
    Ok(WriteOptions {
        dry_run: q.dry_run()?,
        field_validation: q.field_validation()?,
        node: None,
        guard: None,
        manager: q
            .get("fieldManager")
            .filter(|m| !m.is_empty())
            .map(String::from),
        apply: false,
        ..WriteOptions::default()
    })
}

/// DeleteOptions from the query (the Python client sends them this way).
pub fn delete_options(q: &Query) -> Result<DeleteOptions, ApiError> {
    Ok(DeleteOptions {
        grace_period_seconds: q.grace_period_seconds()?,
        propagation_policy: q.propagation_policy()?,
        orphan_dependents: q.orphan_dependents(),
        preconditions: None,
        dry_run: q.dry_run()?.then(|| vec!["All".to_string()]),
    })
}
