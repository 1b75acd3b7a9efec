//! The messages whose JSON form is not an object of their fields: meta.v1 `Time`,
//! `MicroTime` and `Duration`, `Quantity`, `IntOrString`, `RawExtension` and `FieldsV1`.

use crate::go_duration::unit_nanos;
use jiff::Timestamp;
use serde_json::Value;

use super::ProtobufError;
use super::wire::{Reader, Value as Wire, Writer};

/// A message with its own JSON form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// `{seconds: 1, nanos: 2}`, written as RFC 3339 to the second.
    Time,
    /// The same, written with microseconds.
    MicroTime,
    /// `{duration: 1}` in nanoseconds, written as Go writes a `time.Duration` (`1h2m3s`).
    Duration,
    /// `{string: 1}`, written as the string.
    Quantity,
    /// `{type: 1, intVal: 2, strVal: 3}`, written as the number or the string.
    IntOrString,
    /// `{raw: 1}`: JSON (or an enveloped protobuf object) written as that document.
    RawExtension,
    /// `{Raw: 1}`: the managed-fields JSON document.
    FieldsV1,
}

impl Special {
    pub fn of(message: &str) -> Option<Special> {
        Some(match message {
            "apimachinery.pkg.apis.meta.v1.Time" => Special::Time,
            "apimachinery.pkg.apis.meta.v1.MicroTime" => Special::MicroTime,
            "apimachinery.pkg.apis.meta.v1.Duration" => Special::Duration,
            "apimachinery.pkg.api.resource.Quantity" => Special::Quantity,
            "apimachinery.pkg.util.intstr.IntOrString" => Special::IntOrString,
            "apimachinery.pkg.runtime.RawExtension" => Special::RawExtension,
            "apimachinery.pkg.apis.meta.v1.FieldsV1" => Special::FieldsV1,
            _ => return None,
        })
    }
}

/// The numbers and byte strings of one small message, by tag.
#[derive(Default)]
struct Parts<'a> {
    ints: [i64; 4],
    bytes: [&'a [u8]; 4],
}

fn parts(bytes: &[u8]) -> Result<Parts<'_>, ProtobufError> {
    let mut p = Parts::default();
    let mut reader = Reader::new(bytes);
    while let Some((tag, wire)) = reader.next_field()? {
        let Some(i) = usize::try_from(tag).ok().filter(|t| *t < 4) else {
            continue;
        };
        match wire {
            Wire::Varint(v) => p.ints[i] = v as i64,
            Wire::Len(b) => p.bytes[i] = b,
            _ => {}
        }
    }
    Ok(p)
}

fn text(b: &[u8]) -> Result<String, ProtobufError> {
    String::from_utf8(b.to_vec())
        .map_err(|_| ProtobufError::Malformed("a string is not UTF-8".into()))
}

/// `Null` is an unset value (the zero `Time`, an empty `RawExtension`): left out.
pub fn decode(kind: Special, bytes: &[u8], depth: usize) -> Result<Value, ProtobufError> {
    let p = parts(bytes)?;
    Ok(match kind {
        Special::Time | Special::MicroTime => {
            // What the JSON form keeps: seconds, or microseconds.
            let nanos = match kind {
                Special::Time => 0,
                _ => (p.ints[2] as i32) / 1000 * 1000,
            };
            let seconds = p.ints[1];
            if seconds == 0 && nanos == 0 {
                return Ok(Value::Null);
            }
            let t = Timestamp::new(seconds, nanos)
                .map_err(|e| ProtobufError::Malformed(format!("time out of range: {e}")))?;
            let format = if kind == Special::Time {
                "%Y-%m-%dT%H:%M:%SZ"
            } else {
                "%Y-%m-%dT%H:%M:%S%.6fZ"
            };
            Value::String(t.strftime(format).to_string())
        }
        Special::Duration => Value::String(go_duration(p.ints[1])),
        Special::Quantity => Value::String(text(p.bytes[1])?),
        Special::IntOrString => {
            if p.ints[1] == 1 {
                Value::String(text(p.bytes[3])?)
            } else {
                Value::from(p.ints[2] as i32)
            }
        }
        Special::RawExtension | Special::FieldsV1 => {
            let raw = p.bytes[1];
            if raw.is_empty() {
                Value::Null
            } else if raw.starts_with(super::MAGIC) {
                super::decode_at(raw, depth + 1)?
            } else {
                serde_json::from_slice(raw).map_err(|e| {
                    ProtobufError::Malformed(format!("embedded JSON does not parse: {e}"))
                })?
            }
        }
    })
}

fn wrong(kind: Special, v: &Value) -> ProtobufError {
    ProtobufError::Unencodable(format!("{v} is not a {kind:?}"))
}

