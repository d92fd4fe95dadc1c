//! Exact parsing of Kubernetes resource quantities (`250m`, `1Gi`, `7338891n`, `1e3`).
//!
//! k8s-openapi carries quantities as strings, and capacity checks must add and compare them
//! without floating-point drift, so a [`Quantity`] holds a whole number of nano-units in an
//! `i128`. Like apimachinery, a value finer than 1n has its magnitude rounded up to the next
//! nano-unit ("if you ask for some resources you get some"), and a magnitude above 2^63-1 base
//! units is rejected (apimachinery silently caps it; a verifier should say so instead).

use std::fmt;
use std::ops::{Add, Sub};

use thiserror::Error;

/// Nano-units per base unit (one CPU core, one byte).
pub const NANOS_PER_UNIT: i128 = 1_000_000_000;
const NANOS_PER_MILLI: i128 = 1_000_000;
/// The largest magnitude apimachinery allows, in nano-units.
const MAX_NANOS: i128 = (i64::MAX as i128) * NANOS_PER_UNIT;
/// 10^38 is the largest power of ten an i128 holds.
const MAX_POW10: u32 = 38;

/// An exact quantity in nano-units of its base unit (cores for CPU, bytes for memory).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity {
    nanos: i128,
}

/// Why a string is not a valid quantity. Every variant carries the input it rejects.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QuantityError {
    #[error("empty quantity")]
    Empty,
    #[error("invalid quantity {input:?}: {reason}")]
    Malformed { input: String, reason: &'static str },
    #[error(
        "invalid quantity {input:?}: unknown suffix {suffix:?} (expected n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or an exponent such as e3)"
    )]
    UnknownSuffix { input: String, suffix: String },
    #[error("quantity {input:?} is out of range (Kubernetes allows at most 2^63-1 in magnitude)")]
    OutOfRange { input: String },
}

/// How the suffix scales the number.
enum Scale {
    /// Multiply by 10^exp.
    Decimal(i64),
    /// Multiply by 1024^exp (2^(10*exp)).
    Binary(u32),
}

impl Quantity {
    /// Zero.
    pub const ZERO: Quantity = Quantity { nanos: 0 };

    pub const fn from_nanos(nanos: i128) -> Self {
        Quantity { nanos }
    }

    /// Whole base units (cores, bytes).
    pub const fn from_units(units: i64) -> Self {
        Quantity {
            nanos: units as i128 * NANOS_PER_UNIT,
        }
    }

    /// Parses the full Kubernetes grammar: an optional sign, a decimal number (`1`, `1.5`,
    /// `.5`, `5.`), then a binary suffix (`Ki`..`Ei`), a decimal suffix (`n u m k M G T P E`
    /// or none), or a decimal exponent (`e3`, `E-2`).
    pub fn parse(input: &str) -> Result<Self, QuantityError> {
        if input.is_empty() {
            return Err(QuantityError::Empty);
        }
        let malformed = |reason| QuantityError::Malformed {
            input: input.to_string(),
            reason,
        };
        let bytes = input.as_bytes();
        let mut pos = 0;
        let negative = match bytes[0] {
            b'-' => {
                pos = 1;
                true
            }
            b'+' => {
                pos = 1;
                false
            }
            _ => false,
        };
        let int_start = pos;
        while pos < bytes.len() && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        let int_digits = &input[int_start..pos];
        let mut frac_digits = "";
        if pos < bytes.len() && bytes[pos] == b'.' {
            pos += 1;
            let frac_start = pos;
            while pos < bytes.len() && bytes[pos].is_ascii_digit() {
                pos += 1;
            }
            frac_digits = &input[frac_start..pos];
        }
        if int_digits.is_empty() && frac_digits.is_empty() {
            return Err(malformed("expected a number"));
        }
        let scale = parse_suffix(input, &input[pos..])?;

        // The number without its decimal point, and how many digits followed the point.
        let frac_trimmed = frac_digits.trim_end_matches('0');
        let int_trimmed = int_digits.trim_start_matches('0');
        let significant = format!("{int_trimmed}{frac_trimmed}");
        let significant = significant.trim_start_matches('0');
        if significant.len() > MAX_POW10 as usize {
            return Err(malformed("more than 38 significant digits"));
        }
        let mantissa: i128 = if significant.is_empty() {
            0
        } else {
            significant
                .parse()
                .map_err(|_| malformed("expected a number"))?
        };
        let frac_len = frac_trimmed.len() as i64;

        let nanos = nanos_of(mantissa, frac_len, scale)
            .filter(|&nanos| nanos <= MAX_NANOS)
            .ok_or_else(|| QuantityError::OutOfRange {
                input: input.to_string(),
            })?;
        Ok(Quantity {
            nanos: if negative { -nanos } else { nanos },
        })
    }

