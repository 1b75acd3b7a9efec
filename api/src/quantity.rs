//! Kubernetes resource quantities (`500m`, `1.5Gi`, `2e3`): parsed into an exact count of
//! nano-units so requests and limits can be compared and summed without floating point.
//!
//! Worked example: `1.5Gi` = 15 × 2^30 × 10^9 / 10 nanos = 1 610 612 736 000 000 000.

use std::cmp::Ordering;

/// The upstream error text for a string that is not a quantity.
pub const QUANTITY_FORMAT_ERROR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// A parsed quantity, in units of 10^-9; saturates at the i128 range instead of overflowing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Quantity {
    nanos: i128,
}

const NANOS_PER_UNIT: i128 = 1_000_000_000;

impl Quantity {
    /// Parses `[+-]digits[.digits][suffix]` where the suffix is a decimal SI suffix
    /// (`n u m "" k M G T P E`), a binary one (`Ki`…`Ei`) or an exponent (`e3`, `E-2`).
    pub fn parse(s: &str) -> Result<Quantity, String> {
        let bad = || QUANTITY_FORMAT_ERROR.to_string();
        let (negative, rest) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(num_len);
        let (int_part, frac_part) = match number.split_once('.') {
            Some((i, f)) => (i, f),
            None => (number, ""),
        };
        if frac_part.contains('.') || (int_part.is_empty() && frac_part.is_empty()) {
            return Err(bad());
        }
        let (binary_pow, decimal_pow) = parse_suffix(suffix).ok_or_else(bad)?;
        let digits = format!("{int_part}{frac_part}");
        let digits = digits.trim_start_matches('0');
        let nanos = if digits.is_empty() {
            0
        } else {
            scale(digits, frac_part.len() as i64, binary_pow, decimal_pow)
        };
        Ok(Quantity {
            nanos: if negative { -nanos } else { nanos },
        })
    }

    /// The value in thousandths (`500m` → 500, `2` → 2000), rounded up like upstream's
    /// `MilliValue`.
    pub fn millis(&self) -> i64 {
        let per_milli = NANOS_PER_UNIT / 1000;
        let m =
            self.nanos.div_euclid(per_milli) + i128::from(self.nanos.rem_euclid(per_milli) != 0);
        m.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }

    /// The value in whole units, rounded up like upstream's `Value` (`1.5Gi` → 1610612736,
    /// `500m` → 1).
    pub fn value(&self) -> i64 {
        let v = self.nanos.div_euclid(NANOS_PER_UNIT)
            + i128::from(self.nanos.rem_euclid(NANOS_PER_UNIT) != 0);
        v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }

    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    pub fn is_positive(&self) -> bool {
        self.nanos > 0
    }

    /// Whether the value is a whole number of units (extended resources must be).
    pub fn is_whole(&self) -> bool {
        self.nanos % NANOS_PER_UNIT == 0
    }

    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_add(other.nanos),
        }
    }

    pub fn cmp_to(&self, other: &Quantity) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

/// `(power of 2, power of 10)` for a suffix, or None when it is not one.
fn parse_suffix(suffix: &str) -> Option<(u32, i64)> {
    let decimal = match suffix {
        "" => Some(0),
        "n" => Some(-9),
        "u" => Some(-6),
        "m" => Some(-3),
        "k" => Some(3),
        "M" => Some(6),
        "G" => Some(9),
        "T" => Some(12),
        "P" => Some(15),
        "E" => Some(18),
        _ => None,
    };
    if let Some(p) = decimal {
        return Some((0, p));
    }
    let binary = match suffix {
        "Ki" => Some(10),
        "Mi" => Some(20),
        "Gi" => Some(30),
        "Ti" => Some(40),
        "Pi" => Some(50),
        "Ei" => Some(60),
        _ => None,
    };
    if let Some(p) = binary {
        return Some((p, 0));
    }
    let exp = suffix
        .strip_prefix('e')
        .or_else(|| suffix.strip_prefix('E'))?;
    let unsigned = exp.strip_prefix(['+', '-']).unwrap_or(exp);
    if unsigned.is_empty() || !unsigned.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    // Anything past ±1000 saturates or vanishes anyway; clamp before parsing.
    let magnitude: i64 = if unsigned.len() > 4 {
        1000
    } else {
        unsigned.parse().ok()?
    };
    Some((
        0,
        if exp.starts_with('-') {
            -magnitude
        } else {
            magnitude
        },
    ))
}

