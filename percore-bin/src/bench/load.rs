//! One load thread's protocol: sends requests on the connections the loop opens,
//! frames the responses, and measures each one's latency; over TLS, counts and
//! times each connection's handshake too. Its schedule (a fixed rate) and its
//! request timeouts are the connection's timer.
//!
//! A request's timeout costs nothing while responses come in time: the timer is
//! moved only when it would fire too late, so one set for an earlier request fires
//! first, finds the requests now in flight not yet due, and is moved on to their
//! deadline (about once per timeout per connection, where a timer set and cancelled
//! per request was a tenth of the client's own CPU).
//!
//! Every request sent is counted once: answered (by status code, its latency in the
//! histogram), or as one error of the kind that lost it. Whatever the server sends,
//! a connection holds at most an unfinished head (64 KiB, the response parse's
//! bound): a body is dropped as it comes, and a response past `max_response` bytes
//! (a `Content-Length` that never ends, endless chunks, 1xx after 1xx) is cut off.

use std::collections::HashMap;
use std::io;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use percore::http::{Method, ResponseEvent, ResponseReader, Stream};
use percore::reactor::{Closed, ConnId, Flow, Io, Protocol, Verdict};

use super::report::{new_histogram, Handshake, Handshakes, RunCounts};
use super::target::Request;
use super::tls;

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
    /// The most bytes one response may take, with the 1xx before it.
    pub max_response: u64,
    /// The connections speak TLS: their handshakes are counted and timed, and one
    /// that fails is an error of its own kind.
    pub tls: bool,
}

/// At a fixed rate, sends are gathered into ticks of this length: a request leaves at
/// the start of the tick it is due in, up to this much before its time, as wrk2's
/// millisecond timers send up to that much after it.
const SEND_TICK: Duration = Duration::from_millis(1);

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
    /// When the requests in flight time out (`None`: never, for a timeout past the
    /// clock's range).
    deadline: Option<Instant>,
    /// Fixed rate: when the next request is due.
    next_due: Option<Instant>,
    answered: u64,
    /// Bytes of the response arriving now, with the interim ones before it.
    receiving: u64,
    /// The status and keep-alive of the final response whose body is arriving, from
    /// its head.
    status: u16,
    keep_alive: bool,
    /// Reads the responses as they arrive: a body is dropped as it comes.
    responses: ResponseReader,
}

/// How requests a connection took with it are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lost {
    Connect,
    Read,
    Write,
    Timeout,
    Parse,
    Tls,
}

#[derive(Debug)]
pub struct Load {
    plan: Plan,
    /// Requests this thread may still send.
    budget: u64,
    pub counts: RunCounts,
    /// Latencies of the responses since the driver last took them (once a second).
    pub latency: Histogram<u64>,
    /// Requests sent and not answered (nor lost with their connection).
    in_flight: u64,
    /// Connections closed since the driver last replaced them.
    pub closed: usize,
    /// Fixed rate: when the schedule began (the first connection's opening), which
    /// the send ticks count from, and the connections placed on it so far.
    schedule: Option<(Instant, u32)>,
    /// Connections that got their answers in this turn of the loop and send again
    /// once every ready connection was read, so that requests leave in a burst,
    /// as wrk's do (sending each at once spreads them out and makes the server wake
    /// for every one).
    pub ready: Vec<ConnId>,
    /// Connections established so far, and why the first that failed to be did: a
    /// target that refuses every connection is told from the run's own.
    pub established: u64,
    pub connect_error: Option<io::ErrorKind>,
    /// Connections asked for and not yet open: when each was (for the time a TLS
    /// one's handshake took). Each will send a request: they are not among those
    /// left to open connections for.
    opening: HashMap<ConnId, Instant>,
}

impl Load {
    pub fn new(plan: Plan, budget: u64) -> Load {
        let counts = RunCounts { tls: plan.tls.then(Handshakes::default), ..RunCounts::default() };
        Load {
            plan,
            budget,
            counts,
            latency: new_histogram(),
            in_flight: 0,
            closed: 0,
            schedule: None,
            ready: Vec::new(),
            established: 0,
            connect_error: None,
            opening: HashMap::new(),
        }
    }

