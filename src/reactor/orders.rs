//! What a callback asks of the rest of the loop through its [`Io`](super::io::Io):
//! open a connection, write to, wake, resume, shut down, close or mark busy
//! another. The
//! connection being served is borrowed during the call, so each order is queued
//! here, to be carried out as soon as the call returns, in the same turn.

use std::ops::Range;
use std::time::Duration;

use super::config::{DrainPolicy, IdleTimeout};
use super::slab::{Ids, Token};
use crate::listen::Address;

/// One thing a callback asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Order {
    /// Open a connection to the address under this token, taken at once.
    Connect(Token, Address),
    /// Send these bytes of the batch's bytes on `to`; `from` wrote them.
    Write {
        from: Token,
        to: Token,
        bytes: Range<usize>,
    },
    Wake(Token),
    Resume(Token),
    Shutdown(Token),
    Close(Token),
    Idle(Token, IdleTimeout),
    /// The connection's read timeout (`None`: none).
    ReadTimeout(Token, Option<Duration>),
    Drain(Token, DrainPolicy),
    /// The connection is busy with an exchange another carries on (`true`), or
    /// no longer.
    Busy(Token, bool),
    /// Splice the first connection's input on to the second: this many bytes of
    /// it, or until it ends.
    Splice(Token, Token, Option<u64>),
}

/// The orders of the calls made since the loop last carried them out, and the
/// tokens they take for new connections.
#[derive(Debug, Default)]
pub(crate) struct Orders {
    pub(crate) ids: Ids,
    orders: Vec<Order>,
    /// What `Write` orders copied, one range each.
    bytes: Vec<u8>,
    /// The TLS of connections ordered opened with it (or why it could not be
    /// made), until each is placed.
    #[cfg(feature = "tls")]
    sessions: Vec<(Token, std::io::Result<crate::tls::Session>)>,
}

/// Orders taken to be carried out, with the bytes their writes refer to.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub(crate) orders: Vec<Order>,
    pub(crate) bytes: Vec<u8>,
}

impl Orders {
    pub(crate) fn push(&mut self, order: Order) {
        self.orders.push(order);
    }

    /// Copies `bytes` to be sent on `to`, after whatever was written to it before.
    pub(crate) fn write(&mut self, from: Token, to: Token, bytes: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        let end = self.bytes.len();
        // Writes in a row from one connection to another are sent as one.
        if let Some(Order::Write { from: f, to: t, bytes: range }) = self.orders.last_mut() {
            if (*f, *t) == (from, to) && range.end == start {
                range.end = end;
                return;
            }
        }
        self.orders.push(Order::Write { from, to, bytes: start..end });
    }

    /// Orders a connection to `addr` under a token taken now, speaking TLS as
    /// `session` says once it is placed (or failing as it says).
    #[cfg(feature = "tls")]
    pub(crate) fn connect_tls(
        &mut self,
        token: Token,
        addr: Address,
        session: std::io::Result<crate::tls::Session>,
    ) {
        self.sessions.push((token, session));
        self.orders.push(Order::Connect(token, addr));
    }

    /// The TLS ordered for the connection placed under `token`, if any.
    #[cfg(feature = "tls")]
    pub(crate) fn take_session(&mut self, token: Token) -> Option<std::io::Result<crate::tls::Session>> {
        let at = self.sessions.iter().position(|(t, _)| *t == token)?;
        Some(self.sessions.swap_remove(at).1)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.orders.is_empty()
    }

    /// Takes the orders given so far, leaving `spare`'s memory for the next ones.
    pub(crate) fn take(&mut self, spare: Batch) -> Batch {
        let orders = std::mem::replace(&mut self.orders, spare.orders);
        let bytes = std::mem::replace(&mut self.bytes, spare.bytes);
        Batch { orders, bytes }
    }
}

impl Batch {
    /// Forgets the orders, keeping the memory.
    pub(crate) fn clear(&mut self) {
        self.orders.clear();
        self.bytes.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_in_a_row_to_one_peer_are_one_order_and_others_keep_their_order() {
        let mut orders = Orders::default();
        let (a, b, c) = (Token(1), Token(2), Token(3));
        orders.write(a, b, b"he");
        orders.write(a, b, b"llo");
        orders.push(Order::Wake(c));
        orders.write(a, b, b"!");
        orders.write(a, c, b"?");
        let batch = orders.take(Batch::default());
        assert!(orders.is_empty());
        assert_eq!(
            batch.orders,
            [
                Order::Write { from: a, to: b, bytes: 0..5 },
                Order::Wake(c),
                Order::Write { from: a, to: b, bytes: 5..6 },
                Order::Write { from: a, to: c, bytes: 6..7 },
            ]
        );
        assert_eq!(batch.bytes, b"hello!?");
    }

    #[test]
    fn an_order_to_connect_by_path_is_no_larger_than_one_by_ip_address() {
        // A token and a SocketAddr, as before Unix sockets: a path is a PathBuf
        // beside the address, in the room the enum has.
        assert!(std::mem::size_of::<Order>() <= 40, "{}", std::mem::size_of::<Order>());
    }
}