    /// The exact value in nano-units.
    pub const fn nanos(self) -> i128 {
        self.nanos
    }

    /// Thousandths, rounded up like apimachinery's `MilliValue()` (so `1500000n` is 2m).
    pub fn millis_ceil(self) -> i128 {
        div_ceil(self.nanos, NANOS_PER_MILLI)
    }

    /// Whole base units, rounded up like apimachinery's `Value()`.
    pub fn units_ceil(self) -> i128 {
        div_ceil(self.nanos, NANOS_PER_UNIT)
    }

    /// Approximate value in base units, for display and ratios only.
    pub fn as_f64(self) -> f64 {
        self.nanos as f64 / NANOS_PER_UNIT as f64
    }

    /// Saturating sum: quantities come from clusters, and a verifier must not panic on them.
    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_add(other.nanos),
        }
    }

    /// CPU in the units people read: `1.5` cores from one core up, else millicores (`250m`).
    pub fn display_cpu(self) -> String {
        let millis = self.millis_ceil();
        if millis.abs() >= 1000 {
            let cores = millis as f64 / 1000.0;
            trim_float(cores, 2)
        } else {
            format!("{millis}m")
        }
    }

    /// Memory in binary units (`512Mi`, `7.5Gi`), rounded to two decimals.
    pub fn display_bytes(self) -> String {
        let bytes = self.units_ceil();
        const UNITS: [(&str, i128); 4] = [
            ("Ti", 1 << 40),
            ("Gi", 1 << 30),
            ("Mi", 1 << 20),
            ("Ki", 1 << 10),
        ];
        for (suffix, size) in UNITS {
            if bytes.abs() >= size {
                return format!("{}{suffix}", trim_float(bytes as f64 / size as f64, 2));
            }
        }
        format!("{bytes}")
    }
}

impl Add for Quantity {
    type Output = Quantity;
    fn add(self, rhs: Quantity) -> Quantity {
        self.saturating_add(rhs)
    }
}

impl Sub for Quantity {
    type Output = Quantity;
    fn sub(self, rhs: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_sub(rhs.nanos),
        }
    }
}

impl std::iter::Sum for Quantity {
    fn sum<I: Iterator<Item = Quantity>>(iter: I) -> Quantity {
        iter.fold(Quantity::ZERO, Add::add)
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

/// Canonical-ish form: whole units when exact, else nano-units with the `n` suffix.
impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos % NANOS_PER_UNIT == 0 {
            write!(f, "{}", self.nanos / NANOS_PER_UNIT)
        } else if self.nanos % NANOS_PER_MILLI == 0 {
            write!(f, "{}m", self.nanos / NANOS_PER_MILLI)
        } else {
            write!(f, "{}n", self.nanos)
        }
    }
}

/// CPU in millicores, rounded up like `kubectl top` (`1500000n` → 2).
pub fn cpu_millicores(input: &str) -> Result<i128, QuantityError> {
    Quantity::parse(input).map(Quantity::millis_ceil)
}

/// Memory in bytes, rounded up to a whole byte.
pub fn memory_bytes(input: &str) -> Result<i128, QuantityError> {
    Quantity::parse(input).map(Quantity::units_ceil)
}

/// `mantissa * 10^(-frac_len) * scale` in nano-units, rounded up below 1n; `None` when it
/// does not fit.
fn nanos_of(mantissa: i128, frac_len: i64, scale: Scale) -> Option<i128> {
    let (pow10, binary_shift) = match scale {
        Scale::Decimal(exp) => (exp, 0),
        Scale::Binary(exp) => (0, 10 * exp),
    };
    let mut magnitude = mantissa;
    if binary_shift > 0 && magnitude != 0 {
        magnitude = magnitude.checked_mul(1i128 << binary_shift)?;
    }
    let exp10 = pow10.saturating_add(9).saturating_sub(frac_len);
    if magnitude == 0 {
        Some(0)
    } else if exp10 >= 0 {
        let exp10 = u32::try_from(exp10).ok()?;
        if exp10 > MAX_POW10 {
            return None;
        }
        magnitude.checked_mul(10i128.pow(exp10))
    } else {
        let shift = exp10.unsigned_abs();
        if shift > u64::from(MAX_POW10) {
            // magnitude < 10^39 <= 10^shift: a non-zero value below 1n rounds up to 1n.
            Some(1)
        } else {
            let divisor = 10i128.pow(shift as u32);
            let whole = magnitude / divisor;
            Some(if magnitude % divisor == 0 {
                whole
            } else {
                whole + 1
            })
        }
    }
}

