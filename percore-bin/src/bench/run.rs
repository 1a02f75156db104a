//! A benchmark run: each thread is pinned to a CPU and runs one client
//! [`Reactor`]; its protocol sends requests (keep-alive, pipelined, one connection
//! per request, or on a fixed schedule), frames the responses, and records each
//! latency in an HDR histogram, which it hands to the collector once a second.
//! Over TLS each thread has a client of its own, and times each handshake.
//! The run ends at its duration, after its requests, or at the first Ctrl-C.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::time::{Duration, Instant, SystemTime};

use percore::reactor::{Config, Reactor};

use super::collect::{Collector, Tick};
use super::load::{Load, Plan, Schedule};
use super::report::hdrlog::LogWriter;
use super::report::{new_histogram, Mode, Report, RunCounts, RunInfo, Stop};
use super::target::{Request, Target};
use super::tls::{self, TlsClient, TlsPlan};

/// The longest a loop waits without looking at the clock and the Ctrl-C flag: the
/// run ends within this of either.
const MAX_WAIT: Duration = Duration::from_millis(100);

/// A benchmark run.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Where to send the load.
    pub target: Target,
    /// Connections open at once, over all threads.
    pub connections: usize,
    /// When to stop.
    pub stop: Stop,
    /// The CPU of each thread, one entry per thread.
    pub cpus: Vec<usize>,
    /// Pin each thread to its CPU.
    pub pin: bool,
    pub mode: Mode,
    /// A fixed total rate in requests per second, latency counted from each
    /// request's intended send time.
    pub rate: Option<f64>,
    pub method: String,
    /// The request, built once.
    pub request: Request,
    /// How long a request may wait for its response.
    pub timeout: Duration,
    /// The most bytes one response may take.
    pub max_response: u64,
    /// When to start sending (wall clock); now if `None`.
    pub start_at: Option<SystemTime>,
    /// How to speak TLS, for an https:// target.
    pub tls: Option<TlsPlan>,
}

impl BenchOptions {
    fn threads(&self) -> usize {
        self.cpus.len().clamp(1, self.connections.max(1))
    }

    /// What the report says ran.
    fn info(&self) -> RunInfo {
        RunInfo {
            url: self.target.as_str().to_string(),
            method: self.method.clone(),
            mode: self.mode,
            rate: self.rate,
            threads: self.threads(),
            connections: self.connections,
            stop: self.stop,
            timeout: self.timeout,
        }
    }
}

/// Where a run's seconds go as it runs.
pub struct Outputs<'a> {
    pub log: Option<&'a mut LogWriter>,
    pub progress: Option<Box<dyn std::io::Write + 'a>>,
}

/// Runs the benchmark until it ends or `interrupted` is set. A target that cannot
/// be resolved is an error before any load is sent; one that refuses every
/// connection, once the run's own connections have all failed (no connection of
/// its own is opened first to see: the server would see one that sends nothing).
pub fn run(options: &BenchOptions, interrupted: &AtomicBool, outputs: Outputs<'_>) -> Result<Report, String> {
    let addr = options.target.resolve()?;
    if let Some(at) = options.start_at {
        wait_until(at, interrupted);
    }
    let threads = options.threads();
    let (started_at, start) = (SystemTime::now(), Instant::now());
    let Outputs { mut log, progress } = outputs;
    if let Some(log) = &mut log {
        log.begin(started_at)?;
    }
    let mut collector = Collector::new(threads, log, progress);
    let (ticks, received) = mpsc::channel();
    let (counts, collected) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let job = Job::new(options, addr, i, threads, start);
                let ticks = ticks.clone();
                scope.spawn(move || job.run(&ticks, interrupted))
            })
            .collect();
        drop(ticks);
        let mut collecting = Ok(());
        for tick in received {
            if let Err(e) = collector.receive(tick) {
                // The log cannot be written: the run ends, and says why.
                interrupted.store(true, Ordering::SeqCst);
                collecting = collecting.and(Err(e));
            }
        }
        let counts: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a load thread panicked".into())))
            .collect();
        (counts, collecting.and_then(|()| collector.finish(start.elapsed())))
    });
    let duration = start.elapsed();
    let mut report = Report::new(vec![options.info()], started_at);
    for thread in counts {
        report.counts.add(&thread?);
    }
    // Once a run, not once a connection: they all fail alike.
    if let Some(kind) = report.counts.tls.as_ref().and_then(|handshakes| handshakes.first_failure) {
        eprintln!("percore bench: TLS: {}", tls::failure_reason(kind));
    }
    let collected = collected?;
    report.latency = collected.latency;
    report.per_second = collected.per_second;
    report.duration = duration;
    report.interrupted = interrupted.load(Ordering::SeqCst);
    Ok(report)
}

