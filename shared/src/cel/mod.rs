//! CEL for the API server: compiled expressions ([`Program`]) evaluated over JSON objects
//! ([`Activation`]) under a cost limit, with Kubernetes' CEL library on top of the `cel` crate.
//! CRD validation rules ([`rules`]) and ValidatingAdmissionPolicies both evaluate through here.

mod activation;
mod cost;
mod duration;
mod ip;
mod library;
mod lists;
mod program;
mod quantity;
mod regex;
pub mod rules;

mod url;

pub use activation::Activation;
pub use cost::{PER_CALL_LIMIT, RUNTIME_BUDGET};
pub use program::Program;

/// Why an expression could not be compiled or evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CelError {
    /// The expression does not parse (the parser's messages, as upstream prints them).
    #[error("{0}")]
    Compile(String),
    /// Evaluation failed: no such key, no matching overload, division by zero, ...
    #[error("{0}")]
    Eval(String),
    /// Evaluation spent more than its cost limit (see the `cost` module for what is counted).
    #[error("operation cancelled: actual cost limit exceeded")]
    CostLimit,
    /// The expression evaluated to a value of another type than the caller needs.
    #[error("expected {want}, got {got}")]
    Type { want: &'static str, got: String },
}

impl CelError {
    /// Whether the same evaluation could succeed later; CEL is deterministic, so never.
    pub fn is_transient(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests;
