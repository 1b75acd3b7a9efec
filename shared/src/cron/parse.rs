//! The schedule syntax upstream accepts (robfig/cron's standard parser, as `cron.ParseStandard`):
//! five fields with lists, ranges, steps and month/day names, `?` for `*`, a descriptor such as
//! `@daily` or `@every 1h30m`, and a `TZ=`/`CRON_TZ=` prefix. The error texts are robfig's.
//! One departure, from the seeds: day-of-week 7 is Sunday, as "on some systems".

use super::{Kind, STAR, Schedule, Spec, load_zone};
use crate::go_duration::unit_nanos;

/// Why a schedule does not parse; the texts are robfig's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("empty spec string")]
    Empty,
    #[error("expected exactly 5 fields, found {count}: [{fields}]")]
    FieldCount { count: usize, fields: String },
    #[error("provided bad location {zone}: unknown time zone {zone}")]
    BadLocation { zone: String },
    #[error("unrecognized descriptor: {0}")]
    UnknownDescriptor(String),
    #[error("failed to parse duration {spec}: {error}")]
    Duration { spec: String, error: DurationError },
    #[error("too many slashes: {0}")]
    TooManySlashes(String),
    #[error("too many hyphens: {0}")]
    TooManyHyphens(String),
    #[error("failed to parse int from {expr}: {error}")]
    NotAnInt { expr: String, error: IntError },
    #[error("negative number ({value}) not allowed: {expr}")]
    Negative { value: i64, expr: String },
    #[error("beginning of range ({start}) below minimum ({min}): {expr}")]
    BelowMinimum { start: u64, min: u64, expr: String },
    #[error("end of range ({end}) above maximum ({max}): {expr}")]
    AboveMaximum { end: u64, max: u64, expr: String },
    #[error("beginning of range ({start}) beyond end of range ({end}): {expr}")]
    StartAfterEnd { start: u64, end: u64, expr: String },
    #[error("step of range should be a positive number: {0}")]
    ZeroStep(String),
}

/// Go's `strconv.Atoi` errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntError {
    #[error("strconv.Atoi: parsing \"{0}\": invalid syntax")]
    Syntax(String),
    #[error("strconv.Atoi: parsing \"{0}\": value out of range")]
    Range(String),
}

/// Go's `time.ParseDuration` errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("time: invalid duration \"{0}\"")]
    Invalid(String),
    #[error("time: missing unit in duration \"{0}\"")]
    MissingUnit(String),
    #[error("time: unknown unit \"{unit}\" in duration \"{duration}\"")]
    UnknownUnit { unit: String, duration: String },
}

/// One schedule field's allowed range and names.
struct Bounds {
    min: u64,
    max: u64,
    /// The last value `*` and `N/step` reach (day-of-week: 6, though 7 may be named).
    span: u64,
    names: &'static [(&'static str, u64)],
}

impl Bounds {
    /// A field of plain numbers `min..=max`, all of which `*` reaches.
    const fn numbers(min: u64, max: u64) -> Bounds {
        Bounds {
            min,
            max,
            span: max,
            names: &[],
        }
    }
}

const MONTHS: &[(&str, u64)] = &[
    ("jan", 1),
    ("feb", 2),
    ("mar", 3),
    ("apr", 4),
    ("may", 5),
    ("jun", 6),
    ("jul", 7),
    ("aug", 8),
    ("sep", 9),
    ("oct", 10),
    ("nov", 11),
    ("dec", 12),
];
const DAYS: &[(&str, u64)] = &[
    ("sun", 0),
    ("mon", 1),
    ("tue", 2),
    ("wed", 3),
    ("thu", 4),
    ("fri", 5),
    ("sat", 6),
];

const MINUTE: Bounds = Bounds::numbers(0, 59);
const HOUR: Bounds = Bounds::numbers(0, 23);
const DOM: Bounds = Bounds::numbers(1, 31);
const MONTH: Bounds = Bounds {
    min: 1,
    max: 12,
    span: 12,
    names: MONTHS,
};
/// Up to 7: the seeds' "7 is also Sunday" (robfig stops at 6).
const DOW: Bounds = Bounds {
    min: 0,
    max: 7,
    span: 6,
    names: DAYS,
};

