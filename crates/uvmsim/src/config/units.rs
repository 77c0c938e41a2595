//! Sizes in config: an integer number of bytes, or a string with a binary
//! unit ("4KiB", "2 MiB", "1GiB"). Decimal units are refused on purpose:
//! "4KB" is ambiguous for page and cache sizes.

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct ByteSize(pub u64);

const UNITS: [(&str, u64); 5] = [("B", 1), ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40)];

impl ByteSize {
    pub fn parse(s: &str) -> Result<ByteSize, String> {
        let s = s.trim();
        let split = s.find(|c: char| !(c.is_ascii_digit() || c == '_')).unwrap_or(s.len());
        let (num, unit) = (s[..split].replace('_', ""), s[split..].trim());
        let n: u64 = num.parse().map_err(|_| format!("`{s}` is not a size: expected e.g. 4096, \"64KiB\", \"2MiB\""))?;
        if let Some(frac) = unit.strip_prefix('.').filter(|u| u.starts_with(|c: char| c.is_ascii_digit())) {
            return Err(fractional(s, &num, frac));
        }
        let unit = if unit.is_empty() { "B" } else { unit };
        let mult = UNITS
            .iter()
            .find(|(u, _)| *u == unit)
            .map(|(_, m)| *m)
            .ok_or_else(|| format!("unknown size unit `{unit}` in `{s}`: accepted units are B, KiB, MiB, GiB, TiB (binary)"))?;
        n.checked_mul(mult).map(ByteSize).ok_or_else(|| format!("`{s}` is too large"))
    }
}

/// Why `0.5GiB` is refused, with the whole number of a smaller unit it means when there is one.
fn fractional(s: &str, int: &str, rest: &str) -> String {
    let split = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    let (digits, unit) = (&rest[..split], rest[split..].trim());
    let whole = (|| {
        let mult = UNITS.iter().find(|(u, _)| *u == unit)?.1 as u128;
        let scale = 10u128.checked_pow(u32::try_from(digits.len()).ok()?)?;
        let n: u128 = format!("{int}{digits}").parse().ok()?;
        let bytes = n.checked_mul(mult)?;
        (bytes % scale == 0).then(|| u64::try_from(bytes / scale).ok()).flatten()
    })();
    let hint = match whole {
        Some(b) => format!(": give `{}`", ByteSize(b)),
        None => ": give a whole number of bytes or of a smaller unit".into(),
    };
    format!("`{s}`: fractional sizes are not accepted{hint}")
}

impl std::fmt::Display for ByteSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (u, m) = UNITS.iter().rev().find(|(_, m)| self.0 >= *m && self.0 % m == 0).copied().unwrap_or(("B", 1));
        if self.0 == 0 {
            write!(f, "0B")
        } else {
            write!(f, "{}{u}", self.0 / m)
        }
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = ByteSize;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "a size: bytes as an integer, or a string like \"64KiB\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v).map(ByteSize).map_err(|_| E::custom("a size cannot be negative"))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                ByteSize::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn sizes() {
        assert_eq!(ByteSize::parse("4KiB"), Ok(ByteSize(4096)));
        assert_eq!(ByteSize::parse("2 MiB"), Ok(ByteSize(2 << 20)));
        assert_eq!(ByteSize::parse("1_024"), Ok(ByteSize(1024)));
        assert!(ByteSize::parse("4KB").unwrap_err().contains("KiB"));
        assert!(ByteSize::parse("lots").is_err());
        assert_eq!(ByteSize(1 << 30).to_string(), "1GiB");
        assert_eq!(ByteSize(1536).to_string(), "1536B");
        // A fraction is refused, with the whole number it means in a smaller unit.
        let e = ByteSize::parse("0.5GiB").unwrap_err();
        assert!(e.contains("fractional sizes are not accepted") && e.contains("`512MiB`"), "{e}");
        assert!(ByteSize::parse("1.5 KiB").unwrap_err().contains("`1536B`"));
        assert!(ByteSize::parse("0.3B").unwrap_err().contains("whole number of bytes"));
    }

    #[test]
    fn tebibytes_and_the_u64_limit() {
        // 1 TiB = 2^40 = 1_099_511_627_776 bytes.
        assert_eq!(ByteSize::parse("3TiB"), Ok(ByteSize(3 << 40)));
        assert_eq!(ByteSize::parse("1TiB"), Ok(ByteSize(1_099_511_627_776)));
        // 2^24 - 1 TiB = 2^64 - 2^40 fits a u64; 2^24 TiB = 2^64 does not (16777216 = 2^24).
        assert_eq!(ByteSize::parse("16777215TiB"), Ok(ByteSize(u64::MAX - (1 << 40) + 1)));
        assert_eq!(ByteSize::parse("16777216TiB"), Err("`16777216TiB` is too large".to_string()));
    }

    #[test]
    fn a_negative_size_is_refused_when_deserialized() {
        let e = ByteSize::deserialize(toml::Value::Integer(-1)).unwrap_err().to_string();
        assert!(e.contains("a size cannot be negative"), "{e}");
        assert_eq!(ByteSize::deserialize(toml::Value::Integer(4096)).unwrap(), ByteSize(4096));
    }
}
