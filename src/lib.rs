//! percore: an edge-triggered epoll event loop, one per CPU, and the HTTP/1.1 hello
//! server built on it.
//!
//! - [`reactor`]: the loop. A [`Protocol`](reactor::Protocol) turns bytes in into
//!   bytes out; the loop does every read, write, accept and close.
//! - [`http`]: the request parse, prebuilt responses, and the hello protocol.

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
