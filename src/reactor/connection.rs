//! One connection: its socket, the bytes it owns between wake-ups, its phase, and
//! which of the loop's timeouts it is under.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use super::config::Config;
use super::config::{DrainPolicy, IdleTimeout};
use super::output::{self, Output, SendQueue};
use crate::sys;

/// Seconds a closing connection may keep sending us bytes we drop (nginx: 5 s).
const LINGER_SECS: u32 = 5;

/// Where a connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Reading input and answering it.
    Open,
    /// The protocol said close (or the peer finished): send what is left, then close,
    /// lingering first if the peer may still be sending.
    Closing { linger: bool },
    /// Everything is sent and the write side shut down; input the peer still sends is
    /// read and dropped until it closes or the deadline passes, so that unread bytes
    /// do not make the kernel reset the connection before the peer read our answer.
    Lingering,
}

/// Which of the loop's timeouts a connection is under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Timeout {
    /// None: the protocol's own timer decides.
    None,
    Connect,
    Idle,
    Message,
    Send,
    Linger,
}

#[derive(Debug)]
pub(crate) struct Connection<S> {
    pub(crate) fd: OwnedFd,
    /// Received bytes the protocol has not consumed yet (an incomplete message).
    pub(crate) pending_input: Vec<u8>,
    /// Output the socket has not taken yet; `None` (no memory) when all is sent.
    queue: Option<Box<SendQueue>>,
    pub(crate) state: S,
    pub(crate) phase: Phase,
    /// The peer shut down its side: read until end of stream, a short read is no proof
    /// of having drained the socket.
    pub(crate) read_closed: bool,
    /// Reading stopped because too much output is waiting; resumed when it drains.
    pub(crate) read_paused: bool,
    /// The protocol paused ([`Then::Pause`](super::Then::Pause)): it is called again
    /// with its pending input once its output is sent.
    pub(crate) paused: bool,
    /// Paused with nothing written: waits for output a timer or wake writes.
    pub(crate) awaiting_output: bool,
    /// Opened by `connect` and not yet known to be connected: output is queued, not
    /// sent, until the socket's first event.
    pub(crate) connecting: bool,
    /// Reading stopped because output this connection wrote to another is over the
    /// budget there (or what it spliced waits there); the other resumes it when its
    /// output drains.
    pub(crate) blocked: bool,
    /// Its input is spliced on to another connection, not handed to the protocol.
    pub(crate) splicing: bool,
    /// Connections are blocked on this one's output (see `blocked`).
    pub(crate) blocking: bool,
    /// The peer's end of stream was read and the protocol kept the connection open:
    /// nothing more is read.
    pub(crate) input_ended: bool,
    /// The writing side is shut down once the output is sent ([`Io::shutdown`](super::Io::shutdown)).
    pub(crate) shut_requested: bool,
    /// The writing side is shut down: output is dropped.
    pub(crate) write_shut: bool,
    pub(crate) idle: IdleTimeout,
    pub(crate) drain: DrainPolicy,
    /// In the loop's queue of connections to serve again.
    pub(crate) queued: bool,
    /// Second (of the loop's clock) after which the connection is closed; 0: none.
    pub(crate) deadline: u32,
    timeout: Timeout,
    /// The peer took some of our output since the last `rearm`.
    pub(crate) output_progressed: bool,
    /// Bytes the protocol consumed since the last `rearm`.
    /// (32 bits, saturating: a turn consumes at most a few reads, and a connection
    /// fits in the 72 bytes an idle one's slot is measured at.)
    pub(crate) input_consumed: u32,
    /// Bytes of a body received and not yet turned into more time (see `rearm`).
    body_credit: u32,
}

