//! The string `format`s a CRD schema may check, as kube-openapi's strfmt registry defines them
//! and apiextensions-apiserver lets through (others, `int32` and `int64` among them, are
//! stripped before validation and check nothing).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// A supported `format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    BsonObjectId,
    Uri,
    Email,
    Hostname,
    Ipv4,
    Ipv6,
    Cidr,
    Mac,
    Uuid,
    Uuid3,
    Uuid4,
    Uuid5,
    Isbn,
    Isbn10,
    Isbn13,
    CreditCard,
    Ssn,
    HexColor,
    RgbColor,
    Byte,
    Password,
    Date,
    Duration,
    DateTime,
}

impl Format {
    /// The format a schema's `format` names, if validation checks it (names are compared
    /// without dashes, as the registry does: `date-time` is `datetime`).
    pub(crate) fn supported(name: &str) -> Option<Format> {
        Some(match name.replace('-', "").as_str() {
            "bsonobjectid" => Self::BsonObjectId,
            "uri" => Self::Uri,
            "email" => Self::Email,
            "hostname" => Self::Hostname,
            "ipv4" => Self::Ipv4,
            "ipv6" => Self::Ipv6,
            "cidr" => Self::Cidr,
            "mac" => Self::Mac,
            "uuid" => Self::Uuid,
            "uuid3" => Self::Uuid3,
            "uuid4" => Self::Uuid4,
            "uuid5" => Self::Uuid5,
            "isbn" => Self::Isbn,
            "isbn10" => Self::Isbn10,
            "isbn13" => Self::Isbn13,
            "creditcard" => Self::CreditCard,
            "ssn" => Self::Ssn,
            "hexcolor" => Self::HexColor,
            "rgbcolor" => Self::RgbColor,
            "byte" => Self::Byte,
            "password" => Self::Password,
            "date" => Self::Date,
            "duration" => Self::Duration,
            "datetime" => Self::DateTime,
            _ => return None,
        })
    }

    /// Whether `s` is a valid value of this format.
    pub(crate) fn accepts(self, s: &str) -> bool {
        match self {
            Self::BsonObjectId => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
            Self::Uri => is_request_uri(s),
            Self::Email => is_email(s),
            Self::Hostname => is_hostname(s),
            Self::Ipv4 => is_ipv4(s),
            Self::Ipv6 => s.contains(':') && parse_ip(s),
            Self::Cidr => is_cidr(s),
            Self::Mac => is_mac(s),
            Self::Uuid => matches(&UUID, s),
            Self::Uuid3 => matches(&UUID3, s),
            Self::Uuid4 => matches(&UUID4, s),
            Self::Uuid5 => matches(&UUID5, s),
            Self::Isbn => is_isbn10(s) || is_isbn13(s),
            Self::Isbn10 => is_isbn10(s),
            Self::Isbn13 => is_isbn13(s),
            Self::CreditCard => is_credit_card(s),
            Self::Ssn => s.len() == 11 && matches(&SSN, s),
            Self::HexColor => matches(&HEX_COLOR, s),
            Self::RgbColor => matches(&RGB_COLOR, s),
            Self::Byte => matches(&BASE64, s),
            Self::Password => true,
            Self::Date => is_date(s),
            Self::Duration => is_duration(s),
            Self::DateTime => is_date_time(s),
        }
    }
}

/// The formats of `type: string` schemas anywhere in `schema` that validation does not know,
/// in document order (upstream warns about them when a CRD is written, from 1.34.2 on only
/// for strings).
pub(crate) fn unrecognized(schema: &Value, out: &mut Vec<String>) {
    let Value::Object(m) = schema else {
        return;
    };
    if let (Some(Value::String(f)), Some(Value::String(t))) = (m.get("format"), m.get("type"))
        && t == "string"
        && !f.is_empty()
        && Format::supported(f).is_none()
    {
        out.push(f.clone());
    }
    for (key, v) in m {
        match (key.as_str(), v) {
            (
                "properties" | "patternProperties" | "definitions" | "dependencies",
                Value::Object(children),
            ) => children.values().for_each(|c| unrecognized(c, out)),
            ("items" | "allOf" | "anyOf" | "oneOf", Value::Array(children)) => {
                children.iter().for_each(|c| unrecognized(c, out))
            }
            ("items" | "not" | "additionalProperties" | "additionalItems", Value::Object(_)) => {
                unrecognized(v, out)
            }
            _ => {}
        }
    }
}

fn re(p: &str) -> Option<Regex> {
    Regex::new(p).ok()
}

fn matches(r: &LazyLock<Option<Regex>>, s: &str) -> bool {
    r.as_ref().is_some_and(|r| r.is_match(s))
}

