//! One load thread's protocol: sends requests on the connections the loop opens,
//! parses the responses, and measures each one's latency. Its schedule (a fixed
//! rate) and its request timeouts are the connection's timer.

use std::io;
use std::time::{Duration, Instant};

use super::report::Report;
use super::target::Request;
use percore::http::{Framed, Method, ResponseReader, Stream};
use percore::reactor::{Closed, ConnId, Flow, Io, Protocol, Verdict};

/// What one thread sends and how.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The request, prebuilt.
    pub request: Request,
    /// The method is HEAD: responses have no body.
    pub head: bool,
    /// Requests in flight per connection (keep-alive mode).
    pub pipeline: usize,
    /// One request per connection, then close.
    pub close: bool,
    /// For a fixed rate: when each connection sends.
    pub rate: Option<Schedule>,
    /// How long a request may wait for its response.
    pub timeout: Duration,
}

/// A fixed rate's schedule for one thread.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    /// Between two requests of one connection.
    pub interval: Duration,
    /// Between the first requests of two connections, so their sends interleave.
    pub stagger: Duration,
}

/// Per-connection state: its requests in flight and when they were due, for their
/// latency.
#[derive(Debug, Default)]
pub struct LoadConn {
    /// Requests sent and not answered. They share one send time: a pipeline is
    /// refilled only once empty, and a fixed rate or `--close` has one in flight.
    in_flight: u32,
    /// When the requests in flight were sent, or due (fixed rate).
    sent_at: Option<Instant>,
    /// Fixed rate: when the next request is due.
    next_due: Option<Instant>,
    answered: u64,
    /// The timer fired with requests in flight: they count as timeouts.
    timed_out: bool,
    /// Frames the responses as they arrive: a body is dropped as it comes.
    responses: ResponseReader,
}

#[derive(Debug)]
pub struct Load {
    plan: Plan,
    /// Requests this thread may still send.
    budget: u64,
    pub report: Report,
    /// Requests sent and not answered (nor lost with their connection).
    in_flight: u64,
    /// Connections closed since the driver last replaced them.
    pub closed: usize,
    /// Fixed rate: when the connection opened next is to send its first request.
    next_start: Instant,
    /// Connections that got their answers in this turn of the loop and send again
    /// once every ready connection was read, so that requests leave in a burst,
    /// as wrk's do (sending each at once spreads them out and makes the server wake
    /// for every one).
    pub ready: Vec<ConnId>,
}

impl Load {
    pub fn new(plan: Plan, budget: u64) -> Load {
        Load {
            plan,
            budget,
            report: Report::new(),
            in_flight: 0,
            closed: 0,
            next_start: Instant::now(),
            ready: Vec::new(),
        }
    }

    /// Whether every request this thread may send was sent and answered (or lost).
    pub fn finished(&self) -> bool {
        self.budget == 0 && self.in_flight == 0
    }

    pub fn may_send(&self) -> bool {
        self.budget > 0
    }

    /// Sends one request, due at `due`, and sets the connection's timer for its
    /// response.
    fn send(&mut self, conn: &mut LoadConn, due: Instant, io: &mut Io<'_>) {
        self.plan.request.write_to(io);
        conn.in_flight += 1;
        conn.sent_at = Some(due);
        self.budget -= 1;
        self.in_flight += 1;
        io.set_timer(self.plan.timeout);
    }

    /// Sends what the mode allows: up to the pipeline depth, or (fixed rate) the one
    /// request whose time has come, late or not; else sets the timer for it.
    fn send_more(&mut self, conn: &mut LoadConn, io: &mut Io<'_>) {
        let now = io.now();
        let Some(Schedule { interval, .. }) = self.plan.rate else {
            // A pipeline is refilled whole once it is empty, in one write, as wrk does.
            if conn.in_flight > 0 || (self.plan.close && conn.answered > 0) {
                return;
            }
            let depth = if self.plan.close { 1 } else { self.plan.pipeline };
            for _ in 0..depth {
                if self.may_send() {
                    self.send(conn, now, io);
                }
            }
            return;
        };
        let Some(due) = conn.next_due else { return };
        if conn.in_flight > 0 || !self.may_send() {
            return;
        }
        if due <= now {
            // Latency counts from when it was due: a stalled server shows in the tail.
            self.send(conn, due, io);
            conn.next_due = Some(due + interval);
        } else {
            io.set_timer_at(due);
        }
    }