impl<S: Default> Connection<S> {
    pub(crate) fn new(fd: OwnedFd) -> Connection<S> {
        Connection {
            fd,
            pending_input: Vec::new(),
            queue: None,
            state: S::default(),
            phase: Phase::Open,
            read_closed: false,
            read_paused: false,
            paused: false,
            awaiting_output: false,
            connecting: false,
            blocked: false,
            splicing: false,
            blocking: false,
            input_ended: false,
            shut_requested: false,
            write_shut: false,
            idle: IdleTimeout::FromConfig,
            drain: DrainPolicy::CloseWhenIdle,
            queued: false,
            deadline: 0,
            timeout: Timeout::Idle,
            output_progressed: false,
            input_consumed: 0,
            body_credit: 0,
        }
    }
}

impl<S> Connection<S> {
    pub(crate) fn is_open(&self) -> bool {
        self.phase == Phase::Open
    }

    /// Open, with no partial message in its buffer, nothing to send and its reading
    /// not held back by another connection's output (the protocol may still be busy:
    /// see `Reactor::may_close_idle`).
    pub(crate) fn has_nothing_pending(&self) -> bool {
        self.phase == Phase::Open && self.pending_input.is_empty() && self.unsent() == 0 && !self.blocked
    }

    /// Bytes queued and not yet taken by the socket.
    pub(crate) fn unsent(&self) -> usize {
        self.queue.as_ref().map_or(0, |queue| queue.len())
    }

    /// Sends `output` after anything already queued, and queues what the socket
    /// does not take.
    pub(crate) fn send(&mut self, output: &Output) -> io::Result<()> {
        if output.is_empty() || self.write_shut {
            return Ok(());
        }
        if self.queue.is_some() || self.connecting {
            self.queue.get_or_insert_with(Box::default).push(output, 0);
            return self.flush();
        }
        let sent = output.send(self.fd.as_fd())?;
        if sent < output.len() {
            self.queue.get_or_insert_with(Box::default).push(output, sent);
        }
        Ok(())
    }

    /// Sends `bytes` after anything already queued, as [`send`](Connection::send).
    pub(crate) fn send_bytes(&mut self, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() || self.write_shut {
            return Ok(());
        }
        if self.queue.is_some() || self.connecting {
            self.queue.get_or_insert_with(Box::default).push_bytes(bytes);
            return self.flush();
        }
        let sent = output::send_bytes(self.fd.as_fd(), bytes)?;
        if sent < bytes.len() {
            self.queue.get_or_insert_with(Box::default).push_bytes(&bytes[sent..]);
        }
        Ok(())
    }

