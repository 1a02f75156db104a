//! One accepted connection: its socket, the bytes it owns between wake-ups, its phase.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::config::Timer;
use crate::sys;

/// Where a connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Reading requests and answering them.
    Open,
    /// The protocol said close (or the peer finished): send what is left, then close,
    /// lingering first if the peer had sent more than the protocol consumed.
    Closing { linger: bool },
    /// Everything is sent and the write side shut down; input the peer still sends is
    /// read and dropped until it closes or the deadline passes, so that unread bytes
    /// do not make the kernel reset the connection before the peer read our answer.
    Lingering,
}

#[derive(Debug)]
pub(crate) struct Connection<S> {
    pub(crate) fd: OwnedFd,
    /// Received bytes the protocol has not consumed yet (an incomplete request).
    pub(crate) pending_input: Vec<u8>,
    /// Output the socket did not take yet; `output_sent` of it already went.
    pub(crate) pending_output: Vec<u8>,
    pub(crate) output_sent: usize,
    pub(crate) state: S,
    pub(crate) phase: Phase,
    /// The peer shut down its side: read until end of stream, a short read is no proof
    /// of having drained the socket.
    pub(crate) read_closed: bool,
    /// Reading stopped because too much output is waiting; resumed when it drains.
    pub(crate) read_paused: bool,
    /// Second (of the loop's clock) after which the connection is closed; 0: none.
    pub(crate) deadline: u32,
    /// The timeout `deadline` is for.
    pub(crate) timer: Timer,
    /// The peer took some of our output since the last `rearm`.
    pub(crate) output_progressed: bool,
    /// The protocol consumed some input since the last `rearm`.
    pub(crate) input_progressed: bool,
    /// In the loop's queue of connections to serve again.
    pub(crate) queued: bool,
    /// The protocol left input unconsumed after answering part of it (it limits the
    /// output of one call): call it again before reading more.
    pub(crate) answer_more: bool,
}

impl<S: Default> Connection<S> {
    pub(crate) fn new(fd: OwnedFd) -> Connection<S> {
        Connection {
            fd,
            pending_input: Vec::new(),
            pending_output: Vec::new(),
            output_sent: 0,
            state: S::default(),
            phase: Phase::Open,
            read_closed: false,
            read_paused: false,
            deadline: 0,
            timer: Timer::Idle,
            output_progressed: false,
            input_progressed: false,
            queued: false,
            answer_more: false,
        }
    }
}

impl<S> Connection<S> {
    /// Open, with no partial request in its buffer and nothing to send (the protocol
    /// may still be mid-request: see `Reactor::is_idle`).
    pub(crate) fn is_idle(&self) -> bool {
        self.phase == Phase::Open && self.pending_input.is_empty() && self.unsent() == 0
    }

    /// Bytes queued and not yet accepted by the socket.
    pub(crate) fn unsent(&self) -> usize {
        self.pending_output.len() - self.output_sent
    }

    /// Sends `output` after anything already queued; keeps what the socket refuses.
    pub(crate) fn send(&mut self, output: &[u8]) -> io::Result<()> {
        if output.is_empty() {
            return Ok(());
        }
        if self.unsent() > 0 {
            self.pending_output.extend_from_slice(output);
            return Ok(());
        }
        let sent = match sys::send(self.fd.as_raw_fd(), output) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(e),
        };
        if sent < output.len() {
            self.pending_output.extend_from_slice(&output[sent..]);
        }
        Ok(())
    }

    /// Sends queued output until it is gone or the socket is full. The queue's memory
    /// is released once empty: an idle connection owns no buffer.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        while self.unsent() > 0 {
            match sys::send(self.fd.as_raw_fd(), &self.pending_output[self.output_sent..]) {
                Ok(n) => {
                    self.output_sent += n;
                    self.output_progressed = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        self.pending_output = Vec::new();
        self.output_sent = 0;
        Ok(())
    }

    /// After the protocol consumed `consumed` bytes of its input, keeps the rest:
    /// the input was `pending_input` when `from_pending`, else `fresh` alone.
    pub(crate) fn keep_input(&mut self, from_pending: bool, fresh: &[u8], consumed: usize) {
        if !from_pending {
            self.pending_input.extend_from_slice(&fresh[consumed..]);
        } else if consumed == self.pending_input.len() {
            self.pending_input = Vec::new();
        } else {
            self.pending_input.drain(..consumed);
        }
    }
}
