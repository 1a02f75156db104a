//! A benchmark run: each thread is pinned to a CPU and runs one client
//! [`Reactor`]; its protocol sends requests (keep-alive, pipelined, one connection
//! per request, or on a fixed schedule), frames the responses, and records each
//! latency in an HDR histogram.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use hdrhistogram::Histogram;
use percore::reactor::{Config, Reactor};

use super::load::{Load, Plan, Schedule};
use super::report::{add_histogram, new_histogram, Counts, Mode, Report, RunInfo, Stop};
use super::target::{Request, Target};

/// A benchmark run.
#[derive(Clone, Debug, PartialEq)]
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
    /// Request method.
    pub method: String,
    /// The request, built once.
    pub request: Request,
    /// How long a request may wait for its response.
    pub timeout: Duration,
    /// The most bytes one response may take.
    pub max_response: u64,
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

/// Counts updated while the run goes on, for a progress line.
#[derive(Debug, Default)]
pub struct Live {
    /// Responses so far.
    pub requests: AtomicU64,
    /// Errors so far.
    pub errors: AtomicU64,
}

/// Runs the benchmark; `live` is updated as it goes. A target that cannot be
/// resolved or refuses a first connection is an error before any load is sent.
pub fn run(options: &BenchOptions, live: &Live) -> Result<Report, String> {
    let addr = options.target.resolve()?;
    let probe_timeout = options.timeout.min(Duration::from_secs(5));
    TcpStream::connect_timeout(&addr, probe_timeout)
        .map_err(|e| format!("cannot connect to {} ({addr}): {e}", options.target.as_str()))?;
    let threads = options.threads();
    let (started_at, start) = (SystemTime::now(), Instant::now());
    let reports = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let job = Job::new(options, addr, i, threads, start);
                scope.spawn(move || job.run(live))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a load thread panicked".into())))
            .collect::<Vec<_>>()
    });
    let mut report = Report::new(vec![options.info()], started_at);
    for thread in reports {
        let (counts, latency) = thread?;
        report.counts.add(&counts);
        add_histogram(&mut report.latency, &latency);
    }
    report.duration = start.elapsed();
    Ok(report)
}

/// One thread's share of the run.
struct Job {
    addr: SocketAddr,
    cpu: Option<usize>,
    connections: usize,
    budget: u64,
    end: Option<Instant>,
    plan: Plan,
}

impl Job {
    fn new(options: &BenchOptions, addr: SocketAddr, index: usize, threads: usize, start: Instant) -> Job {
        let share = |total: u64| total / threads as u64 + u64::from((index as u64) < total % threads as u64);
        let connections = share(options.connections as u64) as usize;
        let (budget, end) = match options.stop {
            Stop::After(duration) => (u64::MAX, Some(start + duration)),
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
        };
        let cpu = options.pin.then(|| options.cpus[index % options.cpus.len()]);
        Job { addr, cpu, connections, budget, end, plan }
    }

    fn run(self, live: &Live) -> Result<(Counts, Histogram<u64>), String> {
        if let Some(cpu) = self.cpu {
            core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
        }
        // The protocol times each request itself, with the connection's timer.
        let config = Config {
            max_connections: usize::MAX,
            request_timeout: 0,
            idle_timeout: 0,
            send_timeout: 0,
            ..Config::default()
        };
        let mut reactor =
            Reactor::client(Load::new(self.plan.clone(), self.budget), config).map_err(|e| e.to_string())?;
        self.open(&mut reactor, self.connections);
        let mut published = (0, 0);
        loop {
            let now = Instant::now();
            if self.end.is_some_and(|end| now >= end) || reactor.protocol().finished() {
                break;
            }
            let load = reactor.protocol_mut();
            let replace = std::mem::take(&mut load.closed);
            if load.may_send() && replace > 0 {
                self.open(&mut reactor, replace);
            }
            if reactor.stats().open == 0 {
                // Every connection failed and none could be opened again.
                break;
            }
            reactor.turn(Some(self.wait(now))).map_err(|e| e.to_string())?;
            let mut ready = std::mem::take(&mut reactor.protocol_mut().ready);
            for id in ready.drain(..) {
                reactor.wake(id);
            }
            if reactor.protocol().ready.is_empty() {
                // Keeps the capacity: no allocation per turn.
                reactor.protocol_mut().ready = ready;
            }
            published = publish(reactor.protocol(), live, published);
        }
        // The run's duration is measured once, over all threads, by `run`.
        let load = reactor.protocol_mut();
        Ok((std::mem::take(&mut load.counts), std::mem::replace(&mut load.latency, new_histogram())))
    }

    /// Opens `n` connections; one that fails at once counts as a connect error.
    fn open(&self, reactor: &mut Reactor<Load>, n: usize) {
        for _ in 0..n {
            if reactor.connect(self.addr).is_err() {
                reactor.protocol_mut().counts.errors.connect += 1;
            }
        }
    }

    /// How long the loop may wait: until the end, and at most 100 ms so the
    /// progress counts stay fresh. Scheduled sends are the loop's timers.
    fn wait(&self, now: Instant) -> Duration {
        let until_end = self.end.map(|end| end.saturating_duration_since(now));
        until_end.unwrap_or(Duration::MAX).min(Duration::from_millis(100))
    }
}

/// Adds what this thread counted since `last` to the shared counts.
fn publish(load: &Load, live: &Live, last: (u64, u64)) -> (u64, u64) {
    let now = (load.counts.requests, load.counts.errors.total());
    live.requests.fetch_add(now.0 - last.0, Ordering::Relaxed);
    live.errors.fetch_add(now.1 - last.1, Ordering::Relaxed);
    now
}