    /// Connection `id` was asked for at `at`: a TLS one's handshake is timed from
    /// then.
    pub fn opening(&mut self, id: ConnId, at: Instant) {
        self.opening.insert(id, at);
    }

    /// A connection opened; over TLS, what its handshake agreed on, and how long it
    /// took.
    fn opened(&mut self, io: &Io<'_>) {
        let asked = self.opening.remove(&io.id());
        let (Some(handshakes), Some(negotiated)) = (&mut self.counts.tls, io.tls()) else { return };
        let (version, suite) = tls::agreed(negotiated);
        let took = asked.map_or(Duration::ZERO, |at| io.now().saturating_duration_since(at));
        handshakes.record(&Handshake { version, suite, resumed: negotiated.resumed, took });
    }

    /// How a connection that closed (`closed`) lost the requests it had in flight,
    /// if it lost any; a TLS connection that failed to open tells a handshake that
    /// failed from a connect that did.
    fn lost_by(&mut self, conn: &LoadConn, closed: Closed, id: ConnId) -> Option<Lost> {
        let refused = |kind: io::ErrorKind| kind == io::ErrorKind::ConnectionRefused && conn.answered == 0;
        match closed {
            Closed::ConnectFailed(kind) => {
                let handshakes = self.counts.tls.as_mut().filter(|_| tls::handshake_failed(kind));
                self.opening.remove(&id);
                if let Some(handshakes) = handshakes {
                    handshakes.failed(kind);
                    return Some(Lost::Tls);
                }
                self.connect_error.get_or_insert(kind);
                Some(Lost::Connect)
            }
            Closed::ReadFailed(kind) | Closed::WriteFailed(kind) if refused(kind) => Some(Lost::Connect),
            Closed::ReadFailed(_) | Closed::ByPeer => Some(Lost::Read),
            Closed::WriteFailed(_) => Some(Lost::Write),
            Closed::TimedOut => Some(Lost::Timeout),
            // We closed it, and counted what it had in flight then.
            Closed::Done => None,
        }
    }

    /// Whether every request this thread may send was sent and answered (or lost).
    pub fn finished(&self) -> bool {
        self.budget == 0 && self.in_flight == 0
    }

    pub fn may_send(&self) -> bool {
        self.budget > 0
    }

    /// Requests this thread may still send (`u64::MAX` for a run of a duration),
    /// besides the first of each connection still opening.
    pub fn left_to_send(&self) -> u64 {
        self.budget.saturating_sub(self.opening.len() as u64)
    }

    /// Sends one request, due at `due`, with its deadline; the connection's timer
    /// fires by then.
    fn send(&mut self, conn: &mut LoadConn, due: Instant, io: &mut Io<'_>) {
        self.plan.request.write_to(io);
        conn.in_flight += 1;
        conn.sent_at = Some(due);
        self.budget -= 1;
        self.in_flight += 1;
        conn.deadline = io.now().checked_add(self.plan.timeout);
        if let Some(deadline) = conn.deadline {
            // A timer that fires sooner (an earlier request's) stays: see on_timer.
            if io.timer().is_none_or(|at| at > deadline) {
                io.set_timer_at(deadline);
            }
        }
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
        if due <= now + SEND_TICK {
            // Latency counts from when it was due, or from when it left if that was
            // earlier: a stalled server shows in the tail, an early send is not
            // taken for a fast answer.
            self.send(conn, due.min(now), io);
            conn.next_due = due.checked_add(interval);
        } else {
            // Woken at the start of the tick the request is due in, with every other
            // connection due in it: one wake-up sends them all, where a timer each
            // (every 50 µs at 20,000/s over 100 connections) wakes the loop, and the
            // server, once per request.
            let origin = self.schedule.map_or(due, |(origin, _)| origin);
            let into_tick = due.saturating_duration_since(origin).as_nanos() % SEND_TICK.as_nanos();
            io.set_timer_at(due.checked_sub(Duration::from_nanos(into_tick as u64)).unwrap_or(due));
        }
    }

