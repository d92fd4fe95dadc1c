//! Durations as seconds in the report files, and back.
//!
//! Two precisions are written: times on a run's timeline to the millisecond ([`millis`]),
//! since the samples that bound them are a sample interval apart, and a trial's duration
//! in full ([`exact`]). Both are read back to the nanosecond nearest the number written,
//! which is the duration that was written for every number a gates wrote, so a record read
//! back writes the same text again.

use std::time::Duration;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serializer};

/// Seconds to the millisecond, as the files hold them.
pub fn rounded(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// The duration nearest to `seconds`, to the nanosecond; `None` for a negative or
/// too large number.
pub fn duration(seconds: f64) -> Option<Duration> {
    let nanos = (seconds * 1e9).round();
    (nanos >= 0.0 && nanos < u64::MAX as f64).then(|| Duration::from_nanos(nanos as u64))
}

fn read<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let seconds = f64::deserialize(d)?;
    duration(seconds)
        .ok_or_else(|| D::Error::custom(format!("{seconds} is not a duration in seconds")))
}

/// `#[serde(with = "millis")]`: seconds to the millisecond.
pub mod millis {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(rounded(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        read(d)
    }
}

/// `#[serde(with = "exact")]`: seconds to the nanosecond.
pub mod exact {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        read(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize)]
    struct Both {
        #[serde(with = "millis")]
        millis: Duration,
        #[serde(with = "exact")]
        exact: Duration,
    }

    #[test]
    fn durations_written_as_seconds_read_back_to_the_same_text() {
        for nanos in [
            0,
            1,
            999_999_999,
            16_402_877_709,
            1_731_000_000,
            86_400_123_456_789,
        ] {
            let d = Duration::from_nanos(nanos);
            let written = serde_json::to_string(&Both {
                millis: d,
                exact: d,
            })
            .unwrap();
            let back: Both = serde_json::from_str(&written).unwrap();
            assert_eq!(back.exact, d, "{written}");
            assert_eq!(serde_json::to_string(&back).unwrap(), written);
        }
    }

    #[test]
    fn a_negative_number_is_not_a_duration() {
        let err = serde_json::from_str::<Both>(r#"{"millis": -1.0, "exact": 0}"#)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("-1 is not a duration in seconds"), "{err}");
    }
}