/// `digits × 2^binary_pow × 10^(decimal_pow + 9 − frac_len)`, rounded up, saturating.
fn scale(digits: &str, frac_len: i64, binary_pow: u32, decimal_pow: i64) -> i128 {
    let ten_pow = decimal_pow + 9 - frac_len;
    // Only the leading 36 digits matter for saturation; remember how many we dropped.
    let kept = digits.len().min(36);
    let dropped = (digits.len() - kept) as i64;
    let Ok(mut value) = digits[..kept].parse::<i128>() else {
        return i128::MAX;
    };
    let truncated_nonzero = digits[kept..].chars().any(|c| c != '0');
    let ten_pow = ten_pow + dropped;
    value = match value.checked_mul(1i128 << binary_pow) {
        Some(v) => v,
        None => return i128::MAX,
    };
    if ten_pow >= 0 {
        let Some(mult) = 10i128.checked_pow(ten_pow.min(40) as u32) else {
            return i128::MAX;
        };
        value.checked_mul(mult).unwrap_or(i128::MAX)
    } else {
        let Some(div) = 10i128.checked_pow((-ten_pow).min(40) as u32) else {
            return 1;
        };
        let rounded_up = value % div != 0 || truncated_nonzero;
        value / div + i128::from(rounded_up)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn millis_and_value_round_up_like_upstream() {
        assert_eq!(super::Quantity::parse("500m").unwrap().millis(), 500);
        assert_eq!(super::Quantity::parse("2").unwrap().millis(), 2000);
        assert_eq!(super::Quantity::parse("500m").unwrap().value(), 1);
        assert_eq!(
            super::Quantity::parse("1.5Gi").unwrap().value(),
            1_610_612_736
        );
        assert_eq!(
            super::Quantity::parse("16Mi").unwrap().value(),
            16 * 1024 * 1024
        );
    }

    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn suffixes_scale_to_the_same_value() {
        let same = [
            ("1", "1000m"),
            ("0.5", "500m"),
            ("1k", "1000"),
            ("1Ki", "1024"),
            ("1.5Gi", "1536Mi"),
            ("2e3", "2k"),
            ("1E3", "1k"),
            ("100u", "100000n"),
            ("1E", "1000P"),
            ("+3", "3"),
            (".5", "0.5"),
            ("5.", "5"),
        ];
        for (a, b) in same {
            assert_eq!(q(a), q(b), "{a} vs {b}");
        }
    }

    #[test]
    fn ordering_follows_magnitude() {
        assert!(q("100m") < q("1"));
        assert!(q("1Gi") > q("1G"));
        assert!(q("-1").is_negative());
        assert!(q("1n").is_positive());
        assert!(q("0").cmp_to(&Quantity::default()).is_eq());
    }

    #[test]
    fn malformed_strings_are_rejected() {
        for bad in [
            "", "abc", "1.2.3", "1Zi", "1e", "1ee2", ".", "1 Gi", "--1", "1m5",
        ] {
            assert_eq!(
                Quantity::parse(bad),
                Err(QUANTITY_FORMAT_ERROR.to_string()),
                "{bad}"
            );
        }
    }

    #[test]
    fn tiny_fractions_round_up_and_huge_values_saturate() {
        assert_eq!(q("0.1n"), q("1n"));
        assert!(q("1e40").is_positive());
        assert!(q("99999999999999999999999999999999999999999999E").is_positive());
        assert!(q("1").is_whole());
        assert!(!q("1500m").is_whole());
    }

    #[test]
    fn sums_add_exactly() {
        assert_eq!(q("250m").saturating_add(q("750m")), q("1"));
    }
}
