//! CEL for the API server: compiled expressions ([`Program`]) evaluated over JSON objects
//! ([`Activation`]) under a cost limit, with Kubernetes' CEL library on top of the `cel` crate.
//! CRD validation rules ([`rules`]) and ValidatingAdmissionPolicies both evaluate through here.

/// `impl Val` and `StaticVal` for an opaque CEL type of Kubernetes' library (`Quantity`, `IP`,
/// `URL`, ...): typed as `$type`, equal by `PartialEq`; `$extra` adds trait views such as
/// `as_comparer`. Defined before the modules so each of them can use it.
macro_rules! opaque_val {
    ($t:ty, $type:expr $(, { $($extra:item)* })?) => {
        impl ::cel::common::value::Val for $t {
            fn get_type(&self) -> &::cel::common::types::Type {
                &$type
            }
            fn cel_type() -> &'static ::cel::common::types::Type {
                &$type
            }
            fn equals(&self, other: &dyn ::cel::common::value::Val) -> bool {
                other.downcast_ref::<$t>().is_some_and(|o| o == self)
            }
            fn clone_as_boxed<'v>(&self) -> Box<dyn ::cel::common::value::Val + 'v>
            where
                Self: 'v,
            {
                Box::new(Clone::clone(self))
            }
            fn as_any(&self) -> Option<&dyn std::any::Any> {
                Some(self)
            }
            $($($extra)*)?
        }
        impl ::cel::common::value::StaticVal for $t {}
    };
}

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
