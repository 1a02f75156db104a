//! When a certificate stops being valid: its `notAfter`, read from its DER with the
//! few steps of ASN.1 that reach it, so that a server can warn of an expired
//! certificate at start (rustls checks a peer's certificates, not its own).
//!
//! RFC 5280, 4.1:
//! ```text
//! Certificate    ::= SEQUENCE { tbsCertificate TBSCertificate, ... }
//! TBSCertificate ::= SEQUENCE { version [0] EXPLICIT Version DEFAULT v1,
//!                               serialNumber, signature, issuer, validity Validity, ... }
//! Validity       ::= SEQUENCE { notBefore Time, notAfter Time }
//! Time           ::= CHOICE { utcTime UTCTime, generalTime GeneralizedTime }
//! ```

use std::time::{Duration, SystemTime};

const SEQUENCE: u8 = 0x30;
const VERSION: u8 = 0xa0;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;

/// The certificate's `notAfter`, or `None` if its DER does not read as one.
pub(crate) fn not_after(der: &[u8]) -> Option<SystemTime> {
    let (certificate, _) = element(der, SEQUENCE)?;
    let (mut tbs, _) = element(certificate, SEQUENCE)?;
    if tbs.first() == Some(&VERSION) {
        tbs = any(tbs)?.1;
    }
    // serialNumber, signature, issuer: skipped.
    for _ in 0..3 {
        tbs = any(tbs)?.1;
    }
    let (validity, _) = element(tbs, SEQUENCE)?;
    let (_, rest) = any(validity)?;
    let (&tag, _) = rest.split_first()?;
    let (time, _) = any(rest)?;
    time_of(tag, time)
}

/// The contents of the element of `tag` at the start of `der`, and what follows it.
fn element(der: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    if der.first() != Some(&tag) {
        return None;
    }
    any(der)
}

/// The contents of the element at the start of `der`, whatever its tag, and what
/// follows it (DER: a one-byte tag, a definite length).
fn any(der: &[u8]) -> Option<(&[u8], &[u8])> {
    let (&first, rest) = der.get(1..)?.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 {
            return None;
        }
        let len = rest.get(..count)?.iter().fold(0usize, |len, &b| len << 8 | usize::from(b));
        (len, &rest[count..])
    };
    (rest.len() >= len).then(|| rest.split_at(len))
}

/// A UTCTime (`YYMMDDHHMMSSZ`, 1950–2049) or GeneralizedTime (`YYYYMMDDHHMMSSZ`).
fn time_of(tag: u8, text: &[u8]) -> Option<SystemTime> {
    let (year, rest) = match tag {
        UTC_TIME => {
            let yy = digits(text.get(..2)?)?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, &text[2..])
        }
        GENERALIZED_TIME => (digits(text.get(..4)?)?, &text[4..]),
        _ => return None,
    };
    let [m1, m2, d1, d2, h1, h2, mi1, mi2, s1, s2, b'Z'] = *rest else { return None };
    let number = |pair: [u8; 2]| digits(&pair);
    let (month, day) = (number([m1, m2])?, number([d1, d2])?);
    let (hour, minute, second) = (number([h1, h2])?, number([mi1, mi2])?, number([s1, s2])?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day)?;
    let seconds = days * 86_400 + u64::from(hour * 3600 + minute * 60 + second);
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
}

fn digits(text: &[u8]) -> Option<u32> {
    text.iter().try_fold(0, |n, &b| b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0')))
}

/// Days from 1970-01-01 to a date from then on (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: u32, month: u32, day: u32) -> Option<u64> {
    let year = i64::from(year) - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = (i64::from(month) + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    u64::try_from(era * 146_097 + day_of_era - 719_468).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_count_days_from_the_epoch() {
        assert_eq!(days_from_civil(1970, 1, 1), Some(0));
        assert_eq!(days_from_civil(2000, 3, 1), Some(11_017));
        assert_eq!(days_from_civil(2026, 12, 7), Some(20_794));
        assert_eq!(days_from_civil(1969, 12, 31), None);
    }

    #[test]
    fn both_kinds_of_time_are_read_and_anything_else_is_not() {
        let at = |tag, text: &str| {
            time_of(tag, text.as_bytes()).map(|t| t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs())
        };
        assert_eq!(at(UTC_TIME, "700101000000Z"), Some(0));
        assert_eq!(at(UTC_TIME, "491231235959Z"), Some(2_524_607_999));
        assert_eq!(at(GENERALIZED_TIME, "20261207120000Z"), Some(20_794 * 86_400 + 12 * 3600));
        for bad in ["2612071200Z", "261307120000Z", "261207120000", "26120712000AZ"] {
            assert_eq!(at(UTC_TIME, bad), None, "{bad}");
        }
    }
}