    /// Sends queued output until it is gone or the socket is full, then shuts the
    /// writing side down if that was asked for. The queue's memory is released once
    /// empty: an idle connection owns no buffer.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        if self.connecting {
            return Ok(());
        }
        if let Some(queue) = self.queue.as_mut() {
            if queue.flush(self.fd.as_fd())? > 0 {
                self.output_progressed = true;
            }
            if queue.len() > 0 {
                return Ok(());
            }
            self.queue = None;
        }
        if self.shut_requested && !self.write_shut {
            self.write_shut = true;
            sys::shutdown_write(self.fd.as_fd())?;
        }
        Ok(())
    }

    /// Both ways are done: the input ended and the writing side is shut down.
    pub(crate) fn is_finished(&self) -> bool {
        self.input_ended && self.write_shut
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

    /// Sets the deadline for the state the connection is now in: `busy` is the
    /// protocol's word (see `Protocol::is_busy`), `timer_set` whether the protocol
    /// has a timer of its own.
    ///
    /// A request's deadline runs from its first byte; bytes that trickle in without
    /// completing anything do not extend it. Once the protocol consumes some (a head
    /// completed), the next request's deadline starts afresh; but a body (the
    /// protocol busy with its input all consumed) earns time only as it arrives: one
    /// second per `min_input_rate` bytes, never more than the message timeout ahead,
    /// so that a body trickling a byte at a time runs out. The send deadline runs
    /// from the peer's latest progress, the idle deadline from the latest activity.
    pub(crate) fn rearm(&mut self, now: u32, config: &Config, busy: bool, timer_set: bool) {
        // The order is the one `Protocol`'s docs give.
        let (timeout, seconds) = match self.phase {
            Phase::Lingering => (Timeout::Linger, LINGER_SECS),
            _ if self.connecting => (Timeout::Connect, config.connect_timeout),
            // Blocking: another connection's bytes wait for it (in a splice's pipe).
            _ if self.unsent() > 0 || self.blocking => (Timeout::Send, config.send_timeout),
            _ if !self.pending_input.is_empty() => (Timeout::Message, config.message_timeout),
            _ if timer_set => (Timeout::None, 0),
            _ if busy => (Timeout::Message, config.message_timeout),
            _ if self.idle == IdleTimeout::Never => (Timeout::None, 0),
            _ => (Timeout::Idle, config.idle_timeout),
        };
        let consumed = std::mem::take(&mut self.input_consumed);
        let same = self.timeout == timeout;
        let keep = match timeout {
            Timeout::Message if same && consumed > 0 && busy && self.pending_input.is_empty() => {
                return self.earn_body_time(now, config, consumed, seconds);
            }
            Timeout::Message => same && consumed == 0,
            Timeout::Linger | Timeout::Connect => same,
            Timeout::Send => same && !std::mem::take(&mut self.output_progressed),
            Timeout::Idle | Timeout::None => false,
        };
        if keep {
            return;
        }
        if !same {
            // Progress made under the previous timeout does not extend this one.
            self.output_progressed = false;
            self.body_credit = 0;
        }
        self.timeout = timeout;
        // +1: the clock counts whole seconds, so a deadline `seconds` ahead could
        // otherwise come up to a second early.
        self.deadline = if seconds == 0 { 0 } else { now.saturating_add(seconds).saturating_add(1) };
    }

    /// A body's `consumed` bytes arrived: its deadline moves on by a second per
    /// `min_input_rate` bytes, up to `seconds` ahead of now.
    fn earn_body_time(&mut self, now: u32, config: &Config, consumed: u32, seconds: u32) {
        if seconds == 0 {
            return;
        }
        let ceiling = now.saturating_add(seconds).saturating_add(1);
        let Some(rate) = Some(config.min_input_rate).filter(|&rate| rate > 0) else {
            // No minimum rate: any progress restarts the timeout.
            self.deadline = ceiling;
            return;
        };
        self.body_credit = self.body_credit.saturating_add(consumed);
        let earned = self.body_credit / rate;
        self.body_credit %= rate;
        self.deadline = self.deadline.saturating_add(earned).min(ceiling);
    }
}

#[cfg(test)]
mod tests {
    use super::super::output::tests::small_send_buffer_pair;
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    const CONFIG: Config = Config {
        max_connections: 16,
        message_timeout: 10,
        min_input_rate: 100,
        idle_timeout: 60,
        send_timeout: 30,
        connect_timeout: 5,
        max_pending_input: 1024,
    };

    /// A connection on a socket whose peer is returned; its send buffer is small, so
    /// that a few kilobytes fill it.
    fn connection() -> (Connection<()>, UnixStream) {
        let (ours, peer) = small_send_buffer_pair();
        (Connection::new(OwnedFd::from(ours)), peer)
    }

    fn output(bytes: &[u8]) -> Output {
        let mut output = Output::new();
        output.write(bytes);
        output
    }

    /// A connection with output the socket did not take.
    fn with_unsent() -> (Connection<()>, UnixStream) {
        let (mut conn, peer) = connection();
        conn.send(&output(&[b'x'; 100_000])).expect("a send");
        assert!(conn.unsent() > 0, "the socket took everything; the test needs it full");
        (conn, peer)
    }

    #[test]
    fn an_idle_connection_fits_in_72_bytes() {
        // The slab slot of an idle connection is most of its cost (under 128 B each).
        assert!(std::mem::size_of::<Connection<()>>() <= 72, "{}", std::mem::size_of::<Connection<()>>());
    }

