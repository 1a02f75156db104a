//! The command line: its subcommands and `percore serve`'s flags (`percore bench`'s
//! are the bench's own, in `bench::args`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use percore::cli::ServerArgs;

use crate::bench::args::BenchArgs;
use crate::tune::TuneArgs;
use crate::units::{parse_duration, parse_size, size_within};

/// percore: a per-core HTTP/1.1 hello server on an edge-triggered epoll loop.
// Named, as its package is percore-bin; the about line is the package's description.
#[derive(Debug, Parser)]
#[command(name = "percore", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// One value, parsed once at start: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve one prebuilt response to every GET and HEAD, on every path, with one
    /// worker process per CPU.
    Serve(ServeArgs),
    /// Compare the kernel settings of sysctl.conf with the live ones; with --apply,
    /// raise those below (never lowering one) and save what it changed for --restore.
    Tune(TuneArgs),
    /// Load an HTTP server and report throughput, errors and the latency
    /// distribution, like wrk and ab together, on percore's own loop.
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub server: ServerArgs,

    /// Response body [default: "hello, world!\n"].
    #[arg(long, value_name = "TEXT", conflicts_with = "body_file")]
    pub body: Option<String>,

    /// Read the response body from this file at start, and again at each reload
    /// (SIGHUP).
    #[arg(long, value_name = "PATH")]
    pub body_file: Option<PathBuf>,

    /// Bodies of this size or more are sealed in a memfd and sent with sendfile(2),
    /// from the page cache to the socket without a copy; smaller ones from memory.
    /// Suffixes k, m, g; `off` sends every body from memory.
    #[arg(long, value_name = "BYTES", default_value = "16k", value_parser = parse_sendfile_min)]
    pub sendfile_min: u64,

    /// Send each answer this long after its request arrived (10ms, 1.5s), as a
    /// backend with latency would: for testing proxies and load balancers.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub delay: Option<std::time::Duration>,

    /// Content-Type of the response.
    #[arg(long, value_name = "TYPE", default_value = "text/plain")]
    pub content_type: String,

    /// Largest request body read (and dropped); larger gets 413. Suffixes k, m, g.
    #[arg(long, value_name = "BYTES", default_value = "1m", value_parser = parse_size)]
    pub max_body: u64,

    /// Longest request line, 1 byte to 1m; longer gets 414. Suffixes k, m.
    #[arg(long, value_name = "BYTES", default_value = "8k", value_parser = size_within(1, MAX_REQUEST_LINE))]
    pub max_request_line: u64,

    /// Largest request head (request line and headers), 1 byte to 64m; larger gets
    /// 431. Suffixes k, m.
    #[arg(long, value_name = "BYTES", default_value = "32k", value_parser = size_within(1, MAX_HEAD))]
    pub max_header_bytes: u64,
}

/// The longest request line the server takes: far past any real one (browsers stop
/// near 8k, nginx's largest buffers are 8k), and well inside every count.
const MAX_REQUEST_LINE: u64 = 1024 * 1024;
/// The largest request head the server takes.
const MAX_HEAD: u64 = 64 * 1024 * 1024;

/// `off` (never), or a size from which bodies are sent with sendfile(2).
fn parse_sendfile_min(text: &str) -> Result<u64, String> {
    if text == "off" {
        return Ok(u64::MAX);
    }
    parse_size(text).map_err(|e| format!("{e}, or off"))
}