    /// Counts the requests a connection took with it, by how it ended.
    fn count_lost(&mut self, conn: &LoadConn, closed: Closed) {
        let lost = u64::from(conn.in_flight);
        self.in_flight -= lost;
        if lost == 0 {
            return;
        }
        let errors = &mut self.report.errors;
        let refused = |kind: io::ErrorKind| kind == io::ErrorKind::ConnectionRefused && conn.answered == 0;
        match closed {
            _ if conn.timed_out => errors.timeout += lost,
            Closed::ReadFailed(kind) | Closed::WriteFailed(kind) if refused(kind) => errors.connect += 1,
            Closed::ReadFailed(_) | Closed::ByPeer => errors.read += lost,
            Closed::WriteFailed(_) => errors.write += lost,
            Closed::TimedOut => errors.timeout += lost,
            // We closed after a `Connection: close` answer: the rest was never served.
            Closed::Done => {}
        }
    }

    fn record(&mut self, conn: &mut LoadConn, status: u16, len: u64, now: Instant) {
        let due = conn.sent_at.unwrap_or(now);
        conn.in_flight -= 1;
        self.in_flight -= 1;
        conn.answered += 1;
        self.report.requests += 1;
        self.report.bytes_read += len;
        if !(200..300).contains(&status) {
            self.report.non_2xx += 1;
        }
        self.report.record_latency(now.saturating_duration_since(due).as_micros() as u64);
    }
}

impl Protocol for Load {
    type Conn = LoadConn;

    fn on_open(&mut self, conn: &mut LoadConn, io: &mut Io<'_>) -> Flow {
        conn.responses = ResponseReader::new(if self.plan.head { Method::Head } else { Method::Get });
        if let Some(schedule) = self.plan.rate {
            conn.next_due = Some(self.next_start);
            self.next_start += schedule.stagger;
        }
        self.send_more(conn, io);
        Flow::Continue
    }

    fn on_data(&mut self, conn: &mut LoadConn, input: &[u8], io: &mut Io<'_>) -> Verdict {
        // The loop's time: when the wait that found the response returned.
        let now = io.now();
        let answered = conn.answered;
        let mut at = 0;
        while at < input.len() {
            match conn.responses.read(&input[at..], Stream::Open) {
                Ok(Framed { consumed, completed: None }) => {
                    at += consumed;
                    break;
                }
                // An interim response (100 Continue): the real one follows.
                Ok(Framed { consumed, completed: Some(response) }) if response.is_interim() => at += consumed,
                Ok(Framed { consumed, completed: Some(response) }) if conn.in_flight > 0 => {
                    at += consumed;
                    self.record(conn, response.status, response.len, now);
                    if !response.keep_alive || self.plan.close {
                        return Verdict::close(at);
                    }
                }
                // A response to no request, or one that cannot be framed.
                Ok(Framed { completed: Some(_), .. }) | Err(_) => {
                    self.report.errors.parse += 1;
                    return Verdict::close(input.len());
                }
            }
        }
        if conn.in_flight == 0 {
            io.cancel_timer();
        }
        if self.plan.rate.is_some() {
            self.send_more(conn, io);
        } else if conn.answered > answered && conn.in_flight == 0 && self.may_send() {
            // Woken to send once every ready connection is read: a whole pipeline
            // is answered and requests are left to send.
            self.ready.push(io.id());
        }
        Verdict::keep(at)
    }

    /// A request's time is up, or (fixed rate) the next one is due.
    fn on_timer(&mut self, conn: &mut LoadConn, io: &mut Io<'_>) -> Flow {
        if conn.in_flight > 0 {
            conn.timed_out = true;
            return Flow::Close;
        }
        self.send_more(conn, io);
        Flow::Continue
    }

    fn on_wake(&mut self, conn: &mut LoadConn, io: &mut Io<'_>) -> Flow {
        self.send_more(conn, io);
        Flow::Continue
    }

    fn on_close(&mut self, conn: &mut LoadConn, closed: Closed, unconsumed: &[u8]) {
        if closed == Closed::ByPeer && conn.in_flight > 0 {
            // A response whose body ends with the connection (consumed as it came).
            if let Ok(Framed { completed: Some(response), .. }) =
                conn.responses.read(unconsumed, Stream::Ended)
            {
                self.record(conn, response.status, response.len, Instant::now());
            }
        }
        self.count_lost(conn, closed);
        self.closed += 1;
    }

    fn is_busy(conn: &LoadConn) -> bool {
        conn.in_flight > 0
    }
}
