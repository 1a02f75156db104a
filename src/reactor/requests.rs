//! What a callback asks of the rest of the loop through its [`Io`](super::Io): open a
//! connection, write to, wake, resume, shut down or close another. The connection
//! being served is borrowed during the call, so each request is queued here, to be
//! carried out (`deferred`) as soon as the call returns, in the same turn.

use std::net::SocketAddr;
use std::ops::Range;

use super::config::{DrainPolicy, IdleTimeout};
use super::slab::{Ids, Token};

/// One thing a callback asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// Open a connection to the address under this token, taken at once.
    Connect(Token, SocketAddr),
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
    Drain(Token, DrainPolicy),
    /// Splice the first connection's input on to the second.
    Splice(Token, Token),
}

/// The requests of the calls made since the loop last carried them out, and the
/// tokens they take for new connections.
#[derive(Debug, Default)]
pub(crate) struct Deferred {
    pub(crate) ids: Ids,
    requests: Vec<Request>,
    /// What `Write` requests copied, one range each.
    bytes: Vec<u8>,
}

/// Requests taken to be carried out, with the bytes their writes refer to.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub(crate) requests: Vec<Request>,
    pub(crate) bytes: Vec<u8>,
}

impl Deferred {
    pub(crate) fn push(&mut self, request: Request) {
        self.requests.push(request);
    }

    /// Copies `bytes` to be sent on `to`, after whatever was written to it before.
    pub(crate) fn write(&mut self, from: Token, to: Token, bytes: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        let end = self.bytes.len();
        // Writes in a row from one connection to another are sent as one.
        if let Some(Request::Write { from: f, to: t, bytes: range }) = self.requests.last_mut() {
            if (*f, *t) == (from, to) && range.end == start {
                range.end = end;
                return;
            }
        }
        self.requests.push(Request::Write { from, to, bytes: start..end });
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// Takes the requests made so far, leaving `spare`'s memory for the next ones.
    pub(crate) fn take(&mut self, spare: Batch) -> Batch {
        let requests = std::mem::replace(&mut self.requests, spare.requests);
        let bytes = std::mem::replace(&mut self.bytes, spare.bytes);
        Batch { requests, bytes }
    }
}

impl Batch {
    /// Forgets the requests, keeping the memory.
    pub(crate) fn clear(&mut self) {
        self.requests.clear();
        self.bytes.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_in_a_row_to_one_peer_are_one_request_and_others_keep_their_order() {
        let mut deferred = Deferred::default();
        let (a, b, c) = (Token(1), Token(2), Token(3));
        deferred.write(a, b, b"he");
        deferred.write(a, b, b"llo");
        deferred.push(Request::Wake(c));
        deferred.write(a, b, b"!");
        deferred.write(a, c, b"?");
        let batch = deferred.take(Batch::default());
        assert!(deferred.is_empty());
        assert_eq!(
            batch.requests,
            [
                Request::Write { from: a, to: b, bytes: 0..5 },
                Request::Wake(c),
                Request::Write { from: a, to: b, bytes: 5..6 },
                Request::Write { from: a, to: c, bytes: 6..7 },
            ]
        );
        assert_eq!(batch.bytes, b"hello!?");
    }
}