fn parse_suffix(input: &str, suffix: &str) -> Result<Scale, QuantityError> {
    let scale = match suffix {
        "" => Scale::Decimal(0),
        "n" => Scale::Decimal(-9),
        "u" => Scale::Decimal(-6),
        "m" => Scale::Decimal(-3),
        "k" => Scale::Decimal(3),
        "M" => Scale::Decimal(6),
        "G" => Scale::Decimal(9),
        "T" => Scale::Decimal(12),
        "P" => Scale::Decimal(15),
        "E" => Scale::Decimal(18),
        "Ki" => Scale::Binary(1),
        "Mi" => Scale::Binary(2),
        "Gi" => Scale::Binary(3),
        "Ti" => Scale::Binary(4),
        "Pi" => Scale::Binary(5),
        "Ei" => Scale::Binary(6),
        _ => {
            let exponent = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))
                .filter(|rest| is_signed_integer(rest));
            match exponent {
                Some(digits) => Scale::Decimal(digits.parse::<i64>().map_err(|_| {
                    QuantityError::OutOfRange {
                        input: input.to_string(),
                    }
                })?),
                None => {
                    return Err(QuantityError::UnknownSuffix {
                        input: input.to_string(),
                        suffix: suffix.to_string(),
                    });
                }
            }
        }
    };
    Ok(scale)
}

