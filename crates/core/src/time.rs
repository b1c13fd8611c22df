//! Time as a value. The core never reads a clock: every decision takes `now` as a
//! [`Timestamp`] handed in by the caller, so tests drive it with a virtual clock.

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Milliseconds since the Unix epoch (UTC). Serialised as RFC 3339 (`2026-11-30T02:39:51.123Z`).
///
/// Kept as the milliseconds with the sign bit flipped, never zero: unsigned order is then
/// time order, and `Option<Timestamp>` takes 8 bytes, not 16 — a fleet holds millions of them
/// (issue 32). The one millisecond given up, `i64::MIN` (292 million years before the epoch),
/// reads as the next one.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(NonZeroU64);

/// The sign bit of the milliseconds, flipped in the kept form.
const SIGN: u64 = 1 << 63;

/// The milliseconds, as before the kept form changed: `Timestamp(1796006391123)`.
impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Timestamp").field(&self.millis()).finish()
    }
}

impl Default for Timestamp {
    fn default() -> Self {
        Timestamp::EPOCH
    }
}

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Timestamp = Timestamp::from_millis(0);

    /// A timestamp from milliseconds since the epoch.
    pub const fn from_millis(ms: i64) -> Self {
        // Flipping the sign bit of anything but i64::MIN leaves a bit set.
        let kept = ((if ms == i64::MIN { ms + 1 } else { ms }) as u64) ^ SIGN;
        match NonZeroU64::new(kept) {
            Some(k) => Timestamp(k),
            None => Timestamp(NonZeroU64::MIN),
        }
    }

    /// A timestamp from whole seconds since the epoch.
    pub const fn from_secs(s: i64) -> Self {
        Timestamp::from_millis(s.saturating_mul(1000))
    }

    /// A system time (a clock reading the caller made, an HTTP date) as a timestamp; times
    /// before the epoch are the epoch.
    pub fn from_system(t: std::time::SystemTime) -> Self {
        let ms = t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        Timestamp::from_millis(i64::try_from(ms).unwrap_or(i64::MAX))
    }

    /// Milliseconds since the epoch.
    pub const fn millis(self) -> i64 {
        (self.0.get() ^ SIGN) as i64
    }

    /// Whole seconds since the epoch (rounded down).
    pub const fn secs(self) -> i64 {
        self.millis().div_euclid(1000)
    }

    /// This time plus `s` seconds.
    pub const fn plus_secs(self, s: u64) -> Self {
        Timestamp::from_millis(self.millis().saturating_add((s as i64).saturating_mul(1000)))
    }

    /// This time plus `ms` milliseconds.
    pub const fn plus_millis(self, ms: i64) -> Self {
        Timestamp::from_millis(self.millis().saturating_add(ms))
    }

    /// Milliseconds from `earlier` to `self` (negative when `earlier` is later).
    pub const fn millis_since(self, earlier: Timestamp) -> i64 {
        self.millis().saturating_sub(earlier.millis())
    }

    /// True when at least `s` seconds have passed from `earlier` to `self`.
    pub const fn at_least_secs_after(self, earlier: Timestamp, s: u64) -> bool {
        self.millis_since(earlier) >= (s as i64).saturating_mul(1000)
    }

    /// True when `self` lies within the last `s` seconds before `now` (inclusive).
    pub const fn within_secs_of(self, now: Timestamp, s: u64) -> bool {
        now.millis_since(self) <= (s as i64).saturating_mul(1000)
    }
}

impl Timestamp {
    /// Year, month, day, hour, minute, second and millisecond, in UTC.
    fn parts(self) -> [i64; 7] {
        let secs = self.secs();
        let sod = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
        [y, m, d, sod / 3600, (sod / 60) % 60, sod % 60, self.millis().rem_euclid(1000)]
    }

    /// The RFC 3339 text of a time whose year has four digits (any a clock or a peer gives),
    /// written into a buffer by hand: API answers hold many times (a node list of 10,000 holds
    /// 80,000), and the formatting machinery took a good part of writing them.
    fn text(self) -> Option<[u8; 24]> {
        let [y, m, d, h, mi, s, ms] = self.parts();
        if !(0..=9999).contains(&y) {
            return None;
        }
        let mut b = *b"0000-00-00T00:00:00.000Z";
        let mut put = |at: usize, width: usize, mut v: i64| {
            for i in (at..at + width).rev() {
                // `v` is below 10^width and not negative, so each digit fits a byte.
                b[i] = b'0' + (v % 10) as u8;
                v /= 10;
            }
        };
        for (at, width, v) in
            [(0, 4, y), (5, 2, m), (8, 2, d), (11, 2, h), (14, 2, mi), (17, 2, s), (20, 3, ms)]
        {
            put(at, width, v);
        }
        Some(b)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(text) = self.text()
            && let Ok(text) = std::str::from_utf8(&text)
        {
            return f.write_str(text);
        }
        let [y, m, d, h, mi, s, ms] = self.parts();
        write!(f, "{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
    }
}

/// Why a text is not an RFC 3339 UTC timestamp.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an RFC 3339 time (expected like 2026-11-30T02:39:51Z): {0}")]
pub struct TimestampParseError(String);

impl FromStr for Timestamp {
    type Err = TimestampParseError;

