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
    /// Serve one prebuilt response to every GET and HEAD, on every path.
    Serve(ServeArgs),
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
}