    #[test]
    fn an_open_connection_with_nothing_pending_is_idle_and_held_to_the_idle_timeout() {
        let (mut conn, _peer) = connection();
        assert!(conn.has_nothing_pending());
        conn.rearm(100, &CONFIG, false, false);
        assert_eq!(conn.deadline, 161, "60 s, and a second for the clock's whole seconds");
        conn.rearm(150, &CONFIG, false, false);
        assert_eq!(conn.deadline, 211, "activity restarts the idle timeout");
    }

    #[test]
    fn a_protocol_timer_takes_the_place_of_the_loops_timeouts() {
        let (mut conn, _peer) = connection();
        conn.rearm(100, &CONFIG, true, true);
        assert_eq!(conn.deadline, 0, "busy, but its own timer decides");
    }

    #[test]
    fn a_partial_request_is_held_to_the_message_timeout_from_its_first_byte() {
        let (mut conn, _peer) = connection();
        conn.pending_input = b"GE".to_vec();
        assert!(!conn.has_nothing_pending());
        conn.rearm(100, &CONFIG, false, false);
        assert_eq!(conn.deadline, 111);
        conn.pending_input.push(b'T');
        conn.rearm(105, &CONFIG, false, false);
        assert_eq!(conn.deadline, 111, "bytes that complete nothing do not extend it");
        // A request completed and the next one begun: its deadline starts afresh.
        conn.input_consumed = 30;
        conn.rearm(106, &CONFIG, false, false);
        assert_eq!(conn.deadline, 117);
    }

    #[test]
    fn a_body_earns_a_second_per_min_input_rate_bytes_up_to_the_message_timeout() {
        let (mut conn, _peer) = connection();
        conn.rearm(100, &CONFIG, true, false);
        assert_eq!(conn.deadline, 111, "a busy protocol is held to the message timeout");
        conn.rearm(102, &CONFIG, true, false);
        assert_eq!(conn.deadline, 111, "nothing arrived: no time earned");
        conn.input_consumed = 250;
        conn.rearm(105, &CONFIG, true, false);
        assert_eq!(conn.deadline, 113, "250 bytes at 100 B/s: two seconds, 50 bytes of credit");
        conn.input_consumed = 50;
        conn.rearm(105, &CONFIG, true, false);
        assert_eq!(conn.deadline, 114, "the credit and 50 more: a third second");
        conn.input_consumed = 10_000;
        conn.rearm(106, &CONFIG, true, false);
        assert_eq!(conn.deadline, 117, "never more than the message timeout ahead");
        let no_minimum = Config { min_input_rate: 0, ..CONFIG };
        conn.input_consumed = 1;
        conn.rearm(110, &no_minimum, true, false);
        assert_eq!(conn.deadline, 121, "with no minimum rate any progress restarts it");
        conn.rearm(115, &no_minimum, true, false);
        assert_eq!(conn.deadline, 121, "and no progress restarts nothing");
        let no_timeout = Config { message_timeout: 0, ..CONFIG };
        conn.input_consumed = 1;
        conn.rearm(111, &no_timeout, true, false);
        assert_eq!(conn.deadline, 121, "with no message timeout nothing is earned");
    }

    #[test]
    fn credit_earned_under_one_timeout_does_not_carry_into_the_next() {
        let (mut conn, _peer) = connection();
        conn.rearm(100, &CONFIG, true, false);
        conn.input_consumed = 50;
        conn.rearm(101, &CONFIG, true, false);
        assert_eq!(conn.deadline, 111, "50 bytes: no second yet");
        conn.rearm(102, &CONFIG, false, false);
        assert_eq!(conn.deadline, 163, "the body ended: idle");
        conn.rearm(103, &CONFIG, true, false);
        assert_eq!(conn.deadline, 114, "a new body: a new deadline");
        conn.input_consumed = 50;
        conn.rearm(104, &CONFIG, true, false);
        assert_eq!(conn.deadline, 114, "the first body's 50 bytes are not the second's");
    }