static HOSTNAME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9\-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$",
    )
});
static UUID: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"));
static UUID3: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID4: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static UUID5: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static SSN: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$"));
static HEX_COLOR: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static RGB_COLOR: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let c = r"\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*";
    re(&format!(r"^rgb\({c},{c},{c}\)$"))
});
static BASE64: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$")
});
static CREDIT_CARD: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(
        r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|(222[1-9]|22[3-9][0-9]|2[3-6][0-9]{2}|27[01][0-9]|2720)[0-9]{12}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11}|6[27][0-9]{14})$",
    )
});
static DATE_TIME_CLOCK: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
});
static GO_DURATION: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"^[-+]?(0|((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)$"));
static LOOSE_DURATION: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"(\d+)\s*([A-Za-zµ]+)"));

/// Go's `url.ParseRequestURI`: an absolute URI or an absolute path, no spaces or controls.
fn is_request_uri(s: &str) -> bool {
    if s.is_empty() || s.chars().any(|c| c.is_control() || c == ' ') {
        return false;
    }
    if s.starts_with('/') {
        return true;
    }
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        && !rest.is_empty()
}

/// Go's `mail.ParseAddress` for the forms people write: `a@b.c` or `Name <a@b.c>`.
fn is_email(s: &str) -> bool {
    let addr = match (s.find('<'), s.strip_suffix('>')) {
        (Some(i), Some(inner)) => &inner[i + 1..],
        _ => s.trim(),
    };
    let Some((local, domain)) = addr.rsplit_once('@') else {
        return false;
    };
    let atom_ok = |part: &str| {
        !part.is_empty()
            && !part.starts_with('.')
            && !part.ends_with('.')
            && !part.contains("..")
            && part
                .chars()
                .all(|c| c.is_alphanumeric() || "!#$%&'*+-/=?^_`{|}~.".contains(c))
    };
    atom_ok(local) && atom_ok(domain)
}

fn is_hostname(s: &str) -> bool {
    matches(&HOSTNAME, s) && s.len() <= 255 && s.split('.').all(|p| p.len() <= 63)
}

/// Go's `ParseIPSloppy` (IPv4 parts may have leading zeros) that contains a dot.
fn is_ipv4(s: &str) -> bool {
    s.contains('.') && parse_ip(s)
}

fn parse_ip(s: &str) -> bool {
    parse_sloppy_v4(s).is_some() || s.parse::<Ipv6Addr>().is_ok()
}

fn parse_sloppy_v4(s: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut parts = s.split('.');
    for o in octets.iter_mut() {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *o = p.parse().ok()?;
    }
    parts.next().is_none().then_some(Ipv4Addr::from(octets))
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let max = if parse_sloppy_v4(ip).is_some() {
        32
    } else if ip.parse::<Ipv6Addr>().is_ok() {
        128
    } else {
        return false;
    };
    !bits.is_empty()
        && bits.len() <= 3
        && bits.bytes().all(|b| b.is_ascii_digit())
        && bits.parse::<u32>().is_ok_and(|b| b <= max)
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets as `aa:bb…`, `aa-bb…` or `aabb.ccdd…`.
fn is_mac(s: &str) -> bool {
    let hex = |g: &str, n: usize| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit());
    for sep in [':', '-'] {
        if s.contains(sep) {
            let groups: Vec<&str> = s.split(sep).collect();
            return [6, 8, 20].contains(&groups.len()) && groups.iter().all(|g| hex(g, 2));
        }
    }
    let groups: Vec<&str> = s.split('.').collect();
    [3, 4, 10].contains(&groups.len()) && groups.iter().all(|g| hex(g, 4))
}

fn isbn_digits(s: &str) -> String {
    s.chars().filter(|c| *c != ' ' && *c != '-').collect()
}

fn is_isbn10(s: &str) -> bool {
    let d = isbn_digits(s);
    let b = d.as_bytes();
    if b.len() != 10
        || !b[..9].iter().all(u8::is_ascii_digit)
        || !(b[9].is_ascii_digit() || b[9] == b'X')
    {
        return false;
    }
    let sum: u32 = b
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let v = if *c == b'X' { 10 } else { u32::from(c - b'0') };
            (i as u32 + 1) * v
        })
        .sum();
    sum.is_multiple_of(11)
}

fn is_isbn13(s: &str) -> bool {
    let d = isbn_digits(s);
    let b = d.as_bytes();
    if b.len() != 13 || !b.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let sum: u32 = b[..12]
        .iter()
        .enumerate()
        .map(|(i, c)| u32::from(c - b'0') * if i % 2 == 0 { 1 } else { 3 })
        .sum();
    (10 - sum % 10) % 10 == u32::from(b[12] - b'0')
}

fn is_credit_card(s: &str) -> bool {
    let d: String = s
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .collect();
    if !matches(&CREDIT_CARD, &d) {
        return false;
    }
    let mut sum = 0;
    for (i, c) in d.bytes().rev().enumerate() {
        let mut v = u32::from(c - b'0');
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    sum % 10 == 0
}

/// Go's `time.Parse("2006-01-02", s)`.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i16> {
        let p = &s[r];
        p.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| p.parse().ok())
            .flatten()
    };
    match (num(0..4), num(5..7), num(8..10)) {
        (Some(y), Some(m), Some(d)) => i8::try_from(m)
            .is_ok_and(|m| i8::try_from(d).is_ok_and(|d| jiff::civil::Date::new(y, m, d).is_ok())),
        _ => false,
    }
}

