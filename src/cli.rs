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

    /// Connections open at once per worker (capped by the open-file limit).
    #[arg(long, value_name = "N", default_value_t = 65536)]
    pub max_conns: u64,
}

/// A parsed `--cpus` list.
#[derive(Clone, Debug)]
pub struct CpuList(pub Vec<usize>);

fn parse_cpus(list: &str) -> Result<CpuList, String> {
    percore::worker::parse_cpu_list(list).map(CpuList)
}
