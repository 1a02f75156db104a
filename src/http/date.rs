//! The `Date` value, formatted by hand so the library needs no date crate, and so it
//! never panics: a worker that formats the date once a second must not abort because
//! the clock says 1969 or the year 10000.
//!
//! RFC 9110, 5.6.7:
//! ```text
//! IMF-fixdate  = day-name "," SP date1 SP time-of-day SP GMT
//! day-name     = %s"Mon" / %s"Tue" / %s"Wed" / %s"Thu" / %s"Fri" / %s"Sat" / %s"Sun"
//! date1        = day SP month SP year ; e.g., 02 Jun 1982
//! day          = 2DIGIT
//! month        = %s"Jan" / %s"Feb" / %s"Mar" / %s"Apr" / %s"May" / %s"Jun"
//!              / %s"Jul" / %s"Aug" / %s"Sep" / %s"Oct" / %s"Nov" / %s"Dec"
//! year         = 4DIGIT
//! GMT          = %s"GMT"
//! time-of-day  = hour ":" minute ":" second
//! ```

use std::time::{SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const DATE_LEN: usize = 29;

/// The last instant an IMF-fixdate can show, 9999-12-31 23:59:59, in seconds since
/// the epoch: its year has four digits.
const LAST_SECOND: u64 = 253_402_300_799;

const SECONDS_PER_DAY: u64 = 86_400;

const DAY_NAMES: [&[u8; 3]; 7] = [b"Sun", b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat"];

const MONTH_NAMES: [&[u8; 3]; 12] =
    [b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec"];

/// `now` as an IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`: the value of a `Date`
/// header, for a protocol's own `Date` renewed in `on_tick`. A time before 1970 (a
/// clock not yet set) shows as 1970-01-01 00:00:00, one after 9999 as the last second
/// of 9999: a wrong date in a header is better than a worker that aborts.
pub fn http_date(now: SystemTime) -> [u8; DATE_LEN] {
    let seconds = now.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs()).min(LAST_SECOND);
    let days = seconds / SECONDS_PER_DAY;
    let (year, month, day) = civil_from_days(days);
    let time_of_day = seconds % SECONDS_PER_DAY;
    let mut date = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    // 1970-01-01 was a Thursday, day 4 of a week that starts on Sunday.
    date[0..3].copy_from_slice(DAY_NAMES[((days + 4) % 7) as usize]);
    write_digits(&mut date[5..7], day);
    date[8..11].copy_from_slice(MONTH_NAMES[(month - 1) as usize]);
    write_digits(&mut date[12..16], year);
    write_digits(&mut date[17..19], time_of_day / 3600);
    write_digits(&mut date[20..22], time_of_day / 60 % 60);
    write_digits(&mut date[23..25], time_of_day % 60);
    date
}

/// The year, month (1 to 12) and day (1 to 31) of the day `days` after 1970-01-01.
///
/// Howard Hinnant's `civil_from_days`, from "chrono-Compatible Low-Level Date
/// Algorithms" (<https://howardhinnant.github.io/date_algorithms.html#civil_from_days>),
/// in unsigned arithmetic since `days` is never negative here. It counts in 400-year
/// eras of 146,097 days, each starting on a 1 March, so that the leap day is the last
/// day of its year and the months' lengths follow a fixed pattern from March on.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // 719,468 days from 0000-03-01 to 1970-01-01.
    let from_era_zero = days + 719_468;
    let era = from_era_zero / 146_097;
    let day_of_era = from_era_zero % 146_097; // 0 to 146,096
                                              // The era's leap days taken out before dividing by 365: one at the end of every
                                              // 4-year cycle (day 1,460 of it), none at a century's (36,524), and one again at
                                              // the era's last day (146,096).
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100); // 0 to 365
                                                                                              // Months from March: 153 days every 5 months (31 30 31 30 31).
    let month_from_march = (5 * day_of_year + 2) / 153; // 0 to 11
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 };
    // January and February close the March-based year: they are in the next one.
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    (year, month, day)
}

/// Writes `value` as decimal digits filling `slot`, with leading zeros.
fn write_digits(slot: &mut [u8], mut value: u64) {
    for digit in slot.iter_mut().rev() {
        *digit = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(seconds)
    }

    fn formatted(now: SystemTime) -> String {
        String::from_utf8_lossy(&http_date(now)).into_owned()
    }

    #[test]
    fn known_instants() {
        assert_eq!(formatted(UNIX_EPOCH), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(formatted(at(784_111_777)), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(formatted(at(951_782_400)), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(formatted(at(LAST_SECOND)), "Fri, 31 Dec 9999 23:59:59 GMT");
    }

    #[test]
    fn agrees_with_httpdate_from_1970_to_9999() {
        // Every day's last second from 1970 to 2101 (leap years, 2000, 2100), then
        // instants a prime number of seconds apart up to the last one.
        let days = (0..48_000).map(|day| day * SECONDS_PER_DAY + SECONDS_PER_DAY - 1);
        let spread = (0..LAST_SECOND).step_by(999_983);
        let ends = [0, 1, 68_169_599, 68_169_600, 951_868_799, 4_107_542_400, LAST_SECOND - 1, LAST_SECOND];
        for seconds in days.chain(spread).chain(ends) {
            let now = at(seconds);
            assert_eq!(formatted(now), httpdate::fmt_http_date(now), "{seconds} s after the epoch");
        }
    }

    #[test]
    fn a_clock_outside_the_years_it_can_show_is_clamped() {
        let before = UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(formatted(before), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(formatted(UNIX_EPOCH - Duration::from_secs(86_400 * 365 * 100)), formatted(UNIX_EPOCH));
        assert_eq!(formatted(at(LAST_SECOND + 1)), "Fri, 31 Dec 9999 23:59:59 GMT");
        assert_eq!(formatted(at(1 << 40)), "Fri, 31 Dec 9999 23:59:59 GMT");
    }
}
