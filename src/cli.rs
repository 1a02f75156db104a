//! The command line.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// percore: a per-core HTTP/1.1 hello server on an edge-triggered epoll loop.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve one prebuilt response to every GET and HEAD, on every path, with one
    /// worker process per CPU.
    Serve(ServeArgs),
    /// Compare the kernel settings of sysctl.conf with the live ones (changes nothing).
    Tune,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0", value_name = "ADDR")]
    pub bind: IpAddr,

    /// Port to listen on; 0 picks a free one (printed on stderr at start).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,

    /// Response body [default: "hello, world!\n"].
    #[arg(long, value_name = "TEXT", conflicts_with = "body_file")]
    pub body: Option<String>,

    /// Read the response body from this file, once, at start.
    #[arg(long, value_name = "PATH")]
    pub body_file: Option<PathBuf>,

    /// Content-Type of the response.
    #[arg(long, value_name = "TYPE", default_value = "text/plain")]
    pub content_type: String,

    /// CPUs to run workers on, in taskset's syntax (0-3,6) [default: every CPU this
    /// process may run on, as taskset sets it].
    #[arg(long, value_name = "LIST", value_parser = parse_cpus)]
    pub cpus: Option<CpuList>,

    /// Number of workers, on the first CPUs of the set, wrapping round when more
    /// than CPUs [default: one per CPU].
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,

    /// Do not pin workers to their CPUs.
    #[arg(long)]
    pub no_pin: bool,

    /// Accept queue length of each worker's listener (capped at net.core.somaxconn).
    #[arg(long, value_name = "N", default_value_t = 65535)]
    pub backlog: u32,

    /// Seconds a graceful stop (SIGTERM, SIGINT) waits for open connections.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub shutdown_timeout: u64,

    /// Connections open at once per worker (capped by the open-file limit); at the
    /// limit a worker stops accepting until one closes.
    #[arg(long, value_name = "N", default_value_t = 65536)]
    pub max_conns: u64,

    /// Largest request body read (and dropped); larger gets 413. Suffixes k, m.
    #[arg(long, value_name = "BYTES", default_value = "1m", value_parser = parse_size)]
    pub max_body: u64,

    /// Longest request line; longer gets 414. Suffixes k, m.
    #[arg(long, value_name = "BYTES", default_value = "8k", value_parser = parse_size)]
    pub max_request_line: u64,

    /// Largest request head (request line and headers); larger gets 431. Suffixes k, m.
    #[arg(long, value_name = "BYTES", default_value = "32k", value_parser = parse_size)]
    pub max_header_bytes: u64,

    /// Seconds a request (head and body) may take to arrive, however slowly it
    /// trickles in; then the connection is closed without an answer. 0: no limit.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub header_timeout: u32,

    /// Seconds an idle keep-alive connection stays open. 0: no limit.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub keepalive_timeout: u32,

    /// Seconds a client may leave our output unread before it is dropped. 0: no limit.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub send_timeout: u32,
}

/// A byte count with an optional `k` or `m` suffix (powers of 1024).
fn parse_size(text: &str) -> Result<u64, String> {
    let lower = text.to_ascii_lowercase();
    let (digits, unit) = match lower.as_bytes().last() {
        Some(b'k') => (&lower[..lower.len() - 1], 1024),
        Some(b'm') => (&lower[..lower.len() - 1], 1024 * 1024),
        _ => (&lower[..], 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("{text:?} is not a size in bytes (such as 8192, 8k or 1m)"))
}

/// A parsed `--cpus` list.
#[derive(Clone, Debug)]
pub struct CpuList(pub Vec<usize>);

fn parse_cpus(list: &str) -> Result<CpuList, String> {
    percore::worker::parse_cpu_list(list).map(CpuList)
}
