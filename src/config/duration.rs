//! The duration type of the configuration (`250ms`, `30s`, `5m`, `1h30m`).

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration written as a string of number-unit pairs: `250ms`, `30s`, `5m`, `1h30m`.
///
/// Units: `ms`, `s`, `m`, `h`. Numbers are non-negative integers. Serializes back to the
/// shortest such string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub std::time::Duration);

impl Duration {
    /// A whole number of seconds.
    pub const fn from_secs(s: u64) -> Duration {
        Duration(std::time::Duration::from_secs(s))
    }

    /// The standard-library duration.
    pub const fn get(self) -> std::time::Duration {
        self.0
    }

    /// Whether the duration has no sub-second part.
    pub fn is_whole_seconds(self) -> bool {
        self.0.subsec_nanos() == 0
    }

    /// Whether the duration is zero.
    pub fn is_zero(self) -> bool {
        self.0.is_zero()
    }
}

impl From<Duration> for std::time::Duration {
    fn from(d: Duration) -> Self {
        d.0
    }
}

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Nothing given.
    #[error("empty duration; write e.g. 30s, 5m or 1h30m")]
    Empty,
    /// A unit without a number or garbage.
    #[error("`{0}` is not a duration: expected number-unit pairs such as 30s, 5m or 1h30m")]
    Syntax(String),
    /// A number without a unit.
    #[error("`{0}` has a number without a unit; units are ms, s, m, h")]
    MissingUnit(String),
    /// A unit we do not know.
    #[error("`{input}` has unknown unit `{unit}`; units are ms, s, m, h")]
    UnknownUnit {
        /// The whole input.
        input: String,
        /// The unknown unit.
        unit: String,
    },
    /// Too large.
    #[error("`{0}` is too large")]
    Overflow(String),
}

impl FromStr for Duration {
    type Err = DurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let input = s.trim();
        if input.is_empty() {
            return Err(DurationError::Empty);
        }
        let overflow = || DurationError::Overflow(input.to_owned());
        let bytes = input.as_bytes();
        let mut i = 0;
        let mut total_ms: u64 = 0;
        while i < bytes.len() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if start == i {
                return Err(DurationError::Syntax(input.to_owned()));
            }
            let number: u64 = input[start..i].parse().map_err(|_| overflow())?;
            let unit_start = i;
            while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
                i += 1;
            }
            let unit = &input[unit_start..i];
            let factor_ms: u64 = match unit {
                "" => return Err(DurationError::MissingUnit(input.to_owned())),
                "ms" => 1,
                "s" => 1_000,
                "m" => 60_000,
                "h" => 3_600_000,
                other => {
                    return Err(DurationError::UnknownUnit {
                        input: input.to_owned(),
                        unit: other.to_owned(),
                    });
                }
            };
            let part = number.checked_mul(factor_ms).ok_or_else(overflow)?;
            total_ms = total_ms.checked_add(part).ok_or_else(overflow)?;
        }
        Ok(Duration(std::time::Duration::from_millis(total_ms)))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms == 0 {
            return f.write_str("0s");
        }
        let (h, rest) = (ms / 3_600_000, ms % 3_600_000);
        let (m, rest) = (rest / 60_000, rest % 60_000);
        let (s, ms) = (rest / 1_000, rest % 1_000);
        for (value, unit) in [(h, "h"), (m, "m"), (s, "s"), (ms, "ms")] {
            if value != 0 {
                write!(f, "{value}{unit}")?;
            }
        }
        Ok(())
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Duration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^([0-9]+(ms|s|m|h))+$",
            "description": "A duration as number-unit pairs, units ms, s, m, h: 250ms, 30s, 5m, 1h30m."
        })
    }
}