pub(super) fn parse(spec: &str) -> Result<Schedule, ScheduleError> {
    if spec.is_empty() {
        return Err(ScheduleError::Empty);
    }
    let mut spec = spec;
    let mut zone = None;
    if Schedule::has_zone_prefix(spec) {
        let (prefix, rest) = spec.split_once(' ').unwrap_or((spec, ""));
        let name = prefix.split_once('=').map_or("", |(_, n)| n);
        let tz = load_zone(name).map_err(|_| ScheduleError::BadLocation {
            zone: name.to_string(),
        })?;
        zone = Some(tz);
        spec = rest.trim();
    }
    let kind = if spec.starts_with('@') {
        descriptor(spec)?
    } else {
        Kind::Spec(fields(spec)?)
    };
    Ok(Schedule { kind, zone })
}

fn fields(spec: &str) -> Result<Spec, ScheduleError> {
    let fields: Vec<&str> = spec.split_whitespace().collect();
    let [minute, hour, dom, month, dow] = fields[..] else {
        return Err(ScheduleError::FieldCount {
            count: fields.len(),
            fields: fields.join(" "),
        });
    };
    let mut dow = field(dow, &DOW)?;
    if dow & (1 << 7) != 0 {
        dow = (dow & !(1 << 7)) | 1;
    }
    Ok(Spec {
        minute: field(minute, &MINUTE)?,
        hour: field(hour, &HOUR)?,
        dom: field(dom, &DOM)?,
        month: field(month, &MONTH)?,
        dow,
    })
}

/// The bits of every value `lo..=hi`, plus [`STAR`] for `*`.
fn all(b: &Bounds) -> u64 {
    bits(b.min, b.span, 1) | STAR
}

fn descriptor(d: &str) -> Result<Kind, ScheduleError> {
    let (min, hour, dom, month, dow) = (1 << 0, 1 << 0, 1 << 1, 1 << 1, 1 << 0);
    let spec = |minute, hour, dom, month, dow| {
        Ok(Kind::Spec(Spec {
            minute,
            hour,
            dom,
            month,
            dow,
        }))
    };
    match d {
        "@yearly" | "@annually" => spec(min, hour, dom, month, all(&DAYS_ONLY)),
        "@monthly" => spec(min, hour, dom, all(&MONTH), all(&DAYS_ONLY)),
        "@weekly" => spec(min, hour, all(&DOM), all(&MONTH), dow),
        "@daily" | "@midnight" => spec(min, hour, all(&DOM), all(&MONTH), all(&DAYS_ONLY)),
        "@hourly" => spec(min, all(&HOUR), all(&DOM), all(&MONTH), all(&DAYS_ONLY)),
        _ => match d.strip_prefix("@every ") {
            Some(dur) => {
                let nanos = go_duration(dur).map_err(|error| ScheduleError::Duration {
                    spec: d.to_string(),
                    error,
                })?;
                // robfig's `Every`: at least a second, rounded down to whole seconds.
                Ok(Kind::Every((nanos / 1_000_000_000).max(1)))
            }
            None => Err(ScheduleError::UnknownDescriptor(d.to_string())),
        },
    }
}

/// Day-of-week bounds without the seeds' 7, for the descriptors' "every day".
const DAYS_ONLY: Bounds = Bounds {
    min: 0,
    max: 6,
    span: 6,
    names: DAYS,
};

fn field(text: &str, b: &Bounds) -> Result<u64, ScheduleError> {
    text.split(',')
        .try_fold(0, |acc, expr| Ok(acc | range(expr, b)?))
}