    /// Counts the requests in flight on `conn` as lost, each one error of `kind`:
    /// when the connection is given up, so that the run need not wait for its close
    /// (which may linger while a hostile server goes on sending).
    fn lose(&mut self, conn: &mut LoadConn, kind: Lost) {
        let lost = u64::from(std::mem::take(&mut conn.in_flight));
        self.in_flight -= lost;
        let errors = &mut self.counts.errors;
        let count = match kind {
            Lost::Connect => &mut errors.connect,
            Lost::Read => &mut errors.read,
            Lost::Write => &mut errors.write,
            Lost::Timeout => &mut errors.timeout,
            Lost::Parse => &mut errors.parse,
            Lost::Tls => &mut errors.tls,
        };
        let lost = match kind {
            // A connection that failed to open had sent nothing: its error takes the
            // place of the request it would have sent first, so that a run against a
            // server that refuses every connection ends. One opened while the last
            // requests were out (to replace one that failed) may have none to take.
            Lost::Connect | Lost::Tls if lost == 0 => {
                let took = u64::from(self.budget > 0);
                self.budget -= took;
                took
            }
            // A response to no request is one error.
            Lost::Parse => lost.max(1),
            _ => lost,
        };
        *count = count.saturating_add(lost);
    }

    fn record(&mut self, conn: &mut LoadConn, status: u16, now: Instant) {
        let due = conn.sent_at.unwrap_or(now);
        conn.in_flight -= 1;
        self.in_flight -= 1;
        conn.answered += 1;
        self.counts.requests += 1;
        self.counts.status.add(status, 1);
        self.latency.saturating_record(now.saturating_duration_since(due).as_micros() as u64);
    }

    /// Frames what arrived (the last bytes of the stream at `Stream::Ended`): records
    /// each final response, skips interim ones, and gives the connection up (`Err`)
    /// when its stream cannot be framed or a response grows past the bound.
    fn frame(
        &mut self,
        conn: &mut LoadConn,
        input: &[u8],
        stream: Stream,
        now: Instant,
    ) -> Result<After, Lost> {
        let mut at = 0;
        // At the end of the stream, a body delimited by the close ends with no byte left.
        while at < input.len() || stream == Stream::Ended {
            let framed = conn.responses.read(&input[at..], stream).map_err(|_| Lost::Parse)?;
            at += framed.consumed;
            self.counts.bytes_read += framed.consumed as u64;
            conn.receiving += framed.consumed as u64;
            // A body whose length is given is refused at its head if it would take the
            // response past the bound, rather than read up to it.
            let announced = conn.responses.body_left().unwrap_or(0);
            if conn.receiving.saturating_add(announced) > self.plan.max_response {
                return Err(Lost::Read);
            }
            match framed.event {
                // What is left waits for more.
                ResponseEvent::Partial => break,
                // A piece of a body: the rest of the input is read on (a piece that
                // consumed nothing is a partial one).
                ResponseEvent::Body { ended: false, .. } => continue,
                // An interim response (100 Continue): the final one follows, within
                // the same deadline and the same size.
                ResponseEvent::Head { head, .. } if head.is_interim() => continue,
                ResponseEvent::Head { head, ended } => {
                    (conn.status, conn.keep_alive) = (head.status(), head.keep_alive());
                    if !ended {
                        continue;
                    }
                }
                ResponseEvent::Body { ended: true, .. } => {}
            }
            // The response ended.
            if conn.in_flight == 0 {
                return Err(Lost::Parse);
            }
            conn.receiving = 0;
            self.record(conn, conn.status, now);
            if !conn.keep_alive || self.plan.close {
                return Ok(After::Close(at));
            }
        }
        Ok(After::Read(at))
    }
}

/// What the connection does once what arrived is framed.
enum After {
    /// Reads on; this many bytes were consumed.
    Read(usize),
    /// Closes after this many bytes: the last response said so.
    Close(usize),
}

impl Protocol for Load {
    type Conn = LoadConn;

    fn on_open(&mut self, conn: &mut LoadConn, io: &mut Io<'_>) -> Flow {
        self.established += 1;
        self.opened(io);
        conn.responses = ResponseReader::new(if self.plan.head { Method::Head } else { Method::Get });
        if let Some(rate) = self.plan.rate {
            // Each connection starts a stagger after the one before, so that their
            // sends interleave.
            let (origin, placed) = self.schedule.get_or_insert((io.now(), 0));
            conn.next_due = origin.checked_add(rate.stagger.saturating_mul(*placed));
            *placed = placed.saturating_add(1);
        }
        self.send_more(conn, io);
        Flow::Continue
    }

