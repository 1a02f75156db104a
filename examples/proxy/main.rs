//! An HTTP/1.1 reverse proxy on percore's loop, nginx's `proxy_pass` with
//! `upstream { keepalive N; }`: each request goes to a backend taken in turn
//! (`--backend HOST:PORT` or `--backend unix:PATH`, repeatable), on a connection
//! kept open between requests, and its answer comes back as it arrives; one pinned
//! worker process per CPU, with the flags of `percore serve`.
//!
//! ```text
//! cargo run --release --example proxy -- --port 8000 --backend 127.0.0.1:8080 --keepalive 64
//! curl -v http://127.0.0.1:8000/
//! ```
//!
//! Requests: each head is parsed whole before anything is forwarded, so a request
//! whose framing could be read two ways (`Content-Length` beside
//! `Transfer-Encoding`, two lengths, a folded field line) is refused with `400` and never
//! reaches a backend. A body, of known length or chunked, is forwarded as it
//! arrives and never held whole ([`BodyFramer`](percore::http::BodyFramer) finds its
//! end). Pipelined requests are forwarded one at a time and answered in order;
//! HTTP/1.0 clients are answered as such.
//!
//! Answers are read with [`ResponseReader`](percore::http::ResponseReader): the head
//! first, rewritten, then the body as it comes, framed as the backend framed it (a
//! length, chunks and trailers, or the close), and none after `HEAD`, a 1xx, 204 or
//! 304; interim answers (`100 Continue`, `103`) are passed on to HTTP/1.1 clients.
//! A client that reads slowly or not at all stops the backend's answer: the loop
//! stops reading a connection whose writes wait at the other's budget, so an
//! exchange holds at most the budget and a read (about 300 KiB), whatever the
//! answer's size.
//!
//! Heads: hop-by-hop fields are removed both ways (`Connection` and the fields it
//! names, `Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer`, `Upgrade`; see
//! `heads.rs`), `X-Forwarded-For` gets the client's address, `Host` is passed on.
//!
//! Backends: round robin; a backend that refuses, or does not accept within
//! `--connect-timeout` or answer within `--read-timeout`, is skipped for
//! `--fail-timeout` (nginx's `max_fails=1`). A connect that failed, or a backend
//! that closes or breaks the protocol before answering, gets the client `502`; a
//! timeout `504`. A request without a body whose connect failed is tried once on
//! the next backend up; a `GET` or `HEAD` sent on a reused connection that the
//! backend closed unanswered (its keep-alive timeout crossing the request) is sent
//! once more on a fresh one.
//!
//! The pool (`pool.rs`): at most `--keepalive` idle connections per worker, the
//! most recently used taken first; the surplus an answer leaves is closed at the
//! next tick if it stayed idle, so that a steady load larger than the pool opens
//! nothing. Each worker's last line on stderr counts the backend connections it
//! opened.
//!
//! A graceful stop (SIGTERM) or a reload (SIGHUP) lets every exchange in flight
//! finish, for up to `--shutdown-timeout`: both its connections are marked
//! busy until the answer ended (the client once its request is sent whole: while
//! its body arrives, the loop's message timeout and --min-input-rate time it); idle
//! backend connections close at once, and answers then say `Connection: close`.

mod backends;
mod heads;
mod pool;
mod proxy;
mod upstream;

use std::net::ToSocketAddrs;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use percore::cli::{self, parse_timeout, ServerArgs};
use percore::listen::{Address, Opening};

use backends::Backends;
use proxy::Proxy;

#[derive(Debug, Parser)]
#[command(about = "An HTTP/1.1 reverse proxy with a pool of backend connections kept alive")]
struct Args {
    #[command(flatten)]
    server: ServerArgs,

    /// A backend, HOST:PORT (a name is resolved once, at start) or unix:PATH (a
    /// Unix socket); repeat it for several, taken in turn (round robin).
    #[arg(long, value_name = "HOST:PORT|unix:PATH", required = true, value_parser = parse_backend)]
    backend: Vec<Address>,

    /// Idle backend connections each worker keeps open for later requests (nginx's
    /// `keepalive`); connections busy with a request are not counted.
    #[arg(long, value_name = "N", default_value_t = 32)]
    keepalive: usize,

    /// How long a backend may take to accept a connection; then 504 (0: no limit).
    /// (The loop's connect_timeout; nginx's proxy_connect_timeout.)
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_timeout)]
    connect_timeout: Duration,

    /// How long a backend may stay silent, from the request sent whole to the end
    /// of its answer; then 504, or the answer is cut (0: no limit). A client waiting
    /// for the answer is under this, not under --idle-timeout. (nginx's
    /// proxy_read_timeout.)
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_timeout)]
    read_timeout: Duration,

    /// How long a backend that refused or timed out is skipped (0: never skipped).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_timeout)]
    fail_timeout: Duration,
}

/// `unix:PATH`, or `HOST:PORT` resolved to its first address.
fn parse_backend(text: &str) -> Result<Address, String> {
    if text.starts_with("unix:") {
        return text.parse();
    }
    let mut addrs = text.to_socket_addrs().map_err(|e| format!("{text}: {e}"))?;
    addrs.next().map(Address::Ip).ok_or_else(|| format!("{text}: no address"))
}

/// None for a duration of 0: no limit.
fn limit(duration: Duration) -> Option<Duration> {
    Some(duration).filter(|d| !d.is_zero())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut options = args.server.options(Opening::ClientSpeaksFirst);
    options.reactor.connect_timeout = limit(args.connect_timeout);
    cli::serve(&options, move || {
        let backends = Backends::new(args.backend.clone(), args.fail_timeout);
        Ok(Proxy::new(backends, args.keepalive, limit(args.read_timeout)))
    })
}