    /// Accepts `YYYY-MM-DDTHH:MM:SS[.fff][Z|±HH:MM]`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || TimestampParseError(s.to_owned());
        let b = s.as_bytes();
        if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
            return Err(bad());
        }
        let num = |r: std::ops::Range<usize>| -> Result<i64, TimestampParseError> {
            let part = s.get(r).ok_or_else(bad)?;
            if !part.bytes().all(|c| c.is_ascii_digit()) {
                return Err(bad());
            }
            part.parse::<i64>().map_err(|_| bad())
        };
        let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
        if b[13] != b':' || b[16] != b':' {
            return Err(bad());
        }
        let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
            return Err(bad());
        }
        let mut i = 19;
        let mut ms = 0i64;
        if b.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i == start {
                return Err(bad());
            }
            let frac = &s[start..i.min(start + 3)];
            ms = frac.parse::<i64>().map_err(|_| bad())? * 10i64.pow(3 - frac.len() as u32);
        }
        let offset_s = match b.get(i) {
            Some(b'Z' | b'z') if i + 1 == b.len() => 0,
            Some(sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
                let oh = num(i + 1..i + 3)?;
                let om = num(i + 4..i + 6)?;
                let o = oh * 3600 + om * 60;
                if *sign == b'+' { o } else { -o }
            }
            _ => return Err(bad()),
        };
        let days = days_from_civil(y, mo, d);
        let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_s;
        Ok(Timestamp::from_millis(secs * 1000 + ms))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.text() {
            Some(text) => s.serialize_str(std::str::from_utf8(&text).map_err(serde::ser::Error::custom)?),
            None => s.collect_str(self),
        }
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number since 1970-01-01 (inverse of [`days_from_civil`]).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { yoe + era * 400 + 1 } else { yoe + era * 400 }, m, d)
}

/// How long something lasted, in its two largest units: `42 s`, `3 min 5 s`, `2 h 10 min`,
/// `4 d 3 h` (alerts, events and the UI say durations the same way).
pub fn span(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        3600..86_400 => format!("{} h {} min", s / 3600, s / 60 % 60),
        _ => format!("{} d {} h", s / 86_400, s / 3600 % 24),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written text is the formatted one, for every four-digit year (leap days,
    /// year ends, milliseconds 0 and 999), and reads back; other years are formatted.
    #[test]
    fn timestamps_written_by_hand_are_the_formatted_text() {
        let formatted = |t: Timestamp| {
            let [y, m, d, h, mi, s, ms] = t.parts();
            format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
        };
        let first = "0000-01-01T00:00:00.000Z".parse::<Timestamp>().unwrap().millis();
        let last = "9999-12-31T23:59:59.999Z".parse::<Timestamp>().unwrap().millis();
        let mut cases: Vec<i64> = (first..=last).step_by(7_919_999_983).collect();
        cases.extend([first, last, 0, -1, 951_782_400_000 - 1, 951_782_400_000, 1_796_006_391_999]);
        for ms in cases {
            let t = Timestamp::from_millis(ms);
            let text = t.to_string();
            assert_eq!(text, formatted(t));
            assert_eq!(text.parse::<Timestamp>(), Ok(t), "{text}");
            assert_eq!(serde_json::to_string(&t).unwrap(), format!("\"{text}\""));
        }
        for t in [Timestamp::from_millis(first - 1), Timestamp::from_millis(last + 1)] {
            assert_eq!(t.text(), None);
            assert_eq!(t.to_string(), formatted(t));
        }
    }

    /// Order is time order across the sign, `Option` takes no room of its own, and the one
    /// millisecond given up reads as the next.
    #[test]
    fn timestamps_keep_their_order_and_an_option_is_free() {
        let ms = [i64::MIN + 1, -1_000, -1, 0, 1, 1_796_006_391_123, i64::MAX];
        let ts: Vec<Timestamp> = ms.iter().map(|m| Timestamp::from_millis(*m)).collect();
        assert!(ts.is_sorted_by(|a, b| a < b), "{ts:?}");
        assert_eq!(ts.iter().map(|t| t.millis()).collect::<Vec<_>>(), ms);
        assert_eq!(Timestamp::from_millis(i64::MIN).millis(), i64::MIN + 1);
        assert_eq!(Timestamp::default(), Timestamp::EPOCH);
        assert_eq!(format!("{:?}", Timestamp::from_millis(-1_000)), "Timestamp(-1000)");
        assert_eq!(Timestamp::EPOCH.millis(), 0);
        assert_eq!(size_of::<Option<Timestamp>>(), 8);
        assert_eq!(Timestamp::from_millis(i64::MAX).plus_millis(1).millis(), i64::MAX, "saturates");
        assert_eq!(Timestamp::from_millis(i64::MIN + 1).plus_millis(-5).millis(), i64::MIN + 1);
    }

    #[test]
    fn timestamps_print_and_parse_as_rfc3339() {
        let t = Timestamp::from_millis(1_796_006_391_123);
        assert_eq!(t.to_string(), "2026-11-30T02:39:51.123Z");
        assert_eq!("2026-11-30T02:39:51.123Z".parse::<Timestamp>(), Ok(t));
        assert_eq!("2026-11-30T03:39:51.123+01:00".parse::<Timestamp>(), Ok(t));
        assert_eq!(Timestamp::EPOCH.to_string(), "1970-01-01T00:00:00.000Z");
        assert!("2026-13-01T00:00:00Z".parse::<Timestamp>().is_err());
        assert!("yesterday".parse::<Timestamp>().is_err());
    }

    proptest::proptest! {
        #[test]
        fn timestamp_text_round_trips(ms in 0i64..253_402_300_799_999i64) {
            let t = Timestamp::from_millis(ms);
            proptest::prop_assert_eq!(t.to_string().parse::<Timestamp>(), Ok(t));
        }
    }
}
