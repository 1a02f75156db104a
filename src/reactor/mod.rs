//! The loop: one thread, one epoll instance, edge-triggered, no locks; and the
//! contract between it and what it serves.
//!
//! A [`Protocol`] is called for every connection event: [`on_open`](Protocol::on_open)
//! when it opens (accepted, or established), [`on_data`](Protocol::on_data) when
//! input arrives or a paused protocol may go on, [`on_input_end`](Protocol::on_input_end)
//! at the end of the peer's stream, [`on_timer`](Protocol::on_timer) when its timer
//! fires, [`on_wake`](Protocol::on_wake) when it is woken, [`on_close`](Protocol::on_close)
//! when it is gone. Each call writes to an [`Io`], whose output the loop sends when
//! the call returns, and through which it may open, write to, wake, resume, shut
//! down or close any other connection of the loop.
//!
//! Inside, one module holds every rule about a connection (`machine`, which does
//! no I/O); the [`Reactor`] carries its steps out on sockets, and the [`Harness`]
//! on byte vectors, through the same driver.

mod accept;
mod blocked;
mod clock;
mod config;
mod conns;
mod driver;
mod event_loop;
mod harness;
mod io;
mod machine;
mod orders;
mod output;
mod protocol;
#[cfg(feature = "tls")]
mod secured;
mod slab;
mod splice;
mod steps;
mod stop;
mod timers;
mod wire;

pub use config::{Config, DrainPolicy, IdleTimeout};
pub use conns::{ConnId, Conns};
pub use event_loop::{Reactor, Returned, Stats};
pub use harness::{Harness, PeerReads};
pub use io::Io;
pub use output::sealed_file;
pub use protocol::{Closed, Counts, Flow, Protocol, Verdict};
pub use stop::{DrainOptions, ListenerFate};

pub(crate) use clock::far_future;
pub(crate) use driver::READ_BUFFER;
pub(crate) use output::COPY_MAX;
#[cfg(test)]
pub(crate) use protocol::Unused;
