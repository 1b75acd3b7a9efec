//! CEL's `duration` without the `cel` crate's `chrono` feature (its time-zone database is
//! large): `duration('1h30m')` in Go's `time.ParseDuration` syntax, compared with `<`, `==` ...,
//! added and subtracted, and `getHours`, `getMinutes`, `getSeconds`, `getMilliseconds`,
//! `string(d)`. Gateway API's HTTPRoute timeouts compare durations this way; CRD fields with
//! `format: duration` reach rules as durations.

use std::cmp::Ordering;
use std::sync::LazyLock;

use cel::common::traits::{Adder, Comparer, Subtractor};
use cel::common::types::{CelInt, CelString, STRING_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use crate::go_duration::unit_nanos;

static DURATION_TYPE: LazyLock<Type> =
    LazyLock::new(|| Type::new_opaque_type("google.protobuf.Duration"));

/// A duration in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Duration(i128);

impl Duration {
    /// Go's `time.ParseDuration`: `300ms`, `-1.5h`, `2h45m`, `0`.
    pub(crate) fn parse(s: &str) -> Option<Duration> {
        let (negative, mut rest) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        if rest == "0" {
            return Some(Duration(0));
        }
        if rest.is_empty() {
            return None;
        }
        let mut total: f64 = 0.0;
        while !rest.is_empty() {
            let number_end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(rest.len());
            let (number, after) = rest.split_at(number_end);
            if number.is_empty() || number == "." || number.matches('.').count() > 1 {
                return None;
            }
            let unit_end = after
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(after.len());
            let (unit, after) = after.split_at(unit_end);
            total += number.parse::<f64>().ok()? * unit_nanos(unit)?;
            rest = after;
        }
        let nanos = total.round() as i128;
        Some(Duration(if negative { -nanos } else { nanos }))
    }

    /// As cel-go prints a duration: its seconds, then `s` (`90s`, `0.5s`).
    pub(crate) fn to_cel_string(self) -> String {
        let seconds = self.0 / 1_000_000_000;
        let frac = (self.0 % 1_000_000_000).abs();
        let sign = if self.0 < 0 && seconds == 0 { "-" } else { "" };
        if frac == 0 {
            format!("{sign}{seconds}s")
        } else {
            let digits = format!("{frac:09}");
            format!("{sign}{seconds}.{}s", digits.trim_end_matches('0'))
        }
    }
}

opaque_val!(Duration, DURATION_TYPE, {
    fn as_comparer(&self) -> Option<&dyn Comparer> {
        Some(self)
    }

    fn as_adder<'b, 'v>(&'b self) -> Option<&'b (dyn Adder + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn as_subtractor<'b, 'v>(&'b self) -> Option<&'b (dyn Subtractor + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }
});

fn other(op: &'static str, this: &Duration, rhs: &dyn Val) -> Result<Duration, ExecutionError> {
    rhs.downcast_ref::<Duration>().copied().ok_or_else(|| {
        ExecutionError::no_such_overload(
            op,
            vec![
                this.get_type().name().to_owned(),
                rhs.get_type().name().to_owned(),
            ],
        )
    })
}

impl Comparer for Duration {
    fn compare(&self, rhs: &dyn Val) -> Result<Ordering, ExecutionError> {
        Ok(self.0.cmp(&other("compare", self, rhs)?.0))
    }
}

impl Adder for Duration {
    fn add<'b, 'v>(&'b self, rhs: &(dyn Val + 'v)) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        Ok(CowVal::owned(Duration(self.0 + other("_+_", self, rhs)?.0)))
    }
}

impl Subtractor for Duration {
    fn sub<'b, 'v>(&'b self, rhs: &(dyn Val + 'v)) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        Ok(CowVal::owned(Duration(self.0 - other("_-_", self, rhs)?.0)))
    }
}

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let d = || DURATION_TYPE.to_owned();
    env.add_overload("duration", "string_to_duration", vec![STRING_TYPE], |a| {
        let s = string_at(&a)?;
        Duration::parse(s).map(CowVal::owned).ok_or_else(|| {
            ExecutionError::function_error("duration", format!("time: invalid duration {s:?}"))
        })
    })?;
    env.add_overload("string", "duration_to_string", vec![d()], |a| {
        Ok(CowVal::owned(CelString::from(this(&a)?.to_cel_string())))
    })?;
    let units = [
        ("getHours", "duration_hours"),
        ("getMinutes", "duration_minutes"),
        ("getSeconds", "duration_seconds"),
        ("getMilliseconds", "duration_milliseconds"),
    ];
    let ops: [cel::common::functions::Function; 4] = [
        |a| in_units(&a, 3_600_000_000_000),
        |a| in_units(&a, 60_000_000_000),
        |a| in_units(&a, 1_000_000_000),
        |a| in_units(&a, 1_000_000),
    ];
    for ((name, id), op) in units.into_iter().zip(ops) {
        env.add_member_overload(name, id, d(), vec![], op)?;
    }
    Ok(())
}

fn string_at<'a>(args: &'a [CowVal<'_, '_>]) -> Result<&'a str, ExecutionError> {
    args.first()
        .and_then(|a| a.downcast_ref::<CelString>())
        .map(|s| s.inner())
        .ok_or_else(ExecutionError::missing_argument_or_target)
}

fn this(args: &[CowVal<'_, '_>]) -> Result<Duration, ExecutionError> {
    args.first()
        .and_then(|a| a.downcast_ref::<Duration>())
        .copied()
        .ok_or_else(ExecutionError::missing_argument_or_target)
}

/// The whole number of `unit`s in the receiver (truncated toward zero, as cel-go).
fn in_units<'b, 'v>(args: &[CowVal<'_, '_>], unit: i128) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let n = this(args)?.0 / unit;
    let n = i64::try_from(n).map_err(|_| ExecutionError::function_error("duration", "overflow"))?;
    Ok(CowVal::owned(CelInt::from(n)))
}
