//! The work done on one connection per wake-up: read, hand to the protocol, send.

use std::io;
use std::os::fd::AsRawFd;

use super::connection::{Connection, Phase};
use super::{Closed, Protocol, OUTPUT_BUDGET, READS_PER_WAKE};
use crate::sys;

/// What to do with a connection after some work on it.
pub(crate) enum Next {
    /// Nothing until its next edge.
    Wait,
    /// Its reading budget ran out with input possibly left: serve it again soon.
    Again,
    /// Its phase may have changed: close, linger, or keep waiting.
    Settle,
    /// Close at once, for this reason.
    Close(Closed),
}

/// Reads within the wake-up's budget, hands the input to the protocol and sends its
/// answer, until the socket is drained, the output is over the cap, or the
/// connection is closing.
pub(crate) fn read_and_answer<P: Protocol>(
    conn: &mut Connection<P::Conn>,
    protocol: &mut P,
    read_buffer: &mut [u8],
    output: &mut Vec<u8>,
    max_pending_input: usize,
) -> Next {
    for _ in 0..READS_PER_WAKE {
        if conn.unsent() > OUTPUT_BUDGET {
            conn.read_paused = true;
            return Next::Wait;
        }
        if conn.answer_more {
            // Requests already received come before reading more.
            match answer(conn, protocol, &[], false, output) {
                Next::Wait => continue,
                next => return next,
            }
        }
        let n = match sys::recv(conn.fd.as_raw_fd(), read_buffer) {
            Ok(0) => {
                // The peer is done sending: what it sent last is kept for the
                // protocol's on_close (a response delimited by the end of stream).
                conn.read_closed = true;
                conn.phase = Phase::Closing { linger: false };
                return Next::Settle;
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
            Err(e) => return Next::Close(Closed::ReadFailed(e.kind())),
        };
        let filled = n == read_buffer.len();
        match answer(conn, protocol, &read_buffer[..n], filled, output) {
            Next::Wait if conn.pending_input.len() > max_pending_input => return Next::Close(Closed::Done),
            Next::Wait => {}
            next => return next,
        }
        if n < read_buffer.len() && !conn.read_closed {
            return Next::Wait;
        }
    }
    Next::Again
}

/// Reads and drops what a lingering connection still sends; closes at its end.
pub(crate) fn discard_input<S>(conn: &mut Connection<S>, read_buffer: &mut [u8]) -> Next {
    for _ in 0..READS_PER_WAKE {
        match sys::recv(conn.fd.as_raw_fd(), read_buffer) {
            Ok(0) => return Next::Close(Closed::Done),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
            Err(_) => return Next::Close(Closed::Done),
        }
    }
    Next::Again
}

/// Hands the protocol its input (`fresh`, after what is pending) and sends its
/// answer. `Wait` means the connection stays open and can take more input.
/// `maybe_more`: the socket may hold more input than was read (the read filled the
/// buffer), so a close must linger.
pub(crate) fn answer<P: Protocol>(
    conn: &mut Connection<P::Conn>,
    protocol: &mut P,
    fresh: &[u8],
    maybe_more: bool,
    output: &mut Vec<u8>,
) -> Next {
    let from_pending = !conn.pending_input.is_empty();
    if from_pending {
        conn.pending_input.extend_from_slice(fresh);
    }
    let input: &[u8] = if from_pending { &conn.pending_input } else { fresh };
    output.clear();
    let verdict = protocol.on_data(&mut conn.state, input, output);
    let consumed = verdict.consumed.min(input.len());
    // Stopped at the output budget with input left: whole requests may be waiting,
    // which no new edge would bring back.
    conn.answer_more = verdict.keep_open && consumed < input.len() && output.len() >= OUTPUT_BUDGET;
    if verdict.keep_open {
        conn.keep_input(from_pending, fresh, consumed);
    } else {
        // Bytes beyond the last answer, or a request still arriving: the peer may
        // go on sending, and closing on unread input would reset the connection
        // and could destroy our answer before the peer reads it.
        let linger = consumed < input.len() || maybe_more || P::mid_request(&conn.state);
        conn.pending_input = Vec::new();
        conn.phase = Phase::Closing { linger };
    }
    if consumed > 0 {
        conn.input_progressed = true;
    }
    if let Err(e) = conn.send(output) {
        return Next::Close(Closed::WriteFailed(e.kind()));
    }
    if conn.phase != Phase::Open {
        return Next::Settle;
    }
    Next::Wait
}
