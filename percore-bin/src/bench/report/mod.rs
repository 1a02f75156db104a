//! What a benchmark run measured: counts, errors by kind, responses by status code,
//! and the latency histogram, with a description of what ran. One [`Report`] is one
//! run, or several merged (`percore bench merge`); it is printed as text
//! ([`text`]) or JSON ([`json`]), drawn ([`plot`]), and its latencies leave the
//! process as an HdrHistogram interval log ([`hdrlog`]).
//!
//! Latencies are kept in microseconds in an HDR histogram of 3 significant digits, as
//! wrk does: a percentile is within 0.1% of the true value, whatever its magnitude.

mod figures;
pub mod hdrlog;
pub mod json;
pub mod plot;
mod run_info;
pub mod text;

pub use figures::{add_histogram, new_histogram, LatencySummary, Report, RunCounts, PERCENTILES};
pub use run_info::{Mode, RunInfo, Stop};
