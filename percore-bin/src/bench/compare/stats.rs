//! The verdict on per-round ratios: their median, their range, and a confidence
//! interval for the median that assumes nothing of their distribution.
//!
//! The interval is the order-statistic (sign-test) interval: with `n` ratios sorted,
//! the median lies between the `k`-th smallest and the `k`-th largest with
//! probability `1 - 2 * P(Binomial(n, 1/2) < k)`, whatever the distribution; `k` is
//! the largest that keeps that at 95% or more. Under 6 rounds no `k` reaches 95%:
//! the interval is then the range, and its coverage (93.75% at 5 rounds, 87.5% at 4)
//! is said beside it. A difference is claimed only when the interval excludes 1;
//! at 5 rounds that asks every round to agree, which two identical servers do by
//! chance once in 16 comparisons.

/// Which way a figure went against the baseline's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Lower than the baseline's beyond the noise.
    Lower,
    /// Higher than the baseline's beyond the noise.
    Higher,
    /// Within the noise of the rounds.
    Same,
}

/// A figure of one target against the baseline's, over the rounds.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The median of the per-round ratios.
    pub median: f64,
    /// The smallest and largest per-round ratio.
    pub range: (f64, f64),
    /// The confidence interval of the median ratio.
    pub interval: (f64, f64),
    /// The interval's coverage, 0.95 or more from 6 rounds on.
    pub confidence: f64,
    /// Rounds whose ratio was below 1, and above.
    pub below: usize,
    pub above: usize,
    /// Rounds compared.
    pub rounds: usize,
    pub direction: Direction,
}

/// The coverage asked of the interval.
const CONFIDENCE: f64 = 0.95;

/// Compares per-round ratios (a target's figure over the baseline's, each round);
/// `None` without a finite, positive ratio.
pub fn compare(ratios: &[f64]) -> Option<Comparison> {
    let mut sorted: Vec<f64> = ratios.iter().copied().filter(|r| r.is_finite() && *r > 0.0).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let (k, confidence) = order_statistic(n);
    let interval = (sorted[k - 1], sorted[n - k]);
    let direction = if interval.1 < 1.0 {
        Direction::Lower
    } else if interval.0 > 1.0 {
        Direction::Higher
    } else {
        Direction::Same
    };
    Some(Comparison {
        median: median(&sorted),
        range: (sorted[0], sorted[n - 1]),
        interval,
        confidence,
        below: sorted.iter().filter(|&&r| r < 1.0).count(),
        above: sorted.iter().filter(|&&r| r > 1.0).count(),
        rounds: n,
        direction,
    })
}

/// The median of values sorted ascending (the mean of the middle two for an even count).
pub fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// The rank `k` (1-based) of the interval's ends among `n` sorted values, and its
/// coverage: the largest `k` whose coverage is at least [`CONFIDENCE`], or 1.
fn order_statistic(n: usize) -> (usize, f64) {
    let coverage = |k: usize| 1.0 - 2.0 * binomial_below(n, k);
    let best = (1..=n.div_ceil(2)).take_while(|&k| coverage(k) >= CONFIDENCE).last().unwrap_or(1);
    (best, coverage(best))
}

/// P(Binomial(n, 1/2) < k).
fn binomial_below(n: usize, k: usize) -> f64 {
    let mut choose = 1.0;
    let mut sum = 0.0;
    for i in 0..k {
        sum += choose;
        choose = choose * (n - i) as f64 / (i + 1) as f64;
    }
    sum / 2f64.powi(n as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn the_median_of_odd_and_even_counts() {
        assert_eq!(median(&[1.0, 2.0, 9.0]), 2.0);
        assert_eq!(median(&[1.0, 2.0, 4.0, 9.0]), 3.0);
    }

    #[test]
    fn coverage_is_the_sign_tests() {
        // 5 rounds: the range, 1 - 2/32.
        assert_eq!(order_statistic(5).0, 1);
        assert!(close(order_statistic(5).1, 0.9375));
        // 6 rounds: the range reaches 95% (1 - 2/64).
        assert_eq!(order_statistic(6).0, 1);
        assert!(close(order_statistic(6).1, 1.0 - 2.0 / 64.0));
        // 9 rounds: the 2nd to the 8th (1 - 2 * 10/512 = 0.9609); the 3rd would be 0.82.
        assert_eq!(order_statistic(9).0, 2);
        assert!(close(order_statistic(9).1, 1.0 - 20.0 / 512.0));
        // 20 rounds: the 6th to the 15th (0.9586); the 7th would be 0.8847.
        assert_eq!(order_statistic(20).0, 6);
        // One round: itself, with no confidence to speak of.
        assert_eq!(order_statistic(1), (1, 0.0));
    }

    #[test]
    fn every_round_lower_is_a_lower_verdict() {
        let c = compare(&[0.70, 0.64, 0.71, 0.80, 0.75]).expect("ratios");
        assert_eq!(c.direction, Direction::Lower);
        assert!(close(c.median, 0.71));
        assert_eq!((c.range, c.interval), ((0.64, 0.80), (0.64, 0.80)));
        assert_eq!((c.below, c.above, c.rounds), (5, 0, 5));
    }

    #[test]
    fn one_round_on_the_other_side_is_no_difference_at_five_rounds() {
        let c = compare(&[1.2, 1.3, 0.97, 1.25, 1.4]).expect("ratios");
        assert_eq!(c.direction, Direction::Same);
        assert_eq!((c.below, c.above), (1, 4));
        // At 9 rounds one outlier is within what the interval leaves out.
        let c = compare(&[1.2, 1.3, 0.97, 1.25, 1.4, 1.1, 1.15, 1.3, 1.2]).expect("ratios");
        assert_eq!(c.direction, Direction::Higher);
        assert_eq!(c.interval, (1.1, 1.3));
    }

    #[test]
    fn a_tie_is_no_difference_and_counts_on_neither_side() {
        let c = compare(&[1.0, 1.0, 1.0, 1.0, 1.0]).expect("ratios");
        assert_eq!(c.direction, Direction::Same);
        assert_eq!((c.below, c.above), (0, 0));
    }

    #[test]
    fn ratios_that_are_not_numbers_are_left_out() {
        assert_eq!(compare(&[]), None);
        assert_eq!(compare(&[f64::NAN, f64::INFINITY, 0.0]), None);
        let c = compare(&[f64::NAN, 2.0, 3.0]).expect("two ratios");
        assert_eq!((c.rounds, c.median), (2, 2.5));
    }
}