/// The message for a JSON value of a special kind.
pub fn encode(kind: Special, v: &Value) -> Result<Vec<u8>, ProtobufError> {
    let mut w = Writer::default();
    match kind {
        Special::Time | Special::MicroTime => {
            let t: Timestamp = v
                .as_str()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| wrong(kind, v))?;
            w.varint_field(1, t.as_second() as u64);
            if kind == Special::MicroTime || t.subsec_nanosecond() != 0 {
                w.varint_field(2, t.subsec_nanosecond() as i64 as u64);
            }
        }
        Special::Duration => {
            let ns = v
                .as_str()
                .and_then(parse_go_duration)
                .ok_or_else(|| wrong(kind, v))?;
            w.varint_field(1, ns as u64);
        }
        Special::Quantity => match v {
            Value::String(s) => w.len_field(1, s.as_bytes()),
            Value::Number(n) => w.len_field(1, n.to_string().as_bytes()),
            _ => return Err(wrong(kind, v)),
        },
        Special::IntOrString => match v {
            Value::String(s) => {
                w.varint_field(1, 1);
                w.varint_field(2, 0);
                w.len_field(3, s.as_bytes());
            }
            Value::Number(n) => {
                let i = n.as_i64().ok_or_else(|| wrong(kind, v))?;
                w.varint_field(1, 0);
                w.varint_field(2, i as i32 as i64 as u64);
                w.len_field(3, b"");
            }
            _ => return Err(wrong(kind, v)),
        },
        Special::RawExtension | Special::FieldsV1 => {
            let raw = serde_json::to_vec(v).map_err(|e| wrong_json(kind, &e))?;
            w.len_field(1, &raw);
        }
    }
    Ok(w.bytes)
}

fn wrong_json(kind: Special, e: &serde_json::Error) -> ProtobufError {
    ProtobufError::Unencodable(format!("{kind:?}: {e}"))
}

/// A duration in nanoseconds as Go's `time.Duration.String` writes it: `1h2m3.5s`, `500ms`,
/// `0s`.
pub fn go_duration(ns: i64) -> String {
    if ns == 0 {
        return "0s".into();
    }
    let sign = if ns < 0 { "-" } else { "" };
    let u = ns.unsigned_abs();
    let fraction = |v: u64, unit: u64| {
        let whole = v / unit;
        let rest = v % unit;
        if rest == 0 {
            whole.to_string()
        } else {
            let digits = unit.ilog10() as usize;
            let frac = format!("{rest:0digits$}");
            format!("{whole}.{}", frac.trim_end_matches('0'))
        }
    };
    if u < 1_000 {
        return format!("{sign}{u}ns");
    }
    if u < 1_000_000 {
        return format!("{sign}{}µs", fraction(u, 1_000));
    }
    if u < 1_000_000_000 {
        return format!("{sign}{}ms", fraction(u, 1_000_000));
    }
    let secs = u / 1_000_000_000;
    let sub = u % 1_000_000_000;
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let seconds = fraction(s * 1_000_000_000 + sub, 1_000_000_000);
    match (h, m) {
        (0, 0) => format!("{sign}{seconds}s"),
        (0, m) => format!("{sign}{m}m{seconds}s"),
        (h, m) => format!("{sign}{h}h{m}m{seconds}s"),
    }
}

/// Go's `time.ParseDuration` for the units it knows: `1h30m`, `1.5s`, `300ms`, `-2us`.
pub fn parse_go_duration(s: &str) -> Option<i64> {
    let (negative, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(0);
    }
    let mut total: f64 = 0.0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|n| *n > 0)?;
        let number: f64 = rest[..n].parse().ok()?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = unit_nanos(&rest[..u])?;
        rest = &rest[u..];
        total += number * unit;
    }
    let total = total.round();
    (total <= i64::MAX as f64).then_some(if negative {
        -(total as i64)
    } else {
        total as i64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_and_read_as_go_writes_them() {
        for (ns, text) in [
            (0, "0s"),
            (1_500, "1.5µs"),
            (500_000_000, "500ms"),
            (90_000_000_000, "1m30s"),
            (3_600_000_000_000, "1h0m0s"),
            (3_723_500_000_000, "1h2m3.5s"),
            (-2_000_000_000, "-2s"),
        ] {
            assert_eq!(go_duration(ns), text, "{ns}");
            assert_eq!(parse_go_duration(text), Some(ns), "{text}");
        }
        assert_eq!(parse_go_duration("1x"), None);
        assert_eq!(parse_go_duration(""), None);
        assert_eq!(parse_go_duration("h"), None);
    }

    #[test]
    fn times_quantities_and_int_or_strings_round_trip() {
        for (kind, v) in [
            (Special::Time, Value::from("2024-05-06T07:08:09Z")),
            (
                Special::MicroTime,
                Value::from("2024-05-06T07:08:09.123456Z"),
            ),
            (Special::Quantity, Value::from("100m")),
            (Special::IntOrString, Value::from("25%")),
            (Special::IntOrString, Value::from(8080)),
            (Special::IntOrString, Value::from(0)),
            (Special::Duration, Value::from("1m30s")),
            (Special::RawExtension, serde_json::json!({"a": [1, "b"]})),
        ] {
            let bytes = encode(kind, &v).expect("encodes");
            assert_eq!(decode(kind, &bytes, 0).expect("decodes"), v, "{kind:?}");
        }
        assert_eq!(decode(Special::Time, &[], 0).expect("zero"), Value::Null);
        // Zero in what JSON keeps is zero: nanoseconds of a Time, a MicroTime's below a µs.
        let mut w = Writer::default();
        w.varint_field(2, 2);
        assert_eq!(
            decode(Special::Time, &w.bytes, 0).expect("zero"),
            Value::Null
        );
        assert_eq!(
            decode(Special::MicroTime, &w.bytes, 0).expect("zero"),
            Value::Null
        );
        assert!(encode(Special::Time, &Value::from("yesterday")).is_err());
    }
}
