//! Input spliced on to another connection ([`Io::splice_to`](super::Io::splice_to)):
//! read into a pipe and written from it with splice(2), never copied to user memory
//! nor handed to the protocol. The pipe is emptied before more is read, so what it
//! holds (at most one read) is all a splice adds; while the other connection cannot
//! take it, this one is blocked on it as a writer over the budget is.

use std::collections::HashMap;
use std::io;
use std::os::fd::AsFd;

use super::core::{Next, READS_PER_WAKE};
use super::slab::Token;
use super::{Closed, Protocol, Reactor};
use crate::sys::Pipe;

/// Bytes moved into the pipe per read: a pipe's default capacity (16 pages).
const PIPE_CHUNK: usize = 64 * 1024;

/// One connection's input on its way to another.
#[derive(Debug)]
pub(crate) struct Splice {
    to: Token,
    pipe: Pipe,
    /// Bytes in the pipe, not yet taken by `to`.
    in_pipe: usize,
}

/// The loop's splices, by the connection whose input they take, and who feeds whom.
#[derive(Debug, Default)]
pub(crate) struct Splices {
    by_source: HashMap<Token, Splice>,
    source_of: HashMap<Token, Token>,
}

/// What moving a connection's input came to.
enum Moved {
    /// Carry on as `Next` says.
    Next(Next),
    /// The other connection cannot take what the pipe holds: wait for it.
    Blocked(Token),
    /// The other connection failed to take it.
    Failed(Token, io::ErrorKind),
}

impl Splices {
    pub(crate) fn is_empty(&self) -> bool {
        self.by_source.is_empty()
    }
}

impl<P: Protocol> Reactor<P> {
    /// Starts splicing `from`'s input on to `to`, after what `from` holds unconsumed.
    /// If no pipe can be had, `from`'s input goes on reaching the protocol.
    pub(crate) fn start_splice(&mut self, from: Token, to: Token) {
        let open =
            |reactor: &mut Self, token| reactor.connections.get_mut(token).is_some_and(|c| c.is_open());
        let taken = self.splices.by_source.contains_key(&from) || self.splices.source_of.contains_key(&to);
        if from == to || taken || !open(self, from) || !open(self, to) {
            return;
        }
        let Ok(pipe) = Pipe::new() else { return };
        let Some(conn) = self.connections.get_mut(from) else { return };
        let held = std::mem::take(&mut conn.pending_input);
        conn.splicing = true;
        self.splices.by_source.insert(from, Splice { to, pipe, in_pipe: 0 });
        self.splices.source_of.insert(to, from);
        self.write_on(from, to, &held);
        self.serve_soon(from);
    }

    /// Moves `token`'s input on: empties the pipe into the other connection, then
    /// reads more into it, within the wake-up's budget.
    pub(crate) fn move_input(&mut self, token: Token) -> Next {
        let moved = self.move_through_pipe(token);
        match moved {
            Moved::Next(next) => next,
            Moved::Blocked(to) => {
                // Once in the list, however often it tries before `to` drains.
                let newly =
                    self.connections.get_mut(token).is_some_and(|c| !std::mem::replace(&mut c.blocked, true));
                if let Some(other) = self.connections.get_mut(to).filter(|_| newly) {
                    other.blocking = true;
                    self.blocked.push((to, token));
                }
                Next::Wait
            }
            Moved::Failed(to, kind) => {
                self.close(to, Closed::WriteFailed(kind));
                Next::Wait
            }
        }
    }

    fn move_through_pipe(&mut self, token: Token) -> Moved {
        let Some(splice) = self.splices.by_source.get_mut(&token) else { return Moved::Next(Next::Wait) };
        for _ in 0..READS_PER_WAKE {
            if splice.in_pipe > 0 {
                let to = splice.to;
                let Some(other) = self.connections.get_mut(to).filter(|c| c.is_open()) else {
                    return Moved::Next(Next::Wait);
                };
                if other.connecting || other.unsent() > 0 {
                    // What was written to it before goes first.
                    return Moved::Blocked(to);
                }
                match splice.pipe.drain_to(other.fd.as_fd(), splice.in_pipe) {
                    Ok(n) => {
                        splice.in_pipe -= n;
                        other.output_progressed = true;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Moved::Failed(to, e.kind()),
                }
                if splice.in_pipe > 0 {
                    return Moved::Blocked(to);
                }
            }
            let Some(conn) = self.connections.get_mut(token).filter(|conn| !conn.input_ended) else {
                // Its end of stream was read and told: nothing more comes.
                return Moved::Next(Next::Wait);
            };
            match splice.pipe.fill_from(conn.fd.as_fd(), PIPE_CHUNK) {
                Ok(0) => return Moved::Next(self.core.end_input(conn, token)),
                Ok(n) => splice.in_pipe = n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Moved::Next(Next::Wait),
                Err(e) => return Moved::Next(Next::Close(Closed::ReadFailed(e.kind()))),
            }
        }
        Moved::Next(Next::Again)
    }

    /// Forgets the splices of a connection that closed: its own (its pipe closes),
    /// and the one feeding it, whose source reaches its protocol again.
    pub(crate) fn end_splices(&mut self, token: Token) {
        if let Some(splice) = self.splices.by_source.remove(&token) {
            self.splices.source_of.remove(&splice.to);
        }
        if let Some(source) = self.splices.source_of.remove(&token) {
            self.splices.by_source.remove(&source);
            if let Some(conn) = self.connections.get_mut(source) {
                conn.splicing = false;
            }
        }
    }
}