    fn on_data(&mut self, conn: &mut LoadConn, input: &[u8], io: &mut Io<'_>) -> Verdict {
        // The loop's time: when the wait that found the response returned.
        let now = io.now();
        let answered = conn.answered;
        let at = match self.frame(conn, input, Stream::Open, now) {
            Ok(After::Read(at)) => at,
            Ok(After::Close(at)) => {
                // Requests pipelined after a `Connection: close` answer were never
                // served: they go out again, on another connection, as wrk's do.
                let unserved = u64::from(std::mem::take(&mut conn.in_flight));
                self.in_flight -= unserved;
                self.budget = self.budget.saturating_add(unserved);
                return Verdict::close(at);
            }
            Err(kind) => {
                self.lose(conn, kind);
                return Verdict::close(input.len());
            }
        };
        if self.plan.rate.is_some() {
            self.send_more(conn, io);
        } else if conn.answered > answered && conn.in_flight == 0 && self.may_send() {
            // Woken to send once every ready connection is read: a whole pipeline
            // is answered and requests are left to send.
            self.ready.push(io.id());
        }
        Verdict::keep(at)
    }

    /// A request's time is up, or (fixed rate) the next one is due; or the timer
    /// of a request already answered fired, and moves on to the deadline of those
    /// in flight, or sends.
    fn on_timer(&mut self, conn: &mut LoadConn, io: &mut Io<'_>) -> Flow {
        if conn.in_flight > 0 {
            match conn.deadline {
                Some(deadline) if deadline > io.now() => io.set_timer_at(deadline),
                Some(_) => {
                    self.lose(conn, Lost::Timeout);
                    return Flow::Close;
                }
                None => {}
            }
            return Flow::Continue;
        }
        self.send_more(conn, io);
        Flow::Continue
    }

    fn on_wake(&mut self, conn: &mut LoadConn, io: &mut Io<'_>) -> Flow {
        self.send_more(conn, io);
        Flow::Continue
    }

    fn on_close(&mut self, conn: &mut LoadConn, closed: Closed, unconsumed: &[u8], io: &mut Io<'_>) {
        if closed == Closed::ByPeer && conn.in_flight > 0 {
            // A response whose body ends with the connection (consumed as it came);
            // what the close loses is counted below.
            let _ = self.frame(conn, unconsumed, Stream::Ended, Instant::now());
        }
        // Each request in flight is lost (a failed connect or handshake is one
        // error even with none); with none in flight, a close loses nothing.
        if let Some(kind) = self.lost_by(conn, closed, io.id()) {
            self.lose(conn, kind);
        }
        self.closed += 1;
    }

    fn is_busy(conn: &LoadConn) -> bool {
        conn.in_flight > 0
    }
}

#[cfg(test)]
mod tests {
    use percore::reactor::{Closed, Flow, Harness};

    use super::super::target::{RequestSpec, Target};
    use super::*;

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

    /// One connection's plan: GET, at a fixed rate (a request every 5.5 ms) or not,
    /// a 10 s timeout, responses up to `max_response` bytes.
    fn plan(rate: bool, max_response: u64) -> Plan {
        let target = Target::parse("http://h/").expect("a URL");
        let spec = RequestSpec { method: "GET", headers: &[], body: None, content_type: None, close: false };
        let schedule = Schedule { interval: Duration::from_micros(5500), stagger: Duration::from_micros(50) };
        Plan {
            request: target.request(&spec),
            head: false,
            pipeline: 1,
            close: false,
            rate: rate.then_some(schedule),
            timeout: Duration::from_secs(10),
            max_response,
            tls: false,
        }
    }

