//! Kubernetes' quantity functions (apiserver `library.Quantity`): `quantity(s)`,
//! `isQuantity(s)`, and on a quantity `sign`, `isInteger`, `asInteger`, `asApproximateFloat`,
//! `add`, `sub`, `isLessThan`, `isGreaterThan`, `compareTo`; equality is numeric
//! (`quantity('1') == quantity('1000m')`), as upstream's `Quantity.Equal`.
//!
//! Values are exact counts of nano-units (what `berth_api::quantity` parses to), so sums and
//! comparisons need no floating point.

use std::cmp::Ordering;
use std::sync::LazyLock;

use crate::quantity::Quantity as Parsed;
use cel::common::types::{CelBool, CelDouble, CelInt, INT_TYPE, STRING_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use super::library::{Args, Out, string_arg};

static QUANTITY_TYPE: LazyLock<Type> =
    LazyLock::new(|| Type::new_opaque_type("kubernetes.Quantity"));

const NANOS_PER_UNIT: i128 = 1_000_000_000;

/// A quantity as a CEL value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Quantity {
    nanos: i128,
}

impl Quantity {
    fn parse(s: &str) -> Option<Quantity> {
        Parsed::parse(s).ok().map(|q| Quantity {
            nanos: nanos_of(&q),
        })
    }
}

/// The exact nano-unit count of a parsed quantity. `berth_api`'s quantity exposes comparisons
/// only, so this finds the count `n` with `parse("{n}n") == q`: one comparison for anything
/// that is a whole number of milli-units, a bisection of the milli-unit otherwise.
fn nanos_of(q: &Parsed) -> i128 {
    let at = |n: i128| Parsed::parse(&format!("{n}n")).map_or(Ordering::Less, |p| p.cmp_to(q));
    let millis = i128::from(q.millis());
    let (mut lo, mut hi) = if millis.abs() < i128::from(i64::MAX) {
        let top = millis * 1_000_000;
        if at(top) == Ordering::Equal {
            return top;
        }
        (top - 1_000_000, top)
    } else {
        (i128::MIN / 2, i128::MAX / 2)
    };
    // Invariant: at(lo) is Less, at(hi) is not Less.
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if at(mid) == Ordering::Less {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

impl std::fmt::Display for Quantity {
    /// Canonical form: whole units, else milli, micro or nano units.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.nanos;
        if n % NANOS_PER_UNIT == 0 {
            write!(f, "{}", n / NANOS_PER_UNIT)
        } else if n % 1_000_000 == 0 {
            write!(f, "{}m", n / 1_000_000)
        } else if n % 1_000 == 0 {
            write!(f, "{}u", n / 1_000)
        } else {
            write!(f, "{n}n")
        }
    }
}

opaque_val!(Quantity, QUANTITY_TYPE);

/// `value` as a quantity, if it is one.
pub(crate) fn as_quantity(value: &dyn Val) -> Option<Quantity> {
    value.downcast_ref::<Quantity>().copied()
}

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let q = || QUANTITY_TYPE.to_owned();
    env.add_overload(
        "quantity",
        "string_to_quantity",
        vec![STRING_TYPE],
        quantity,
    )?;
    env.add_overload(
        "isQuantity",
        "is_quantity_string",
        vec![STRING_TYPE],
        is_quantity,
    )?;
    env.add_member_overload("sign", "quantity_sign", q(), vec![], sign)?;
    env.add_member_overload("isInteger", "quantity_is_integer", q(), vec![], is_integer)?;
    env.add_member_overload("asInteger", "quantity_as_integer", q(), vec![], as_integer)?;
    env.add_member_overload(
        "asApproximateFloat",
        "quantity_as_float",
        q(),
        vec![],
        as_approximate_float,
    )?;
    env.add_member_overload("add", "quantity_add", q(), vec![q()], add)?;
    env.add_member_overload("add", "quantity_add_int", q(), vec![INT_TYPE], add)?;
    env.add_member_overload("sub", "quantity_sub", q(), vec![q()], sub)?;
    env.add_member_overload("sub", "quantity_sub_int", q(), vec![INT_TYPE], sub)?;
    env.add_member_overload("isLessThan", "quantity_less", q(), vec![q()], is_less_than)?;
    env.add_member_overload(
        "isGreaterThan",
        "quantity_greater",
        q(),
        vec![q()],
        is_greater_than,
    )?;
    env.add_member_overload("compareTo", "quantity_compare", q(), vec![q()], compare_to)
}

