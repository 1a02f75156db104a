//! One connection's steps, carried out on its wire: the machine says the next step,
//! the wire does it, the machine hears what came of it; until the connection needs
//! the driver (it waits, closes, releases its writers, splices) or its turn is up.

use std::io;

use super::io::Ends;
use super::machine::{Connection, Machine, Step};
use super::protocol::{Closed, Protocol};
use super::slab::Token;
use super::wire::{Received, Wire};

/// Reads one connection may do per wake-up before the others get their turn.
const READS_PER_WAKE: usize = 16;

/// What a connection needs of the driver when its steps break off.
pub(crate) enum Needs {
    /// Nothing: it waits for an edge, a timer or an order.
    Nothing,
    /// Its reading budget ran out (or orders wait to be carried out first): serve it
    /// again soon.
    Again,
    Close(Closed),
    /// Its output drained: the writers blocked on it may read again.
    Release,
    /// Its input moves through its pipe.
    Splice,
}

/// Carries out `conn`'s steps on `wire` until it needs the driver: it waits, its
/// budget runs out, it closes, it releases its writers, or its input is spliced.
pub(crate) fn steps<P: Protocol, W: Wire>(
    machine: &mut Machine<P>,
    buffer: &mut [u8],
    conn: &mut Connection<P::Conn>,
    wire: &mut W,
    token: Token,
    reads: &mut usize,
) -> Needs {
    loop {
        match machine.poll(conn, token) {
            Step::Send => {
                let sent = wire.send(machine.output());
                machine.sent(conn, sent);
            }
            Step::Flush => {
                let sent = wire.flush(conn.queue());
                machine.flushed(conn, sent);
            }
            Step::Release => return Needs::Release,
            Step::Read | Step::HandHeld | Step::Discard | Step::Splice
                if *reads == READS_PER_WAKE || !machine.io.orders.is_empty() =>
            {
                // What the protocol ordered (bytes written on to another connection)
                // is done before more is read; and one connection's input does not
                // starve the others'.
                machine.rearm(conn, token);
                return Needs::Again;
            }
            Step::Read => {
                *reads += 1;
                match wire.recv(buffer) {
                    Ok(Received { len: 0, .. }) => {
                        machine.input_ended(conn, token, Ends::of(wire));
                    }
                    Ok(read) => {
                        machine.received(conn, token, Ends::of(wire), &buffer[..read.len], read.filled)
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => machine.nothing_to_read(conn),
                    Err(e) => machine.read_failed(conn, e.kind()),
                }
            }
            Step::HandHeld => {
                *reads += 1;
                machine.hand_held(conn, token, Ends::of(wire));
            }
            Step::Discard => {
                *reads += 1;
                let read = wire.recv(buffer).map(|read| read.len);
                machine.discarded(conn, read);
            }
            Step::Splice => {
                *reads += 1;
                return Needs::Splice;
            }
            Step::ShutdownWrite => {
                let result = wire.shutdown_write();
                machine.shut_down(conn, result);
            }
            Step::Linger => {
                let result = wire.linger();
                machine.shut_down(conn, result);
            }
            Step::Wait => return Needs::Nothing,
            Step::Close(closed) => return Needs::Close(closed),
        }
    }
}