/// One comma-separated element: `*`, `?`, `N`, `N-M`, each optionally `/step`.
fn range(expr: &str, b: &Bounds) -> Result<u64, ScheduleError> {
    let mut range_and_step = expr.split('/');
    let range = range_and_step.next().unwrap_or_default();
    let step_part = range_and_step.next();
    if range_and_step.next().is_some() {
        return Err(ScheduleError::TooManySlashes(expr.to_string()));
    }
    let low_high: Vec<&str> = range.split('-').collect();
    let single = low_high.len() == 1;
    let mut extra = 0;
    let (start, mut end) = if low_high[0] == "*" || low_high[0] == "?" {
        extra = STAR;
        (b.min, b.span)
    } else {
        let start = int_or_name(low_high[0], b)?;
        let end = match low_high.len() {
            1 => start,
            2 => int_or_name(low_high[1], b)?,
            _ => return Err(ScheduleError::TooManyHyphens(expr.to_string())),
        };
        (start, end)
    };
    let step = match step_part {
        None => 1,
        Some(s) => {
            let step = must_parse_int(s)?;
            // "N/step" means "N-max/step".
            if single {
                end = b.span;
            }
            if step > 1 {
                extra = 0;
            }
            step
        }
    };
    let expr = expr.to_string();
    if start < b.min {
        return Err(ScheduleError::BelowMinimum {
            start,
            min: b.min,
            expr,
        });
    }
    if end > b.max {
        return Err(ScheduleError::AboveMaximum {
            end,
            max: b.max,
            expr,
        });
    }
    if start > end {
        return Err(ScheduleError::StartAfterEnd { start, end, expr });
    }
    if step == 0 {
        return Err(ScheduleError::ZeroStep(expr));
    }
    Ok(bits(start, end, step) | extra)
}

/// Bits `start, start+step, … ≤ end`.
fn bits(start: u64, end: u64, step: u64) -> u64 {
    (start..=end)
        .step_by(usize::try_from(step).unwrap_or(usize::MAX))
        .fold(0, |acc, v| acc | (1 << v))
}

fn int_or_name(expr: &str, b: &Bounds) -> Result<u64, ScheduleError> {
    let lower = expr.to_lowercase();
    match b.names.iter().find(|(n, _)| *n == lower) {
        Some((_, v)) => Ok(*v),
        None => must_parse_int(expr),
    }
}

/// Go's `strconv.Atoi` plus robfig's non-negative rule.
fn must_parse_int(expr: &str) -> Result<u64, ScheduleError> {
    let digits = expr.strip_prefix(['+', '-']).unwrap_or(expr);
    let not_int = |error| ScheduleError::NotAnInt {
        expr: expr.to_string(),
        error,
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(not_int(IntError::Syntax(expr.to_string())));
    }
    let Ok(n) = expr.parse::<i64>() else {
        return Err(not_int(IntError::Range(expr.to_string())));
    };
    u64::try_from(n).map_err(|_| ScheduleError::Negative {
        value: n,
        expr: expr.to_string(),
    })
}

