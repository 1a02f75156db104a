//! percore: an edge-triggered epoll event loop, one per CPU in a pinned process of
//! its own, and the HTTP/1.1 hello server built on it.
//!
//! A server on the loop is a [`Protocol`](reactor::Protocol): the loop calls it when
//! a connection opens, when input arrives, when the peer finishes sending, when the
//! connection's timer fires, when it is woken and when it is gone; each call writes
//! to an [`Io`](reactor::Io), says what comes next, and may open, write to, wake or
//! close any other connection of the loop (a relay, a proxy). The loop does every `accept`, `connect`, `recv`, `send` and
//! `close`, keeps an incomplete message until the rest arrives, sends all the
//! answers of one read in one system call, references shared bytes (a large body)
//! instead of copying them, sends a range of a file with sendfile(2), and holds
//! back a client that does not read.
//! [`worker::run`] runs it on every core.
//!
//! A complete server that answers each line with its length:
//!
//! ```no_run
//! use std::io::Write;
//! use percore::listen::Opening;
//! use percore::reactor::{Io, Protocol, Verdict};
//!
//! struct LineLength;
//!
//! impl Protocol for LineLength {
//!     type Conn = ();
//!
//!     fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
//!         let mut used = 0;
//!         // Every complete line is answered; a partial one waits for more input.
//!         while let Some(end) = input[used..].iter().position(|&b| b == b'\n') {
//!             let _ = writeln!(io, "{end}");
//!             used += end + 1;
//!         }
//!         Verdict::keep(used)
//!     }
//! }
//!
//! # #[cfg(feature = "cli")]
//! fn main() -> std::process::ExitCode {
//!     // Parses --bind, --port, --cpus, --workers, the timeouts...; one worker per CPU.
//!     percore::cli::main(Opening::ClientSpeaksFirst, || Ok(LineLength))
//! }
//! # #[cfg(not(feature = "cli"))] // without it, worker::run is the way in
//! # fn main() {}
//! ```
//!
//! The modules:
//! - [`reactor`]: the loop, the [`Protocol`](reactor::Protocol) trait, its timers,
//!   and a [`Harness`](reactor::Harness) to test a protocol without sockets.
//! - [`worker`]: the master and its pinned worker processes, for any protocol.
//! - [`http`]: the request parse, prebuilt responses and the `Date` slot, the
//!   [`Hello`](http::Hello) protocol, and the client side's response parse
//!   ([`ResponseReader`](http::ResponseReader): a response's head, then its body).
//! - [`listen`]: the listening socket, for a loop run without the workers.
//! - `tls` (feature `tls`, off by default; on in the `percore` binary): a server's
//!   certificate and key, a client's trust, and TLS on the loop's connections
//!   (rustls for the handshake); docs/tls.md says how it works.
//! - `cli` (feature `cli`, on by default): the command line of a server on the
//!   loop, shared by `percore serve` and the examples; clap alone. Without it
//!   (`default-features = false`) the library is built on libc, socket2 and
//!   core_affinity alone. The `percore` binary, its load generator among it, is a
//!   crate of its own (`percore-bin`).

#![deny(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![deny(clippy::undocumented_unsafe_blocks)]

#[cfg(not(target_os = "linux"))]
compile_error!("percore is Linux only: it is built on epoll, accept4 and signalfd");

#[cfg(feature = "cli")]
pub mod cli;
pub mod http;
pub mod listen;
pub mod reactor;
mod sys;
#[cfg(feature = "tls")]
pub mod tls;
pub mod worker;
