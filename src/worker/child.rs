//! A worker process: pins itself, runs one loop on its listener, stops on a signal.

use std::net::TcpListener;
use std::time::Duration;

use super::{Event, Options, Pinning, Scheduling, WorkerError};
use crate::reactor::{Protocol, Reactor, Wake};
use crate::sys::{self, SignalFd};

/// What a worker is given by the master: which worker it is, and the options of all.
pub(crate) struct Assignment<'a> {
    pub(crate) index: usize,
    pub(crate) master_pid: u32,
    pub(crate) options: &'a Options,
}

impl Assignment<'_> {
    fn cpu(&self) -> usize {
        self.options.cpus[self.index]
    }
}

/// Environment variable that makes every worker fail at start, to test how the
/// master handles a worker that cannot run.
pub(crate) const FAULT_VARIABLE: &str = "PERCORE_FAULT";

/// Runs the worker until it stops, on the signals `signals` reads (the master's
/// signalfd, inherited: after a fork it reads the worker's own); returns its exit
/// status.
pub(crate) fn run<P: Protocol>(
    job: &Assignment<'_>,
    listener: TcpListener,
    signals: SignalFd,
    make_protocol: impl FnOnce() -> std::io::Result<P>,
    report: impl Fn(Event<'_, P>),
) -> i32 {
    match serve(job, listener, signals, make_protocol, &report) {
        Ok(()) => 0,
        Err(error) => {
            report(Event::Failed { index: job.index, cpu: job.cpu(), error });
            1
        }
    }
}

fn serve<P: Protocol>(
    job: &Assignment<'_>,
    listener: TcpListener,
    signals: SignalFd,
    make_protocol: impl FnOnce() -> std::io::Result<P>,
    report: &impl Fn(Event<'_, P>),
) -> Result<(), WorkerError> {
    // SIGTERM on the master's death: a worker never outlives it (even a SIGKILLed
    // one); the check after covers a master that died before the call.
    sys::set_parent_death_signal(libc::SIGTERM).map_err(WorkerError::DeathSignal)?;
    if std::os::unix::process::parent_id() != job.master_pid {
        return Err(WorkerError::MasterGone);
    }
    if job.options.pinning == Pinning::Pinned
        && !core_affinity::set_for_current(core_affinity::CoreId { id: job.cpu() })
    {
        return Err(WorkerError::Pin(job.cpu()));
    }
    if job.options.scheduling == Scheduling::Batch {
        sys::set_batch_scheduling().map_err(WorkerError::Scheduling)?;
    }
    if std::env::var_os(FAULT_VARIABLE).is_some_and(|v| v == "worker-start") {
        return Err(WorkerError::Injected);
    }
    let protocol = make_protocol().map_err(WorkerError::Protocol)?;
    let mut reactor = Reactor::new(listener, protocol, job.options.reactor).map_err(WorkerError::Loop)?;
    reactor.watch(signals.raw_fd()).map_err(WorkerError::Loop)?;
    while reactor.run().map_err(WorkerError::Loop)? == Wake::Control {
        if !on_signals(&signals, &mut reactor, job.options.shutdown_timeout)? {
            break;
        }
    }
    report(Event::Stopped {
        index: job.index,
        pid: std::process::id(),
        cpu: job.cpu(),
        stats: reactor.stats(),
        protocol: reactor.protocol(),
    });
    Ok(())
}

/// SIGTERM or a first SIGINT start a graceful stop; a SIGINT during one stops at
/// once. Returns whether the loop goes on.
fn on_signals<P: Protocol>(
    signals: &SignalFd,
    reactor: &mut Reactor<P>,
    timeout: Duration,
) -> Result<bool, WorkerError> {
    while let Some(signal) = signals.read().map_err(WorkerError::Signals)? {
        match signal {
            libc::SIGINT if reactor.is_draining() => return Ok(false),
            libc::SIGINT | libc::SIGTERM => reactor.drain(timeout),
            _ => {}
        }
    }
    Ok(true)
}