/// The receiver and, for binary functions, the other operand (a quantity, or an int as
/// that many units).
fn operands(
    args: &[CowVal<'_, '_>],
    function: &str,
) -> Result<(Quantity, Option<Quantity>), ExecutionError> {
    let this = args
        .first()
        .and_then(|a| as_quantity(a.as_ref()))
        .ok_or_else(|| ExecutionError::function_error(function, "expected a quantity"))?;
    let other = match args.get(1) {
        None => None,
        Some(a) => Some(match a.downcast_ref::<CelInt>() {
            Some(i) => Quantity {
                nanos: i128::from(*i.inner()) * NANOS_PER_UNIT,
            },
            None => as_quantity(a.as_ref())
                .ok_or_else(|| ExecutionError::function_error(function, "expected a quantity"))?,
        }),
    };
    Ok((this, other))
}

fn quantity<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let s = string_arg(&args, "quantity")?;
    Quantity::parse(s)
        .map(CowVal::owned)
        .ok_or_else(|| ExecutionError::function_error("quantity", "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"))
}

fn is_quantity<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let s = string_arg(&args, "isQuantity")?;
    Ok(CowVal::owned(CelBool::from(Parsed::parse(s).is_ok())))
}

fn sign<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (q, _) = operands(&args, "sign")?;
    Ok(CowVal::owned(CelInt::from(q.nanos.signum() as i64)))
}

fn whole_units(q: Quantity) -> Option<i64> {
    if q.nanos % NANOS_PER_UNIT != 0 {
        return None;
    }
    i64::try_from(q.nanos / NANOS_PER_UNIT).ok()
}

fn is_integer<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (q, _) = operands(&args, "isInteger")?;
    Ok(CowVal::owned(CelBool::from(whole_units(q).is_some())))
}

fn as_integer<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (q, _) = operands(&args, "asInteger")?;
    whole_units(q)
        .map(|i| CowVal::owned(CelInt::from(i)))
        .ok_or_else(|| {
            ExecutionError::function_error("asInteger", "cannot convert value to integer")
        })
}

fn as_approximate_float<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (q, _) = operands(&args, "asApproximateFloat")?;
    Ok(CowVal::owned(CelDouble::from(
        q.nanos as f64 / NANOS_PER_UNIT as f64,
    )))
}

fn arithmetic<'b, 'v>(args: Args<'b, 'v>, function: &str, sign: i128) -> Out<'b, 'v> {
    let (a, b) = operands(&args, function)?;
    let b = b.ok_or_else(|| ExecutionError::invalid_argument_count(2, 1))?;
    let nanos = b
        .nanos
        .checked_mul(sign)
        .and_then(|b| a.nanos.checked_add(b))
        .ok_or_else(|| ExecutionError::function_error(function, "quantity overflow"))?;
    Ok(CowVal::owned(Quantity { nanos }))
}

fn add<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    arithmetic(args, "add", 1)
}

fn sub<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    arithmetic(args, "sub", -1)
}

fn ordering(args: &[CowVal<'_, '_>], function: &str) -> Result<Ordering, ExecutionError> {
    let (a, b) = operands(args, function)?;
    let b = b.ok_or_else(|| ExecutionError::invalid_argument_count(2, 1))?;
    Ok(a.nanos.cmp(&b.nanos))
}

fn is_less_than<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let o = ordering(&args, "isLessThan")?;
    Ok(CowVal::owned(CelBool::from(o == Ordering::Less)))
}

fn is_greater_than<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let o = ordering(&args, "isGreaterThan")?;
    Ok(CowVal::owned(CelBool::from(o == Ordering::Greater)))
}

fn compare_to<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let o = ordering(&args, "compareTo")?;
    Ok(CowVal::owned(CelInt::from(o as i64)))
}
