//! What a benchmark run measured: counts, errors by kind, responses by status code,
//! the latency histogram and, over TLS, the handshakes, with a description of what
//! ran. One [`Report`] is one run, or several merged (`percore bench merge`); it is
//! printed as text ([`text`]) or JSON ([`json`]), drawn ([`plot`]), and its
//! latencies leave the process as an HdrHistogram interval log ([`hdrlog`]).
//!
//! Latencies are kept in microseconds in an HDR histogram of 3 significant digits, as
//! wrk does: a percentile is within 0.1% of the true value, whatever its magnitude.

mod figures;
mod handshakes;
pub mod hdrlog;
mod histogram;
pub mod json;
pub mod plot;
mod run_info;
pub mod text;

pub use figures::{LatencySummary, Report, RunCounts, PERCENTILES};
pub use handshakes::{Handshake, Handshakes};
pub use histogram::{add_histogram, new_histogram};
pub use run_info::{Mode, RunInfo, Stop};