/// Go's `time.ParseDuration`: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or `0`; nanoseconds.
fn go_duration(s: &str) -> Result<i64, DurationError> {
    let invalid = || DurationError::Invalid(s.to_string());
    let negative = s.starts_with('-');
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    if body == "0" {
        return Ok(0);
    }
    if body.is_empty() {
        return Err(invalid());
    }
    let mut total: f64 = 0.0;
    let mut rest = body;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_len);
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(invalid());
        }
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        if unit.is_empty() {
            return Err(DurationError::MissingUnit(s.to_string()));
        }
        let Some(scale) = unit_nanos(unit) else {
            return Err(DurationError::UnknownUnit {
                unit: unit.to_string(),
                duration: s.to_string(),
            });
        };
        total += num.parse::<f64>().map_err(|_| invalid())? * scale;
        rest = next;
    }
    if total > i64::MAX as f64 {
        return Err(invalid());
    }
    // Whole nanoseconds, as Go keeps them.
    #[allow(clippy::cast_possible_truncation)]
    let nanos = total as i64;
    Ok(if negative { -nanos } else { nanos })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_err(s: &str) -> String {
        match parse(s) {
            Ok(_) => "ok".to_string(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn valid_schedules_parse() {
        for s in [
            "*/5 * * * *",
            "0 0 * * 0",
            "0 0 * * 7",
            "30 2 1-15/2 JAN-mar mon,wed,FRI",
            "0 12 ? * *",
            "5 4 * * sun",
            "0 0 31 2 *",
            "@hourly",
            "@every 1h30m",
            "@every 0",
            "TZ=UTC 0 1 * * *",
            "CRON_TZ=Asia/Kolkata 0 1 * * *",
        ] {
            assert_eq!(parse_err(s), "ok", "{s}");
        }
    }

    #[test]
    fn invalid_schedules_report_robfig_errors() {
        let cases = [
            ("", "empty spec string"),
            ("* * *", "expected exactly 5 fields, found 3: [* * *]"),
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            ("* 24 * * *", "end of range (24) above maximum (23): 24"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            ("* * * 13 *", "end of range (13) above maximum (12): 13"),
            ("* * * * 8", "end of range (8) above maximum (7): 8"),
            (
                "5-1 * * * *",
                "beginning of range (5) beyond end of range (1): 5-1",
            ),
            (
                "*/0 * * * *",
                "step of range should be a positive number: */0",
            ),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            ("*/2/3 * * * *", "too many slashes: */2/3"),
            (
                "-1 * * * *",
                "failed to parse int from : strconv.Atoi: parsing \"\": invalid syntax",
            ),
            ("+1-2 * * * *", "ok"),
            (
                "x * * * *",
                "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax",
            ),
            (
                "* * * FOO *",
                "failed to parse int from FOO: strconv.Atoi: parsing \"FOO\": invalid syntax",
            ),
            ("@fortnightly", "unrecognized descriptor: @fortnightly"),
            (
                "@every 5",
                "failed to parse duration @every 5: time: missing unit in duration \"5\"",
            ),
            (
                "@every 5d",
                "failed to parse duration @every 5d: time: unknown unit \"d\" in duration \"5d\"",
            ),
            (
                "TZ=Mars/Base * * * * *",
                "provided bad location Mars/Base: unknown time zone Mars/Base",
            ),
        ];
        for (s, want) in cases {
            assert_eq!(parse_err(s), want, "{s}");
        }
    }

    #[test]
    fn every_rounds_down_to_whole_seconds_and_at_least_one() {
        let every = |s: &str| parse(s).map(|p| p.kind);
        assert_eq!(every("@every 1h30m"), Ok(Kind::Every(5400)));
        assert_eq!(every("@every 1.5s"), Ok(Kind::Every(1)));
        assert_eq!(every("@every 0"), Ok(Kind::Every(1)));
        assert_eq!(every("@every 2500ms"), Ok(Kind::Every(2)));
    }

    #[test]
    fn macros_are_their_five_field_equivalents() {
        let kind = |s: &str| parse(s).map(|p| p.kind);
        for (macro_, fields) in [
            ("@yearly", "0 0 1 1 *"),
            ("@annually", "0 0 1 1 *"),
            ("@monthly", "0 0 1 * *"),
            ("@weekly", "0 0 * * 0"),
            ("@daily", "0 0 * * *"),
            ("@midnight", "0 0 * * *"),
            ("@hourly", "0 * * * *"),
        ] {
            assert_eq!(kind(macro_), kind(fields), "{macro_}");
        }
    }

    #[test]
    fn question_mark_is_star_and_seven_is_sunday() {
        let kind = |s: &str| parse(s).map(|p| p.kind);
        assert_eq!(kind("0 0 ? * *"), kind("0 0 * * *"));
        assert_eq!(kind("0 0 * * 7"), kind("0 0 * * 0"));
        assert_eq!(kind("0 0 * * 5-7"), kind("0 0 * * fri,sat,sun"));
        assert_eq!(kind("0 0 * * 1/2"), kind("0 0 * * 1,3,5"));
        assert_eq!(
            kind("0-23/2 * * * *"),
            kind("0,2,4,6,8,10,12,14,16,18,20,22 * * * *")
        );
    }
}
