//! The connection machine: every rule about a connection, and no I/O.
//!
//! It takes events: input read ([`received`](Machine::received)), the end of the
//! peer's stream, output sent or refused, a timer due, a wake, an order from
//! another connection, a graceful stop begun; and it says what to do next, one
//! [`Step`] at a time ([`poll`](Machine::poll)): read, send, shut down, close, or
//! wait. It calls the protocol (which does no I/O either) and keeps what the rules
//! need: the input the protocol left unconsumed, the output the wire has not taken,
//! whether the protocol paused, and which of the loop's deadlines applies.
//!
//! Two drivers carry its steps out: the loop, with sockets and epoll, and the
//! [`Harness`](crate::reactor::Harness), with byte vectors and a clock that moves
//! when told. This is the split quinn-proto and rustls make between a protocol's
//! state and its I/O: one copy of the rules, driven by either.

mod asked;
mod calls;
mod connection;
mod deadline;
mod reports;
mod rules;

pub(crate) use connection::Connection;
pub(crate) use rules::{Edge, Machine, Step};

#[cfg(test)]
mod tests;
