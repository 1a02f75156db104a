//! percore: an edge-triggered epoll event loop, one per CPU in a pinned process of
//! its own, and the HTTP/1.1 hello server built on it.
//!
//! A server on the loop is a [`Protocol`](reactor::Protocol): it is handed the bytes
//! a connection sent, appends its answer to an output buffer, and says how much input
//! it used and whether the connection stays open. The loop does every `accept`,
//! `recv`, `send` and `close`, keeps an incomplete request until the rest arrives,
//! sends all the answers of one read in one `send`, and holds back a client that does
//! not read. [`worker::main`] runs it on every core with the same command-line flags
//! as `percore serve`.
//!
//! A complete server that answers each line with its length:
//!
//! ```no_run
//! use percore::reactor::{Protocol, Verdict};
//!
//! struct LineLength;
//!
//! impl Protocol for LineLength {
//!     type Conn = ();
//!
//!     fn on_data(&mut self, _conn: &mut (), input: &[u8], out: &mut Vec<u8>) -> Verdict {
//!         let mut used = 0;
//!         // Every complete line is answered; a partial one waits for more input.
//!         while let Some(end) = input[used..].iter().position(|&b| b == b'\n') {
//!             out.extend_from_slice(format!("{end}\n").as_bytes());
//!             used += end + 1;
//!         }
//!         Verdict::keep(used)
//!     }
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     // Parses --bind, --port, --cpus, --workers, the timeouts...; one worker per CPU.
//!     percore::worker::main(true, || Ok(LineLength))
//! }
//! ```
//!
//! The modules:
//! - [`reactor`]: the loop, the [`Protocol`](reactor::Protocol) trait, and its limits.
//! - [`worker`]: the master and its pinned worker processes, for any protocol.
//! - [`http`]: the request parse, prebuilt responses and the `Date` slot, the
//!   [`Hello`](http::Hello) protocol, and the client side's response parse.
//! - [`listen`]: the listening socket, for a loop run without the workers.
//! - [`loadgen`]: the `percore bench` load generator, on the same loop.

#![deny(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![deny(clippy::undocumented_unsafe_blocks)]

#[cfg(not(target_os = "linux"))]
compile_error!("percore is Linux only: it is built on epoll, accept4 and signalfd");

pub mod http;
pub mod listen;
pub mod loadgen;
pub mod reactor;
mod sys;
pub mod worker;