    /// Frames 100,000 pipelined answers of `percore serve` in reads of 16 KiB, as the
    /// loop hands them in (what a read left unconsumed comes again with the next):
    /// the load generator's CPU per response, counted in instructions, which are
    /// deterministic where time is not:
    ///
    /// ```sh
    /// cargo test --release -p percore-bin --bin percore --no-run  # names the binary
    /// valgrind --tool=callgrind --collect-atstart=no \
    ///     --toggle-collect='percore::bench::load::Load::frame' target/release/deps/percore-HASH \
    ///     --ignored --exact bench::load::tests::framing_a_pipeline_of_hello_answers
    /// ```
    ///
    /// counts only what `Load::frame` runs (the response parse, and the histogram and
    /// clock of each answer): its "I refs" over 100,000 are the instructions per response.
    #[test]
    #[ignore = "a measurement, to run under callgrind"]
    fn framing_a_pipeline_of_hello_answers() {
        const ANSWERS: usize = 100_000;
        const READ: usize = 16 * 1024;
        let answer = b"HTTP/1.1 200 OK\r\nServer: percore\r\nDate: Mon, 30 Nov 2026 10:00:00 GMT\r\n\
            Content-Type: text/plain\r\nContent-Length: 14\r\n\r\nhello, world!\n";
        let stream = answer.repeat(ANSWERS);
        let mut load = Load::new(plan(false, 1 << 20), ANSWERS as u64);
        let mut conn = LoadConn { in_flight: ANSWERS as u32, ..LoadConn::default() };
        load.in_flight = ANSWERS as u64;
        let now = Instant::now();
        let (mut consumed, mut received) = (0, 0);
        while received < stream.len() {
            received = (received + READ).min(stream.len());
            let Ok(After::Read(at)) = load.frame(&mut conn, &stream[consumed..received], Stream::Open, now)
            else {
                panic!("a pipeline of answers reads on")
            };
            consumed += at;
        }
        assert_eq!((load.counts.requests, load.counts.bytes_read), (ANSWERS as u64, stream.len() as u64));
    }

    #[test]
    fn at_a_fixed_rate_a_send_waits_for_its_tick_and_its_latency_counts_from_when_it_left() {
        let mut harness = Harness::new(Load::new(plan(true, 1 << 20), 10));
        harness.open();
        assert!(!harness.take_output().is_empty(), "the first request is due at once");
        harness.data(OK);
        // The next is due 5.5 ms after the first: the loop is woken at the start of
        // the 1 ms tick it falls in, 5 ms after the first, and sends it then.
        let tick = harness.timer().expect("the next send is timed");
        assert_eq!(tick - harness.now(), Duration::from_millis(5));
        assert_eq!(harness.advance(Duration::from_millis(5)), Some(Flow::Continue));
        assert!(!harness.take_output().is_empty(), "sent at its tick");
        // Answered 300 µs after it left, 200 µs before it was due: 300 µs, not 0.
        harness.advance(Duration::from_micros(300));
        harness.data(OK);
        let latency = &harness.protocol().latency;
        assert_eq!((latency.len(), latency.max()), (2, 300));
    }

    #[test]
    fn at_a_fixed_rate_a_response_in_parts_keeps_its_timeout_not_the_next_tick() {
        let mut harness = Harness::new(Load::new(plan(true, 1 << 20), 10));
        harness.open();
        assert!(!harness.take_output().is_empty(), "the first request is due at once");
        let timeout = harness.timer();
        assert_eq!(timeout, Some(harness.now() + Duration::from_secs(10)));
        harness.advance(Duration::from_micros(100));
        let consumed = harness.data(&OK[..10]).consumed;
        assert_eq!(harness.timer(), timeout, "still waiting for the rest, under its timeout");
        assert!(harness.take_output().is_empty(), "nothing more sent while one is in flight");
        // The rest comes 6 ms later, after the next request's tick: a slow answer,
        // not a timeout.
        assert_eq!(harness.advance(Duration::from_millis(6)), None);
        harness.data(&OK[consumed..]);
        let load = harness.protocol();
        assert_eq!((load.counts.requests, load.counts.errors.total()), (1, 0));
    }

    #[test]
    fn a_timer_set_for_an_answered_request_moves_on_to_the_next_ones_deadline() {
        let mut harness = Harness::new(Load::new(plan(false, 1 << 20), 2));
        harness.open();
        let first_deadline = harness.now() + Duration::from_secs(10);
        assert_eq!(harness.timer(), Some(first_deadline));
        // Answered after 6 s; the next request leaves then, due by 16 s.
        harness.advance(Duration::from_secs(6));
        harness.data(OK);
        assert_eq!(harness.wake(), Some(Flow::Continue));
        assert!(!harness.take_output().is_empty(), "the second request went out");
        assert_eq!(harness.timer(), Some(first_deadline), "left where it was: it fires sooner");
        // At 10 s the old timer fires: the request in flight is not late.
        assert_eq!(harness.advance(Duration::from_secs(4)), Some(Flow::Continue));
        assert_eq!(harness.protocol().counts.errors.timeout, 0);
        assert_eq!(harness.timer(), Some(first_deadline + Duration::from_secs(6)));
        // At 16 s it is.
        assert_eq!(harness.advance(Duration::from_secs(6)), Some(Flow::Close));
        let counts = &harness.protocol().counts;
        assert_eq!((counts.requests, counts.errors.timeout), (1, 1));
    }

