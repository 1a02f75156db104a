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
//! `Transfer-Encoding`, two unequal lengths, a folded field line) is refused with
//! `400` and never reaches a backend. A body, of known length or chunked, is read as
//! it arrives, by the strict chunk grammar (`ChunkGrammar::Strict`:
//! CRLF only, extensions checked, at most 16 hex digits), and never held whole. A
//! body that breaks it is refused at once (`400`, and the backend connection, which
//! had the head, closed). Pipelined requests are forwarded one at a time and
//! answered in order; nothing a client sends after a request that closes its
//! connection (`Connection: close`, HTTP/1.0 without keep-alive, or an answer that
//! closes it) is read as a request (RFC 9112, 9.6). HTTP/1.0 clients are answered
//! as such.
//!
//! Bodies are framed again, both ways (`reframe.rs`): what the proxy read it sends on
//! under framing of its own, never the sender's bytes of framing, so that a next hop
//! that reads framing otherwise than the proxy cannot find another message in it
//! (request smuggling): a body of known length under `Content-Length`, as counted; a
//! chunked one in chunks of the proxy's own (lower-case hex sizes, CRLF, no
//! extension), with the trailers but those that frame, route or control a message
//! (RFC 9110, 6.5.1: `Content-Length`, `Host`, `Set-Cookie`, ...).
//!
//! Answers are read with [`ResponseReader`](percore::http::ResponseReader), by the
//! strict grammar too: the head first, rewritten, then the content as it comes,
//! under the framing the proxy gives it; none after `HEAD`, a 1xx, 204 or 304.
//! Interim answers (`100 Continue`, `103`) are passed on to HTTP/1.1 clients. An
//! answer with both `Content-Length` and `Transfer-Encoding` loses its length, and
//! the client is closed after it (RFC 9112, 6.3); equal lengths go on as one; a
//! transfer coding other than `chunked` alone gets `502`; a chunked answer to an
//! HTTP/1.0 client goes as its content until the close. An answer whose framing
//! breaks gets `502` if nothing of it went out yet (its head is held until what
//! followed it in the same read was read well), else is cut short and the client
//! closed. A client that reads slowly or not at all stops the backend's answer: the
//! loop stops reading a connection whose writes wait at the other's budget, so an
//! exchange holds at most the budget and a read (about 300 KiB), whatever the
//! answer's size.
//!
//! Heads: hop-by-hop fields are removed both ways (`Connection` and the fields it
//! names, `Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer`, `Upgrade`; see
//! `heads.rs`), and the framing fields, which the proxy writes itself. Policies, as
//! nginx lets an operator set them:
//! - `CONNECT` gets `405` and a close: the proxy is no tunnel.
//! - An absolute-form target (`GET http://h/p`) goes on in origin form (`GET /p`)
//!   with `Host: h`; with a `Host` that names another host, `400`.
//! - A client's header fields whose names have an underscore are dropped (nginx's
//!   `underscores_in_headers off`), unless `--underscores-in-headers`.
//! - A client's `Forwarded`, `X-Real-IP` and `X-Forwarded-*` are dropped, and
//!   `X-Forwarded-For` is the client's address alone: a client could say anything
//!   in them. `--trust-forwarded-headers` keeps them and adds the client's address
//!   to `X-Forwarded-For`, for a proxy behind another that sets them.
//! - Over TLS (`--tls-cert`, `--tls-key`: the proxy ends its clients' TLS),
//!   `X-Forwarded-Proto: https` is added (a trusted one that came is kept instead).
//!
//! TLS to the backends (`--backend-tls`): each backend is verified against
//! `--backend-ca PEM` as the server its `--backend` host names (sent by SNI; an IP
//! address is checked against the certificate's addresses), or not at all with
//! `--backend-tls-insecure`; the pool keeps TLS connections as it keeps plain ones
//! (and the client keeps a ticket per connection to resume with). A backend whose
//! handshake fails is answered 502 and skipped as one that refuses, and said once
//! on stderr with rustls's reason (`proxy: backend ADDR (NAME): TLS handshake: invalid
//! peer certificate: certificate not valid for name "NAME" ...`).
//! - `Host` is passed on.
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
mod reframe;
mod upstream;

use std::net::ToSocketAddrs;
use std::process::ExitCode;
use std::time::Duration;

use std::path::PathBuf;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use percore::cli::{self, parse_timeout, ServerArgs};
use percore::listen::{Address, Opening};
use percore::tls::{ClientTls, ClientTlsOptions, Trust};

use backends::Backends;
use heads::Policy;
use proxy::Proxy;