    #[test]
    fn unsent_output_is_held_to_the_send_timeout_which_only_the_peers_progress_extends() {
        let (mut conn, mut peer) = with_unsent();
        assert!(!conn.has_nothing_pending(), "output waits");
        conn.rearm(100, &CONFIG, false, false);
        assert_eq!(conn.deadline, 131);
        conn.flush().expect("a flush");
        conn.rearm(110, &CONFIG, false, false);
        assert_eq!(conn.deadline, 131, "the socket is still full: no progress");
        let read = peer.read(&mut vec![0; 16_384]).expect("the peer reads some");
        assert!(read > 0, "the peer read nothing");
        conn.flush().expect("a flush");
        conn.rearm(120, &CONFIG, false, false);
        assert_eq!(conn.deadline, 151, "the peer took some: the send timeout starts again");
    }

    #[test]
    fn a_connection_being_opened_is_held_to_the_connect_timeout_before_any_other() {
        let (mut conn, _peer) = connection();
        conn.connecting = true;
        conn.send(&output(b"queued while connecting")).expect("a send");
        conn.rearm(100, &CONFIG, true, true);
        assert_eq!(conn.deadline, 106, "5 s to connect, whatever waits behind it");
        conn.rearm(103, &CONFIG, true, true);
        assert_eq!(conn.deadline, 106, "not extended while it stays unconnected");
    }

    #[test]
    fn a_connection_that_opted_out_of_the_idle_timeout_has_no_deadline_when_idle() {
        let (mut conn, _peer) = connection();
        conn.idle = IdleTimeout::Never;
        conn.rearm(100, &CONFIG, false, false);
        assert_eq!(conn.deadline, 0);
        conn.pending_input = b"GE".to_vec();
        conn.rearm(100, &CONFIG, false, false);
        assert_eq!(conn.deadline, 111, "the message timeout still applies");
    }

    #[test]
    fn a_lingering_connection_is_held_to_the_linger_deadline() {
        let (mut conn, _peer) = connection();
        conn.phase = Phase::Lingering;
        assert!(!conn.has_nothing_pending());
        conn.rearm(100, &CONFIG, false, false);
        assert_eq!(conn.deadline, 106);
        conn.rearm(103, &CONFIG, false, false);
        assert_eq!(conn.deadline, 106, "not extended by what the peer still sends");
    }

    #[test]
    fn output_queued_behind_unsent_output_arrives_after_it_and_a_sent_one_holds_no_queue() {
        let (mut conn, mut peer) = with_unsent();
        let first = conn.unsent();
        conn.send(&output(b"second")).expect("a send");
        assert_eq!(conn.unsent(), first + 6, "queued behind the first");
        let reading = std::thread::spawn(move || {
            let mut all = Vec::new();
            peer.read_to_end(&mut all).map(|_| all)
        });
        while conn.unsent() > 0 {
            conn.flush().expect("a flush");
            std::thread::yield_now();
        }
        assert!(conn.queue.is_none(), "an emptied queue's memory is released");
        drop(conn);
        let received = reading.join().expect("the reader").expect("reading");
        assert_eq!(received.len(), 100_006);
        assert!(received.ends_with(b"xsecond"), "in order");

        let (mut conn, _peer) = connection();
        conn.send(&output(b"small")).expect("a send");
        assert!(conn.queue.is_none(), "all sent at once: no queue");
    }

    #[test]
    fn a_connecting_socket_queues_its_output_until_connected() {
        let (mut conn, mut peer) = connection();
        conn.connecting = true;
        conn.send(&output(b"hello")).expect("a send");
        conn.flush().expect("a flush");
        assert_eq!(conn.unsent(), 5, "nothing sent while connecting");
        conn.connecting = false;
        conn.flush().expect("a flush");
        assert_eq!(conn.unsent(), 0);
        let mut buf = [0; 5];
        peer.read_exact(&mut buf).expect("the peer reads");
        assert_eq!(&buf, b"hello");
    }
}