fn is_signed_integer(s: &str) -> bool {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

fn div_ceil(value: i128, divisor: i128) -> i128 {
    let quotient = value / divisor;
    if value % divisor > 0 {
        quotient + 1
    } else {
        quotient
    }
}

/// `x` with at most `places` decimals and no trailing zeros.
fn trim_float(x: f64, places: usize) -> String {
    let text = format!("{x:.places$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nanos(s: &str) -> i128 {
        Quantity::parse(s)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .nanos()
    }

    const G: i128 = NANOS_PER_UNIT;

    #[test]
    fn worked_examples_from_the_research_notes() {
        assert_eq!(nanos("250m"), G / 4);
        assert_eq!(memory_bytes("1Gi").unwrap(), 1_073_741_824);
        assert_eq!(memory_bytes("123456Ki").unwrap(), 126_418_944);
        assert_eq!(nanos("1500000n"), 1_500_000);
        assert_eq!(nanos("1e3"), 1000 * G);
        assert_eq!(nanos("1Ki"), 1024 * G);
        assert_eq!(nanos("1k"), 1000 * G);
    }

    #[test]
    fn every_decimal_suffix() {
        let cases = [
            ("1n", 1),
            ("1u", 1_000),
            ("1m", 1_000_000),
            ("1", G),
            ("1k", G * 1_000),
            ("1M", G * 1_000_000),
            ("1G", G * 1_000_000_000),
            ("1T", G * 1_000_000_000_000),
            ("1P", G * 1_000_000_000_000_000),
            ("1E", G * 1_000_000_000_000_000_000),
        ];
        for (input, expected) in cases {
            assert_eq!(nanos(input), expected, "{input}");
        }
    }

    #[test]
    fn every_binary_suffix() {
        for (i, suffix) in ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"].iter().enumerate() {
            let expected = (1i128 << (10 * (i + 1))) * G;
            assert_eq!(nanos(&format!("1{suffix}")), expected, "{suffix}");
        }
        assert_eq!(nanos("1.5Gi"), 1_610_612_736 * G);
    }

    #[test]
    fn decimal_exponents_in_both_cases_and_signs() {
        assert_eq!(nanos("1E3"), 1000 * G);
        assert_eq!(nanos("5e-3"), 5_000_000);
        assert_eq!(nanos("5e+3"), 5000 * G);
        assert_eq!(nanos("1.5e2"), 150 * G);
        assert_eq!(nanos("2e0"), 2 * G);
    }

    #[test]
    fn signs_and_decimal_forms() {
        assert_eq!(nanos("-250m"), -G / 4);
        assert_eq!(nanos("+1"), G);
        assert_eq!(nanos(".5"), G / 2);
        assert_eq!(nanos("5."), 5 * G);
        assert_eq!(nanos("0.1"), G / 10);
        assert_eq!(nanos("007"), 7 * G);
        assert_eq!(nanos("0"), 0);
        assert_eq!(nanos("-0"), 0);
        assert_eq!(nanos("0.000"), 0);
        assert_eq!(
            nanos("1.250000000000000000000000000000000000000000000"),
            G * 5 / 4
        );
    }

    #[test]
    fn values_finer_than_a_nano_round_their_magnitude_up() {
        assert_eq!(nanos("0.1n"), 1);
        assert_eq!(nanos("1.0000000001"), G + 1);
        assert_eq!(nanos("-0.1n"), -1);
        assert_eq!(nanos("1e-100"), 1);
    }

    #[test]
    fn millis_and_units_round_up_like_apimachinery() {
        assert_eq!(cpu_millicores("1500000n").unwrap(), 2);
        assert_eq!(cpu_millicores("7338891n").unwrap(), 8);
        assert_eq!(cpu_millicores("2").unwrap(), 2000);
        assert_eq!(cpu_millicores("100m").unwrap(), 100);
        assert_eq!(memory_bytes("14520Ki").unwrap(), 14_868_480);
        assert_eq!(memory_bytes("1.5").unwrap(), 2);
        assert_eq!(memory_bytes("-1.5").unwrap(), -1);
    }

    #[test]
    fn the_largest_allowed_value_parses_and_one_more_is_rejected() {
        assert_eq!(nanos("9223372036854775807"), i64::MAX as i128 * G);
        assert!(matches!(
            Quantity::parse("9223372036854775808"),
            Err(QuantityError::OutOfRange { .. })
        ));
        assert!(matches!(
            Quantity::parse("8Ei"),
            Err(QuantityError::OutOfRange { .. })
        ));
        assert!(matches!(
            Quantity::parse("1e1000"),
            Err(QuantityError::OutOfRange { .. })
        ));
        assert!(matches!(
            Quantity::parse("1e99999999999999999999"),
            Err(QuantityError::OutOfRange { .. })
        ));
    }

    #[test]
    fn bad_input_gives_errors_that_name_it() {
        assert_eq!(Quantity::parse(""), Err(QuantityError::Empty));
        for bad in [
            "m", ".", "-", "+.", "1..2", "1.2.3", " 1", "1 ", "--1", "1e", "1e+", "0x10",
        ] {
            let err = Quantity::parse(bad).expect_err(bad);
            assert!(
                err.to_string().contains(&format!("{bad:?}")),
                "{bad}: {err}"
            );
        }
        let err = Quantity::parse("12Q").unwrap_err();
        assert_eq!(
            err,
            QuantityError::UnknownSuffix {
                input: "12Q".into(),
                suffix: "Q".into()
            }
        );
        assert!(err.to_string().contains("unknown suffix \"Q\""));
        // Suffixes are case-sensitive: `ki` and `K` are not Kubernetes suffixes.
        assert!(Quantity::parse("1ki").is_err());
        assert!(Quantity::parse("1K").is_err());
        assert!(Quantity::parse("1mi").is_err());
    }

    #[test]
    fn arithmetic_and_ordering_are_exact() {
        let total: Quantity = ["100m", "200m", "1500000n"]
            .iter()
            .map(|s| s.parse().unwrap())
            .sum();
        assert_eq!(total.nanos(), 301_500_000);
        assert!(Quantity::parse("1Gi").unwrap() > Quantity::parse("1G").unwrap());
        assert_eq!(
            (Quantity::parse("1").unwrap() - Quantity::parse("250m").unwrap()).nanos(),
            750_000_000
        );
    }

    #[test]
    fn display_forms() {
        assert_eq!(Quantity::parse("250m").unwrap().display_cpu(), "250m");
        assert_eq!(Quantity::parse("1500m").unwrap().display_cpu(), "1.5");
        assert_eq!(Quantity::parse("4").unwrap().display_cpu(), "4");
        assert_eq!(Quantity::parse("512Mi").unwrap().display_bytes(), "512Mi");
        assert_eq!(Quantity::parse("7.5Gi").unwrap().display_bytes(), "7.5Gi");
        assert_eq!(Quantity::parse("100").unwrap().display_bytes(), "100");
        assert_eq!(Quantity::parse("250m").unwrap().to_string(), "250m");
        assert_eq!(Quantity::parse("3").unwrap().to_string(), "3");
        assert_eq!(Quantity::parse("5n").unwrap().to_string(), "5n");
    }
}