#[derive(Debug, Parser)]
#[command(
    about = "An HTTP/1.1 reverse proxy with a pool of backend connections kept alive",
    long_about = "An HTTP/1.1 reverse proxy with a pool of backend connections kept alive.\n\n\
        What it forwards is framed by the proxy, both ways: bodies are read by the strict \
        chunk grammar (RFC 9112, 7.1) and sent on under a length or chunks of its own, so \
        that no backend or client can read another message in them. A request whose \
        framing could be read two ways gets 400, a CONNECT 405 (the proxy is no tunnel); \
        an absolute-form target (GET http://host/path) goes on in origin form with its \
        host as Host, or gets 400 beside a Host that names another; nothing a client \
        sends after a request that closes its connection is read. A backend's answer \
        that cannot be framed one way gets 502."
)]
struct Args {
    #[command(flatten)]
    server: ServerArgs,

    /// A backend, HOST:PORT (a name is resolved once, at start) or unix:PATH (a
    /// Unix socket); repeat it for several, taken in turn (round robin).
    #[arg(long, value_name = "HOST:PORT|unix:PATH", required = true, value_parser = parse_backend)]
    backend: Vec<Backend>,

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

    /// Pass on a client's header fields whose names have an underscore
    /// (`X_Forwarded_For`); by default they are dropped, as a backend may read them
    /// as their hyphenated twins (nginx's underscores_in_headers).
    #[arg(long)]
    underscores_in_headers: bool,

    /// Pass on a client's Forwarded, X-Real-IP and X-Forwarded-* fields, and add its
    /// address to its X-Forwarded-For, for a proxy behind another that sets them; by
    /// default they are dropped, and X-Forwarded-For is the client's address alone.
    #[arg(long)]
    trust_forwarded_headers: bool,

    /// Speak TLS to the backends (HTTPS), each verified as the server named by the
    /// host of its --backend (sent by SNI; an IP address is checked against the
    /// certificate's addresses): with --backend-ca, or --backend-tls-insecure. A
    /// backend whose handshake fails is answered 502 (and skipped as one that
    /// refuses), said once on stderr.
    #[arg(long)]
    backend_tls: bool,

    /// The certificate authorities (PEM) that --backend-tls verifies the backends'
    /// certificates against.
    #[arg(long, value_name = "PEM", requires = "backend_tls")]
    backend_ca: Option<PathBuf>,

    /// Take any certificate from the backends, unverified (a test backend's
    /// self-signed one): the connection is encrypted, but to whoever answers.
    #[arg(long, requires = "backend_tls", conflicts_with = "backend_ca")]
    backend_tls_insecure: bool,
}

/// What --backend names, and the host it names (for TLS: `localhost` for a Unix
/// socket).
#[derive(Clone, Debug)]
struct Backend {
    addr: Address,
    host: String,
}

/// `unix:PATH`, or `HOST:PORT` resolved to its first address.
fn parse_backend(text: &str) -> Result<Backend, String> {
    if text.starts_with("unix:") {
        return Ok(Backend { addr: text.parse()?, host: "localhost".to_owned() });
    }
    let mut addrs = text.to_socket_addrs().map_err(|e| format!("{text}: {e}"))?;
    let addr = addrs.next().map(Address::Ip).ok_or_else(|| format!("{text}: no address"))?;
    let host = text.rsplit_once(':').map_or(text, |(host, _)| host);
    Ok(Backend { addr, host: host.trim_start_matches('[').trim_end_matches(']').to_owned() })
}

/// The backends' TLS that --backend-tls asks for, if it does; a CA file that does
/// not load is one line naming it, exit status 1.
fn backend_tls(args: &Args) -> Option<ClientTls> {
    if !args.backend_tls {
        return None;
    }
    let trust = match (&args.backend_ca, args.backend_tls_insecure) {
        (Some(ca), _) => Trust::CaFile(ca.clone()),
        (None, true) => Trust::InsecureAnyCertificate,
        (None, false) => Args::command()
            .error(
                ErrorKind::MissingRequiredArgument,
                "--backend-tls needs --backend-ca PEM (or --backend-tls-insecure)",
            )
            .exit(),
    };
    let options = ClientTlsOptions { alpn: vec![b"http/1.1".to_vec()], resume: 64 };
    Some(ClientTls::new(&trust, &options).unwrap_or_else(|error| {
        cli::say(format_args!("proxy: --backend-ca: {error}"));
        std::process::exit(1)
    }))
}

/// None for a duration of 0: no limit.
fn limit(duration: Duration) -> Option<Duration> {
    Some(duration).filter(|d| !d.is_zero())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let tls = backend_tls(&args);
    let mut options = args.server.options(Opening::ClientSpeaksFirst);
    options.reactor.connect_timeout = limit(args.connect_timeout);
    cli::serve(&options, move || {
        let addrs = args.backend.iter().map(|backend| backend.addr.clone()).collect();
        let backends = Backends::new(addrs, args.fail_timeout);
        let policy = Policy {
            underscores_in_headers: args.underscores_in_headers,
            trust_forwarded_headers: args.trust_forwarded_headers,
        };
        let proxy = Proxy::new(backends, args.keepalive, limit(args.read_timeout), policy);
        Ok(match &tls {
            Some(tls) => {
                proxy.with_backend_tls(tls.clone(), args.backend.iter().map(|b| b.host.clone()).collect())
            }
            None => proxy,
        })
    })
}
