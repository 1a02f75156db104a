//! The latency histogram every figure of time is kept in: its bounds, and how one
//! is added into another.

use hdrhistogram::Histogram;

/// The highest latency the histogram tells apart: 60 s, in µs. Slower responses are
/// counted as 60 s rather than widening every thread's histogram (and the merge).
pub const MAX_LATENCY_US: u64 = 60_000_000;

/// An empty latency histogram: 1 µs to 60 s, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    // Only invalid bounds or precision make this fail, and these are constants.
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds")
}

/// Adds `from` into `into`, clamping what lies beyond `into`'s range (a histogram
/// read from a log may be of a wider one) instead of failing.
pub fn add_histogram(into: &mut Histogram<u64>, from: &Histogram<u64>) {
    if into.add(from).is_err() {
        for value in from.iter_recorded() {
            into.saturating_record_n(value.value_iterated_to(), value.count_at_value());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wider_histogram_is_clamped_into_ours() {
        let mut ours = new_histogram();
        ours.record(10).expect("in range");
        let mut wide = Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds");
        wide.record(120_000_000).expect("in range");
        add_histogram(&mut ours, &wide);
        assert_eq!(ours.len(), 2);
        assert!(ours.max() >= MAX_LATENCY_US && ours.max() < 61_000_000);
    }
}
