//! The CEL environment expressions compile and run in: the `cel` crate's standard library and
//! its strings and lists extensions, plus what Kubernetes adds (lists, sets, regex `find`/`findAll`, quantity, URL, IP and CIDR,
//! `duration` without chrono
//! functions) and the cost meter's charging function. Built once per process.

use std::sync::{Arc, LazyLock};

use cel::common::types::CelString;
use cel::common::value::CowVal;
use cel::{Env, ExecutionError};

static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(build()));

/// The shared environment.
pub(crate) fn env() -> Arc<Env> {
    Arc::clone(&ENV)
}

fn build() -> Env {
    let mut env = Env::stdlib();
    let added = cel::extensions::strings(&mut env)
        .and_then(|()| cel::extensions::lists(&mut env))
        .and_then(|()| super::lists::register(&mut env))
        .and_then(|()| super::quantity::register(&mut env))
        .and_then(|()| super::url::register(&mut env))
        .and_then(|()| super::regex::register(&mut env))
        .and_then(|()| super::ip::register(&mut env))
        .and_then(|()| super::duration::register(&mut env))
        .and_then(|()| super::cost::register(&mut env));
    // Registration only fails on a duplicate declaration: a bug in this file, caught by every
    // test that compiles anything.
    if let Err(e) = added {
        panic!("CEL library declarations clash: {e}");
    }
    env
}

/// The arguments of a function of Kubernetes' library, the receiver first.
pub(super) type Args<'b, 'v> = Vec<CowVal<'b, 'v>>;
/// What a function of Kubernetes' library returns.
pub(super) type Out<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

/// The first argument as a string, or `function`'s error that it expected one.
pub(super) fn string_arg<'a>(
    args: &'a [CowVal<'_, '_>],
    function: &str,
) -> Result<&'a str, ExecutionError> {
    args.first()
        .and_then(|a| a.downcast_ref::<CelString>())
        .map(|s| s.inner())
        .ok_or_else(|| ExecutionError::function_error(function, "expected a string"))
}
