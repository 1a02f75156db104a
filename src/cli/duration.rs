//! Durations on the command line, one parse for every server's flags and `percore
//! bench`'s: `10s`, `500ms`, `1m`, `2h`, or a number of seconds (`1.5`).

use std::time::Duration;

/// A duration more than zero: `10s`, `1m`, `500ms`, `2h`, or a number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    parse(text).ok().filter(|d| !d.is_zero()).ok_or_else(|| not_a_duration(text))
}

/// A timeout as [`parse_duration`] reads it, or `0` (in any unit) for none, which is
/// [`Duration::ZERO`].
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    parse(text).map_err(|()| not_a_duration(text))
}

fn parse(text: &str) -> Result<Duration, ()> {
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().map_err(|_| ())?;
    let seconds = match unit {
        "" | "s" => number,
        "ms" => number / 1000.0,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => return Err(()),
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| ())
}

fn not_a_duration(text: &str) -> String {
    format!("{text:?} is not a duration (such as 10s, 1m or 500ms)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_unit_or_are_seconds() {
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        for bad in ["", "ms", "10 s", "10d", "-1", "0", "0ms", "1e400"] {
            let refused = parse_duration(bad).expect_err(bad);
            assert!(refused.contains("is not a duration"), "{bad}: {refused}");
        }
    }

    #[test]
    fn a_timeout_of_zero_is_none() {
        assert_eq!(parse_timeout("0"), Ok(Duration::ZERO));
        assert_eq!(parse_timeout("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_timeout("15ms"), Ok(Duration::from_millis(15)));
        assert!(parse_timeout("soon").is_err());
    }
}
