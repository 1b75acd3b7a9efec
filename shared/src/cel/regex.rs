//! Regular expressions for CEL: `matches` (the crate's own compiles its pattern on every call;
//! this one keeps compiled patterns in a bounded cache, so a rule checking every item of a list
//! compiles once) and Kubernetes' `find` / `findAll` (apiserver `library.Regex`).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use cel::common::types::{CelBool, CelInt, CelList, CelString, INT_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};
use regex::Regex;

use super::library::{Args, Out};

/// The name compiling gives `matches` calls (see `cost::instrument`); `@` cannot be written in
/// CEL source.
pub(crate) const MATCHES: &str = "@matches";

/// How many distinct patterns stay compiled; past it the cache starts over.
const CACHE_CAPACITY: usize = 1024;

/// Shared, not cloned: a `Regex` clone starts its own empty match-cache pool.
static CACHE: LazyLock<Mutex<HashMap<String, Arc<Regex>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// `pattern` compiled, from the cache when it was compiled before.
fn compiled(function: &str, pattern: &str) -> Result<Arc<Regex>, ExecutionError> {
    if let Some(re) = CACHE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(pattern)
    {
        return Ok(Arc::clone(re));
    }
    let re = Regex::new(pattern).map(Arc::new).map_err(|e| {
        ExecutionError::function_error(function, format!("'{pattern}' not a valid regex:\n{e}"))
    })?;
    let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    if cache.len() >= CACHE_CAPACITY {
        cache.clear();
    }
    cache.insert(pattern.to_string(), Arc::clone(&re));
    Ok(re)
}

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let s = || STRING_TYPE;
    env.add_overload(MATCHES, "matches_string", vec![s(), s()], matches)?;
    env.add_member_overload(MATCHES, "string_matches", s(), vec![s()], matches)?;
    env.add_member_overload("find", "string_find", s(), vec![s()], find)?;
    env.add_member_overload("findAll", "string_find_all", s(), vec![s()], find_all)?;
    env.add_member_overload(
        "findAll",
        "string_find_all_n",
        s(),
        vec![s(), INT_TYPE],
        find_all,
    )
}

fn string_at<'a>(args: &'a [CowVal<'_, '_>], i: usize) -> Result<&'a str, ExecutionError> {
    args.get(i)
        .and_then(|a| a.downcast_ref::<CelString>())
        .map(|s| s.inner())
        .ok_or_else(|| ExecutionError::invalid_argument_count(2, args.len()))
}

fn matches<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let re = compiled("matches", string_at(&args, 1)?)?;
    Ok(CowVal::owned(CelBool::from(
        re.is_match(string_at(&args, 0)?),
    )))
}

/// The first match, or the empty string.
fn find<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let re = compiled("find", string_at(&args, 1)?)?;
    let found = re
        .find(string_at(&args, 0)?)
        .map_or(String::new(), |m| m.as_str().to_string());
    Ok(CowVal::owned(CelString::from(found)))
}

/// Every match (at most `n` when `n` is given and not negative).
fn find_all<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let re = compiled("findAll", string_at(&args, 1)?)?;
    let limit = match args.get(2).and_then(|a| a.downcast_ref::<CelInt>()) {
        Some(n) if *n.inner() >= 0 => usize::try_from(*n.inner()).unwrap_or(usize::MAX),
        _ => usize::MAX,
    };
    let found: Vec<Box<dyn Val + 'v>> = re
        .find_iter(string_at(&args, 0)?)
        .take(limit)
        .map(|m| Box::new(CelString::from(m.as_str().to_string())) as Box<dyn Val + 'v>)
        .collect();
    Ok(CowVal::owned(CelList::from(found)))
}
