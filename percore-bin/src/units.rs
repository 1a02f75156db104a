//! Units on the command line, one parse for `percore serve`'s flags and `percore
//! bench`'s: byte sizes (`8k`, `1m`), durations (`10s`, `500ms`), each optionally
//! within a range, and a count as the `usize` the library takes.

use std::time::Duration;

pub use percore::cli::parse_duration;

/// A byte count with an optional `k`, `m` or `g` suffix (powers of 1024).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let lower = text.to_ascii_lowercase();
    let (digits, unit) = match lower.as_bytes().last() {
        Some(b'k') => (&lower[..lower.len() - 1], 1024),
        Some(b'm') => (&lower[..lower.len() - 1], 1024 * 1024),
        Some(b'g') => (&lower[..lower.len() - 1], 1024 * 1024 * 1024),
        _ => (&lower[..], 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("{text:?} is not a size in bytes (such as 8192, 8k or 1m)"))
}

/// [`parse_size`], refusing a size outside `min..=max`.
pub fn size_within(
    min: u64,
    max: u64,
) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |text| {
        let size = parse_size(text)?;
        if (min..=max).contains(&size) {
            Ok(size)
        } else {
            Err(format!("{text:?} is outside {min} to {max} bytes"))
        }
    }
}

/// [`parse_duration`], refusing a duration outside `min..=max`, which `range` says
/// in words.
pub fn duration_within(text: &str, min: Duration, max: Duration, range: &str) -> Result<Duration, String> {
    let duration = parse_duration(text)?;
    if (min..=max).contains(&duration) {
        Ok(duration)
    } else {
        Err(format!("{text:?} is outside {range}"))
    }
}

/// A count from the command line as a `usize`; saturating on 32-bit targets.
pub fn as_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
