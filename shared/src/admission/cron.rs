//! CronJob schedule syntax as upstream accepts it (robfig/cron's standard parser): five
//! fields with lists, ranges, steps and month/day names, or a descriptor such as `@daily`
//! or `@every 1h30m`. Only syntax is checked; computing run times is the controller's job.

/// One schedule field's allowed range and names.
struct Bounds {
    min: u64,
    max: u64,
    names: &'static [(&'static str, u64)],
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

const FIELDS: [Bounds; 5] = [
    Bounds {
        min: 0,
        max: 59,
        names: &[],
    },
    Bounds {
        min: 0,
        max: 23,
        names: &[],
    },
    Bounds {
        min: 1,
        max: 31,
        names: &[],
    },
    Bounds {
        min: 1,
        max: 12,
        names: MONTHS,
    },
    Bounds {
        min: 0,
        max: 6,
        names: DAYS,
    },
];

const DESCRIPTORS: &[&str] = &[
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];

/// Checks a schedule; the error text matches robfig/cron's.
pub(crate) fn parse_schedule(spec: &str) -> Result<(), String> {
    if spec.is_empty() {
        return Err("empty spec string".to_string());
    }
    let mut spec = spec;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        // The zone itself is the controller's concern; the validator rejects TZ= separately.
        spec = spec.split_once(' ').map_or("", |(_, rest)| rest).trim();
    }
    if spec.starts_with('@') {
        return parse_descriptor(spec);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    for (field, bounds) in fields.iter().zip(FIELDS.iter()) {
        for expr in field.split(',') {
            check_range(expr, bounds)?;
        }
    }
    Ok(())
}

fn parse_descriptor(d: &str) -> Result<(), String> {
    if DESCRIPTORS.contains(&d) {
        return Ok(());
    }
    if let Some(dur) = d.strip_prefix("@every ") {
        return go_duration(dur).map_err(|e| format!("failed to parse duration {d}: {e}"));
    }
    Err(format!("unrecognized descriptor: {d}"))
}

/// One comma-separated element: `*`, `?`, `N`, `N-M`, each optionally `/step`.
fn check_range(expr: &str, b: &Bounds) -> Result<(), String> {
    let mut range_and_step = expr.split('/');
    let range = range_and_step.next().unwrap_or_default();
    let step_part = range_and_step.next();
    if range_and_step.next().is_some() {
        return Err(format!("too many slashes: {expr}"));
    }
    let low_high: Vec<&str> = range.split('-').collect();
    let single = low_high.len() == 1;
    let (start, mut end) = if low_high[0] == "*" || low_high[0] == "?" {
        (b.min, b.max)
    } else {
        let start = int_or_name(low_high[0], b)?;
        let end = match low_high.len() {
            1 => start,
            2 => int_or_name(low_high[1], b)?,
            _ => return Err(format!("too many hyphens: {expr}")),
        };
        (start, end)
    };
    let step = match step_part {
        None => 1,
        Some(s) => {
            let step = must_parse_int(s)?;
            // "N/step" means "N-max/step".
            if single {
                end = b.max;
            }
            step
        }
    };
    if start < b.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            b.min
        ));
    }
    if end > b.max {
        return Err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            b.max
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(())
}

fn int_or_name(expr: &str, b: &Bounds) -> Result<u64, String> {
    let lower = expr.to_lowercase();
    match b.names.iter().find(|(n, _)| *n == lower) {
        Some((_, v)) => Ok(*v),
        None => must_parse_int(expr),
    }
}

/// Go's `strconv.Atoi` plus robfig's non-negative rule.
fn must_parse_int(expr: &str) -> Result<u64, String> {
    let digits = expr.strip_prefix(['+', '-']).unwrap_or(expr);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing \"{expr}\": invalid syntax"
        ));
    }
    let Ok(n) = expr.parse::<i64>() else {
        return Err(format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing \"{expr}\": value out of range"
        ));
    };
    u64::try_from(n).map_err(|_| format!("negative number ({n}) not allowed: {expr}"))
}

/// Go's `time.ParseDuration` syntax: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or `0`.
fn go_duration(s: &str) -> Result<(), String> {
    let invalid = || format!("time: invalid duration \"{s}\"");
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    if body == "0" {
        return Ok(());
    }
    if body.is_empty() {
        return Err(invalid());
    }
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
            return Err(format!("time: missing unit in duration \"{s}\""));
        }
        if !matches!(unit, "ns" | "us" | "µs" | "μs" | "ms" | "s" | "m" | "h") {
            return Err(format!("time: unknown unit \"{unit}\" in duration \"{s}\""));
        }
        rest = next;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_schedules_parse() {
        for s in [
            "*/5 * * * *",
            "0 0 * * 0",
            "30 2 1-15/2 JAN-mar mon,wed,FRI",
            "0 12 ? * *",
            "5 4 * * sun",
            "0 0 31 2 *",
            "@hourly",
            "@every 1h30m",
            "@every 0",
            "TZ=UTC 0 1 * * *",
        ] {
            assert_eq!(parse_schedule(s), Ok(()), "{s}");
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
            ("* * * * 7", "end of range (7) above maximum (6): 7"),
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
        ];
        for (s, want) in cases {
            assert_eq!(parse_schedule(s), Err(want.to_string()), "{s}");
        }
    }
}
