//! Timestamp text to nanoseconds since the epoch (UTC), for the forms HQL accepts, and back.

/// Nanoseconds since 1970-01-01 00:00:00 UTC for `YYYY-MM-DD HH:MM:SS[.fraction]`,
/// `YYYY-MM-DD HH:MM:SS:N` (N nanoseconds, Hypertable's form), `YYYY-MM-DD HH:MM`,
/// `YYYY-MM-DD`, `YYYY`, or a plain (optionally negative) integer of nanoseconds; a `T` may
/// stand for the space. `None` for anything else or a value outside i64.
pub fn parse_nanos(text: &str) -> Option<i64> {
    let t = text.trim();
    if let Some(n) = plain_integer(t) {
        return Some(n);
    }
    let (date, time) = match t.split_once([' ', 'T']) {
        Some((d, rest)) => (d, Some(rest.trim_start())),
        None => (t, None),
    };
    let mut parts = date.split('-');
    let year = digits(parts.next()?, 4, 4)?;
    let month = parts.next().map_or(Some(1), |m| digits(m, 1, 2))?;
    let day = parts.next().map_or(Some(1), |d| digits(d, 1, 2))?;
    if parts.next().is_some() || !(1..=12).contains(&month) {
        return None;
    }
    if day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let (mut hour, mut minute, mut second, mut nanos) = (0, 0, 0, 0);
    if let Some(time) = time {
        let (hms, frac) = match time.split_once('.') {
            Some((hms, frac)) => (hms, Some(frac)),
            None => (time, None),
        };
        let mut f = hms.split(':');
        hour = digits(f.next()?, 1, 2)?;
        minute = digits(f.next()?, 1, 2)?;
        second = f.next().map_or(Some(0), |s| digits(s, 1, 2))?;
        // Hypertable's `SS:N`: N nanoseconds.
        let count = f.next();
        if f.next().is_some() || hour > 23 || minute > 59 || second > 60 {
            return None;
        }
        match (frac, count) {
            (Some(_), Some(_)) => return None,
            (Some(frac), None) => nanos = fraction_nanos(frac)?,
            (None, Some(n)) => nanos = digits(n, 1, 9)?,
            (None, None) => {}
        }
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3_600 + minute * 60 + second;
    // In i128: near i64::MIN the whole seconds alone are below i64::MIN, the sum is not.
    i64::try_from(i128::from(secs) * 1_000_000_000 + i128::from(nanos)).ok()
}

/// A decimal fraction of a second in nanoseconds, as Hypertable reads `SS.f` (the fraction
/// times 10^9: `.5` is 500 ms, `.000000005` 5 ns); digits past the ninth are dropped.
fn fraction_nanos(frac: &str) -> Option<i64> {
    if frac.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let kept = &frac[..frac.len().min(9)];
    let n: i64 = kept.parse().ok()?;
    Some(n * 10i64.pow(9 - kept.len() as u32))
}

/// `YYYY-MM-DD HH:MM:SS.nnnnnnnnn` (UTC) for nanoseconds since the epoch; the form
/// [`parse_nanos`] reads back to the same value.
pub fn format_nanos(nanos: i64) -> String {
    let secs = nanos.div_euclid(1_000_000_000);
    let frac = nanos.rem_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{frac:09}",
        sod / 3_600,
        sod % 3_600 / 60,
        sod % 60
    )
}

/// (year, month, day) for days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn plain_integer(t: &str) -> Option<i64> {
    let digits_part = t.strip_prefix('-').unwrap_or(t);
    if digits_part.is_empty() || !digits_part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // A bare four-digit number is a year, as in Hypertable's date grammar.
    if t.len() == 4 && !t.starts_with('-') {
        return None;
    }
    t.parse().ok()
}

fn digits(s: &str, min: usize, max: usize) -> Option<i64> {
    if s.len() < min || s.len() > max || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::{format_nanos, parse_nanos};

    #[test]
    fn forms() {
        assert_eq!(parse_nanos("1970-01-01 00:00:00"), Some(0));
        // Hypertable's fraction (issue 17): `.5` is half a second; `:N` counts nanoseconds.
        assert_eq!(parse_nanos("1970-01-01 00:00:01.5"), Some(1_500_000_000));
        assert_eq!(
            parse_nanos("1970-01-01 00:00:01.000000005"),
            Some(1_000_000_005)
        );
        assert_eq!(
            parse_nanos("1970-01-01 00:00:01.1234567891"),
            Some(1_123_456_789)
        );
        assert_eq!(parse_nanos("1970-01-01 00:00:01:4"), Some(1_000_000_004));
        assert_eq!(
            parse_nanos("2009-02-12 02:12:13:4"),
            parse_nanos("2009-02-12 02:12:13.000000004")
        );
        assert_eq!(parse_nanos("1970-01-01T00:00:01"), Some(1_000_000_000));
        assert_eq!(parse_nanos("1970-01-01 00:00:01.5:4"), None);
        assert_eq!(parse_nanos("1970-01-01 00:00:01."), None);
        assert_eq!(parse_nanos("1970-01-01 00:00:01:1234567890"), None);
        assert_eq!(
            parse_nanos("2008-01-01 00:00:00"),
            Some(1_199_145_600_000_000_000)
        );
        assert_eq!(parse_nanos("2008-01-01"), Some(1_199_145_600_000_000_000));
        assert_eq!(parse_nanos("2008"), Some(1_199_145_600_000_000_000));
        assert_eq!(parse_nanos("12345"), Some(12345));
        assert_eq!(parse_nanos("2008-02-30"), None);
        assert_eq!(parse_nanos("2008-13-01"), None);
        assert_eq!(parse_nanos("yesterday"), None);
        assert_eq!(
            parse_nanos("2000-02-29 23:59:59"),
            Some(951_868_799_000_000_000)
        );
    }

    #[test]
    fn format_round_trips() {
        assert_eq!(format_nanos(0), "1970-01-01 00:00:00.000000000");
        assert_eq!(format_nanos(1_000_000_005), "1970-01-01 00:00:01.000000005");
        assert_eq!(
            format_nanos(951_868_799_000_000_000),
            "2000-02-29 23:59:59.000000000"
        );
        for n in [0, 1, -1, 1_199_145_600_123_456_789, -86_400_000_000_001] {
            assert_eq!(parse_nanos(&format_nanos(n)), Some(n), "{n}");
        }
    }

    /// Issue 12: DUMP TABLE wrote timestamps near i64::MIN that LOAD could not read back (the
    /// whole seconds were multiplied out before the nanoseconds were added, and overflowed).
    #[test]
    fn timestamps_near_the_ends_of_i64_round_trip() {
        for n in [
            i64::MIN,
            i64::MIN + 1,
            i64::MIN + 999_999_999,
            i64::MAX - 1,
            i64::MAX,
        ] {
            assert_eq!(parse_nanos(&format_nanos(n)), Some(n), "{n}");
        }
        assert_eq!(parse_nanos("1677-09-21 00:12:43.145224191"), None);
    }
}