    #[test]
    fn over_tls_a_failed_handshake_is_an_error_of_its_own_and_a_refused_connect_is_not() {
        for (kind, tls_errors, connect_errors) in
            [(io::ErrorKind::InvalidData, 1, 0), (io::ErrorKind::ConnectionRefused, 0, 1)]
        {
            let mut harness = Harness::new(Load::new(Plan { tls: true, ..plan(false, 1 << 20) }, 2));
            harness.open();
            harness.end(Closed::ConnectFailed(kind));
            let load = harness.protocol();
            let errors = &load.counts.errors;
            assert_eq!((errors.tls, errors.connect), (tls_errors, connect_errors), "{kind:?}");
            let handshakes = load.counts.tls.as_ref().expect("a TLS run counts its handshakes");
            assert_eq!(handshakes.first_failure.is_some(), tls_errors == 1, "{kind:?}");
            // Only a connect that failed says the target may refuse every one.
            assert_eq!(load.connect_error.is_some(), connect_errors == 1, "{kind:?}");
        }
        let plain = Load::new(plan(false, 1 << 20), 1);
        assert_eq!(plain.counts.tls, None, "a plain run has no handshakes");
    }

    #[test]
    fn a_response_of_exactly_the_maximum_size_is_answered_one_byte_more_is_cut() {
        for (max_response, answered) in [(OK.len() as u64, 1), (OK.len() as u64 - 1, 0)] {
            let mut harness = Harness::new(Load::new(plan(false, max_response), 1));
            harness.open();
            harness.data(OK);
            let errors = &harness.protocol().counts.errors;
            assert_eq!(
                (harness.protocol().counts.requests, errors.read),
                (answered, 1 - answered),
                "{max_response}"
            );
        }
    }

    #[test]
    fn a_response_to_no_request_is_a_parse_error_and_closes_the_connection() {
        let mut harness = Harness::new(Load::new(plan(false, 1 << 20), 1));
        harness.open();
        let verdict = harness.data(&[OK, OK].concat());
        assert_eq!(verdict.flow, Flow::Close);
        let load = harness.protocol();
        assert_eq!((load.counts.requests, load.counts.errors.parse, load.in_flight), (1, 1, 0));
    }

    #[test]
    fn requests_pipelined_after_a_closing_answer_go_back_to_be_sent_again() {
        let pipelined = Plan { pipeline: 4, ..plan(false, 1 << 20) };
        let mut harness = Harness::new(Load::new(pipelined, 4));
        harness.open();
        let closing = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        assert_eq!(harness.data(closing).flow, Flow::Close);
        let load = harness.protocol();
        // One answered; the three after it were never served and are sent again.
        assert_eq!((load.counts.requests, load.in_flight, load.budget), (1, 0, 3));
        assert!(!load.finished());
    }

    #[test]
    fn a_response_that_ends_with_the_connection_is_answered_at_a_clean_close_only() {
        let response = b"HTTP/1.1 200 OK\r\n\r\nhello";
        for (closed, answered) in
            [(Closed::ByPeer, 1), (Closed::ReadFailed(io::ErrorKind::ConnectionReset), 0)]
        {
            let mut harness = Harness::new(Load::new(plan(false, 1 << 20), 1));
            harness.open();
            harness.receive(response);
            assert_eq!(harness.protocol().counts.requests, 0, "not over until the close");
            harness.end(closed);
            let counts = &harness.protocol().counts;
            assert_eq!((counts.requests, counts.errors.read), (answered, 1 - answered), "{closed:?}");
            assert_eq!(counts.bytes_read, response.len() as u64, "{closed:?}");
            assert_eq!(harness.protocol().in_flight, 0);
        }
    }
}
