//! Kubernetes' list functions (apiserver `library.Lists`) that the `cel` crate lacks:
//! `isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`; and cel-go's sets extension that
//! Kubernetes' environment includes: `sets.contains`, `sets.equivalent`, `sets.intersects`.

use std::cmp::Ordering;

use cel::common::types::{CelBool, CelInt, DYN_TYPE, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    env.add_member_overload(
        "indexOf",
        "list_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )?;
    let two_lists = || vec![LIST_TYPE, LIST_TYPE];
    env.add_overload("sets.contains", "sets_contains", two_lists(), sets_contains)?;
    env.add_overload(
        "sets.equivalent",
        "sets_equivalent",
        two_lists(),
        sets_equivalent,
    )?;
    env.add_overload(
        "sets.intersects",
        "sets_intersects",
        two_lists(),
        sets_intersects,
    )
}

/// The elements of the receiver (the first argument).
fn items<'b, 'v>(args: &'b [CowVal<'_, 'v>]) -> Result<Vec<&'b (dyn Val + 'v)>, ExecutionError> {
    items_at(args, 0)
}

/// The elements of the list argument at `index`.
fn items_at<'b, 'v>(
    args: &'b [CowVal<'_, 'v>],
    index: usize,
) -> Result<Vec<&'b (dyn Val + 'v)>, ExecutionError> {
    let list = args
        .get(index)
        .ok_or_else(ExecutionError::missing_argument_or_target)?;
    let iterable = list
        .as_iterable()
        .ok_or_else(|| ExecutionError::UnexpectedType {
            got: list.get_type().name().to_owned(),
            want: "list".to_owned(),
        })?;
    let mut out = Vec::new();
    let mut it = iterable.iter();
    while let Some(v) = it.next() {
        out.push(v);
    }
    Ok(out)
}

fn compare(function: &str, a: &dyn Val, b: &dyn Val) -> Result<Ordering, ExecutionError> {
    a.as_comparer()
        .ok_or_else(|| {
            ExecutionError::no_such_overload(function, vec![a.get_type().name().to_owned()])
        })?
        .compare(b)
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = items(&args)?;
    for pair in items.windows(2) {
        if compare("isSorted", pair[0], pair[1])? == Ordering::Greater {
            return Ok(CowVal::owned(CelBool::from(false)));
        }
    }
    Ok(CowVal::owned(CelBool::from(true)))
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = items(&args)?;
    let Some((first, rest)) = items.split_first() else {
        return Ok(CowVal::owned(CelInt::from(0)));
    };
    let mut total: Box<dyn Val + 'v> = first.clone_as_boxed();
    for item in rest {
        let adder = total.as_adder().ok_or_else(|| {
            ExecutionError::no_such_overload("sum", vec![total.get_type().name().to_owned()])
        })?;
        let next = adder.add(*item)?.into_owned();
        total = next;
    }
    Ok(CowVal::from(total))
}

fn extreme<'b, 'v>(
    function: &str,
    args: Vec<CowVal<'b, 'v>>,
    keep: Ordering,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = items(&args)?;
    let Some((first, rest)) = items.split_first() else {
        return Err(ExecutionError::function_error(
            function,
            format!("{function} called on empty list"),
        ));
    };
    let mut best = *first;
    for item in rest {
        if compare(function, *item, best)? == keep {
            best = *item;
        }
    }
    Ok(CowVal::from(best.clone_as_boxed()))
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme("min", args, Ordering::Less)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme("max", args, Ordering::Greater)
}

fn position<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    last: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let needle = args
        .get(1)
        .ok_or_else(|| ExecutionError::invalid_argument_count(2, args.len()))?;
    let items = items(&args)?;
    let found = if last {
        items.iter().rposition(|v| v.equals(needle.as_ref()))
    } else {
        items.iter().position(|v| v.equals(needle.as_ref()))
    };
    let index = found.map_or(-1, |i| i64::try_from(i).unwrap_or(i64::MAX));
    Ok(CowVal::owned(CelInt::from(index)))
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(args, false)
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(args, true)
}

/// Whether every element of `sub` is in `of`.
fn all_in(sub: &[&dyn Val], of: &[&dyn Val]) -> bool {
    sub.iter().all(|x| of.iter().any(|y| x.equals(*y)))
}

/// `sets.contains(a, b)`: every element of `b` is in `a`.
fn sets_contains<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = (items_at(&args, 0)?, items_at(&args, 1)?);
    Ok(CowVal::owned(CelBool::from(all_in(&b, &a))))
}

/// `sets.equivalent(a, b)`: each contains the other.
fn sets_equivalent<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = (items_at(&args, 0)?, items_at(&args, 1)?);
    Ok(CowVal::owned(CelBool::from(
        all_in(&a, &b) && all_in(&b, &a),
    )))
}

/// `sets.intersects(a, b)`: some element is in both.
fn sets_intersects<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = (items_at(&args, 0)?, items_at(&args, 1)?);
    let any = a.iter().any(|x| b.iter().any(|y| x.equals(*y)));
    Ok(CowVal::owned(CelBool::from(any)))
}