/// strfmt's `IsDateTime`: a date, a `T`, and a clock with an optional fraction and a zone.
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    let Some(re) = DATE_TIME_CLOCK.as_ref() else {
        return false;
    };
    let Some(c) = re.captures(parts[1]) else {
        return false;
    };
    let field = |i: usize| c.get(i).map(|m| m.as_str()).unwrap_or_default();
    field(1) <= "23" && field(2) <= "59" && field(3) <= "59"
}

/// strfmt's `ParseDuration`: Go's durations, or numbers with unit words (`3 days`, `1h 20min`).
fn is_duration(s: &str) -> bool {
    if matches(&GO_DURATION, s) {
        return true;
    }
    const UNITS: [&[&str]; 8] = [
        &["ns", "nano"],
        &["us", "µs", "micro"],
        &["ms", "milli"],
        &["s", "sec"],
        &["m", "min"],
        &["h", "hr", "hour"],
        &["d", "day"],
        &["w", "wk", "week"],
    ];
    let Some(re) = LOOSE_DURATION.as_ref() else {
        return false;
    };
    re.captures_iter(s).any(|c| {
        let unit = c
            .get(2)
            .map(|m| m.as_str().trim().to_lowercase())
            .unwrap_or_default();
        UNITS.iter().any(|variants| {
            let last = variants.len() - 1;
            variants
                .iter()
                .enumerate()
                .any(|(i, v)| (i == last && unit.starts_with(v)) || unit.eq_ignore_ascii_case(v))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_accepts_a_valid_value_and_refuses_an_invalid_one() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "bsonobjectid",
                "507f1f77bcf86cd799439011",
                "507f1f77bcf86cd79943901",
            ),
            ("uri", "https://example.com/a?b=c", "example.com"),
            ("email", "jane@example.com", "jane.example.com"),
            ("hostname", "node-1.example.com", "-bad-.com"),
            ("ipv4", "10.0.0.1", "10.0.0.256"),
            ("ipv6", "fd00::1", "10.0.0.1"),
            ("cidr", "10.0.0.0/8", "10.0.0.0/33"),
            ("mac", "00:00:5e:00:53:01", "00:00:5e:00:53"),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567"),
            (
                "uuid3",
                "a3bb189e-8bf9-3888-9912-ace4e6543002",
                "a3bb189e-8bf9-4888-9912-ace4e6543002",
            ),
            (
                "uuid4",
                "f47ac10b-58cc-4372-a567-0e02b2c3d479",
                "f47ac10b-58cc-3372-a567-0e02b2c3d479",
            ),
            (
                "uuid5",
                "886313e1-3b8a-5372-9b90-0c9aee199e5d",
                "886313e1-3b8a-4372-9b90-0c9aee199e5d",
            ),
            ("isbn10", "0321751043", "0321751044"),
            ("isbn13", "978-0321751041", "978-0321751042"),
            ("isbn", "0321751043", "1234"),
            ("creditcard", "4111 1111 1111 1111", "4111 1111 1111 1112"),
            ("ssn", "123-45-6789", "123-456-789"),
            ("hexcolor", "#ffcc00", "#ffcc0"),
            ("rgbcolor", "rgb(255, 0, 12)", "rgb(256,0,0)"),
            ("byte", "aGVsbG8=", "aGVsbG8"),
            ("password", "anything", ""),
            ("date", "2024-02-29", "2023-02-29"),
            ("duration", "1h30m", "soon"),
            ("date-time", "2024-01-02T15:04:05Z", "2024-01-02 15:04:05"),
        ];
        for (name, good, bad) in cases {
            let f = Format::supported(name).unwrap_or_else(|| panic!("{name} unsupported"));
            assert!(f.accepts(good), "{name} refused {good:?}");
            if *name != "password" {
                assert!(!f.accepts(bad), "{name} accepted {bad:?}");
            }
        }
    }

    #[test]
    fn unknown_string_formats_are_listed_for_warnings() {
        let schema = serde_json::json!({"type": "object", "properties": {
            "a": {"type": "string", "format": "quantity"},
            "b": {"type": "integer", "format": "int64"},
            "c": {"type": "string", "format": "date-time"},
            "d": {"type": "array", "items": {"type": "string", "format": "color"}},
            "e": {"type": "object", "additionalProperties": {"type": "string", "format": "k8s-short-name"}}}});
        let mut out = Vec::new();
        unrecognized(&schema, &mut out);
        assert_eq!(out, ["quantity", "color", "k8s-short-name"]);
    }

    #[test]
    fn unsupported_formats_check_nothing() {
        for name in ["int32", "int64", "float", "double", "quantity", ""] {
            assert_eq!(Format::supported(name), None, "{name}");
        }
    }

    #[test]
    fn durations_take_unit_words_as_strfmt_does() {
        assert!(is_duration("3 days"));
        assert!(is_duration("2 hours"));
        assert!(is_duration("-1.5h"));
        assert!(!is_duration("3 parsecs"));
    }
}