/// Sleeps until the wall clock reads `at`, or Ctrl-C.
fn wait_until(at: SystemTime, interrupted: &AtomicBool) {
    while let Ok(left) = at.duration_since(SystemTime::now()) {
        if interrupted.load(Ordering::Relaxed) || left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(MAX_WAIT));
    }
}

/// One thread's share of the run.
struct Job {
    index: usize,
    /// The target, as given, and its address.
    url: String,
    addr: SocketAddr,
    cpu: Option<usize>,
    connections: usize,
    budget: u64,
    start: Instant,
    end: Option<Instant>,
    plan: Plan,
    tls: Option<TlsPlan>,
}

impl Job {
    fn new(options: &BenchOptions, addr: SocketAddr, index: usize, threads: usize, start: Instant) -> Job {
        let share = |total: u64| total / threads as u64 + u64::from((index as u64) < total % threads as u64);
        let connections = share(options.connections as u64) as usize;
        let (budget, end) = match options.stop {
            Stop::After(duration) => (u64::MAX, start.checked_add(duration)),
            Stop::Requests(n) => (share(n), None),
        };
        let rate = options.rate.map(|total| {
            let per_thread = total / threads as f64;
            // In range for every rate the command line takes; saturated all the same.
            let seconds = |s: f64| Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX);
            Schedule {
                interval: seconds(connections.max(1) as f64 / per_thread),
                stagger: seconds(1.0 / per_thread),
            }
        });
        let plan = Plan {
            request: options.request.clone(),
            head: options.method.eq_ignore_ascii_case("HEAD"),
            pipeline: match options.mode {
                Mode::Pipeline(depth) => depth.max(1),
                Mode::KeepAlive | Mode::Close => 1,
            },
            close: options.mode == Mode::Close,
            rate,
            timeout: options.timeout,
            max_response: options.max_response,
            tls: options.tls.is_some(),
        };
        let cpu = options.pin.then(|| options.cpus[index % options.cpus.len()]);
        let url = options.target.as_str().to_string();
        let tls = options.tls.clone();
        Job { index, url, addr, cpu, connections, budget, start, end, plan, tls }
    }

    /// Runs the thread's loop; its last second is sent whatever ends it, so that the
    /// collector never waits for a thread that is gone.
    fn run(self, ticks: &Sender<Tick>, interrupted: &AtomicBool) -> Result<RunCounts, String> {
        if let Some(cpu) = self.cpu {
            core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
        }
        let mut ticker = Ticker { thread: self.index, second: 0, errors_sent: 0 };
        let (mut reactor, tls) = match self.start() {
            Ok(started) => started,
            Err(e) => {
                let _ = ticks.send(ticker.tick(&mut Load::new(self.plan.clone(), 0), true));
                return Err(e);
            }
        };
        let driven = self.drive(&mut reactor, tls.as_ref(), ticks, interrupted, &mut ticker);
        let _ = ticks.send(ticker.tick(reactor.protocol_mut(), true));
        driven.map(|()| std::mem::take(&mut reactor.protocol_mut().counts))
    }

    /// The thread's loop, and its TLS client for an https:// target.
    fn start(&self) -> Result<(Reactor<Load>, Option<TlsClient>), String> {
        // The protocol times each request itself, with the connection's timer: the
        // loop's own timeouts, a server's, are off (a head arriving slowly is
        // pending input, which the request timeout would cut). But a TLS handshake
        // that never ends has no request out yet to time: --timeout bounds it too.
        // A client loop accepts nothing, so `max_connections` does not apply.
        let config = Config {
            message_timeout: None,
            idle_timeout: None,
            send_timeout: None,
            connect_timeout: self.tls.is_some().then_some(self.plan.timeout),
            ..Config::default()
        };
        let tls = self.tls.as_ref().map(TlsPlan::client).transpose()?;
        let reactor =
            Reactor::client(Load::new(self.plan.clone(), self.budget), config).map_err(|e| e.to_string())?;
        Ok((reactor, tls))
    }

    /// Turns the loop until the run ends, sending each second's latencies as it
    /// passes.
    fn drive(
        &self,
        reactor: &mut Reactor<Load>,
        tls: Option<&TlsClient>,
        ticks: &Sender<Tick>,
        interrupted: &AtomicBool,
        ticker: &mut Ticker,
    ) -> Result<(), String> {
        self.open(reactor, tls, self.connections);
        let mut next_tick = self.start + Duration::from_secs(1);
        loop {
            // The loop's own look at the clock, taken after its wait: one read per turn.
            let now = reactor.now();
            if now >= next_tick {
                let _ = ticks.send(ticker.tick(reactor.protocol_mut(), false));
                ticker.second = now.saturating_duration_since(self.start).as_secs();
                next_tick = self.start + Duration::from_secs(ticker.second + 1);
            }
            let load = reactor.protocol();
            if let Some(error) =
                load.connect_error.filter(|_| load.established == 0 && reactor.stats().open == 0)
            {
                return Err(format!(
                    "cannot connect to {} ({}): {}",
                    self.url,
                    self.addr,
                    std::io::Error::from(error)
                ));
            }
            let ended = self.end.is_some_and(|end| now >= end) || interrupted.load(Ordering::Relaxed);
            if ended || reactor.protocol().finished() {
                return Ok(());
            }
            // Closed connections are replaced while requests are left to send, one
            // for each at most: none is opened only to stay idle to the end.
            let load = reactor.protocol_mut();
            let closed = std::mem::take(&mut load.closed);
            let replace = (closed as u64).min(load.left_to_send()) as usize;
            if replace > 0 {
                self.open(reactor, tls, replace);
            }
            if reactor.stats().open == 0 {
                // Every connection failed and none could be opened again.
                return Ok(());
            }
            let wait =
                [self.end, Some(next_tick)].into_iter().flatten().map(|at| at.saturating_duration_since(now));
            reactor.turn(Some(wait.fold(MAX_WAIT, Duration::min))).map_err(|e| e.to_string())?;
            let mut ready = std::mem::take(&mut reactor.protocol_mut().ready);
            for id in ready.drain(..) {
                reactor.wake(id);
            }
            if reactor.protocol().ready.is_empty() {
                // Keeps the capacity: no allocation per turn.
                reactor.protocol_mut().ready = ready;
            }
        }
    }

    /// Opens `n` connections, over TLS if `tls` is given; one that fails at once
    /// counts as a connect error.
    fn open(&self, reactor: &mut Reactor<Load>, tls: Option<&TlsClient>, n: usize) {
        for _ in 0..n {
            let asked = Instant::now();
            let opened = match tls {
                Some(tls) => reactor.connect_tls(self.addr, &tls.client, &tls.server_name),
                None => reactor.connect(self.addr),
            };
            let opened = opened.map(|id| reactor.protocol_mut().opening(id, asked));
            if let Err(e) = opened {
                let load = reactor.protocol_mut();
                load.counts.errors.connect += 1;
                load.connect_error.get_or_insert(e.kind());
            }
        }
    }
}

/// A thread's seconds: which one is under way, and the errors already sent.
struct Ticker {
    thread: usize,
    second: u64,
    errors_sent: u64,
}

impl Ticker {
    /// The second under way, taken from `load`: its latencies and errors.
    fn tick(&mut self, load: &mut Load, last: bool) -> Tick {
        let latency = std::mem::replace(&mut load.latency, new_histogram());
        let errors = load.counts.errors.total();
        let new_errors = errors.saturating_sub(std::mem::replace(&mut self.errors_sent, errors));
        Tick { thread: self.thread, index: self.second, latency, errors: new_errors, last }
    }
}
