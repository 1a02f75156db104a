//! A worker process: pins itself, runs one loop on its listener, publishes its live
//! figures once a second, and drains on a signal: a stop (TERM, INT, QUIT) closes
//! its listener once its queue is served; a retirement (HUP, sent by the master at a
//! reload or an upgrade) hands the listener over to the next generation at once.

use std::time::Duration;

use super::error::WorkerError;
use super::event::Event;
use super::live::SharedLive;
use super::options::{Options, Pinning, Scheduling};
use super::service::Service;
use crate::listen::Listener;
use crate::reactor::{DrainOptions, ListenerFate, Protocol, Reactor, Returned};
use crate::sys::{self, SignalFd, TimerFd};

/// What a worker is given by the master: which worker it is, and the options of all.
pub(crate) struct Assignment<'a> {
    pub(crate) index: usize,
    pub(crate) master_pid: u32,
    pub(crate) options: &'a Options,
    pub(crate) shared: &'a SharedLive,
}

impl Assignment<'_> {
    fn cpu(&self) -> usize {
        self.options.cpus[self.index]
    }
}

/// How often a worker publishes its live figures.
const PUBLISH_EVERY: Duration = Duration::from_secs(1);

/// Runs the worker until it stops, on the signals `signals` reads (the master's
/// signalfd, inherited: after a fork it reads the worker's own); returns its exit
/// status.
pub(crate) fn run<S: Service>(
    job: &Assignment<'_>,
    listener: Listener,
    signals: SignalFd,
    service: &S,
    config: &S::Config,
    report: impl Fn(Event<'_>),
) -> i32 {
    match serve(job, listener, signals, service, config, &report) {
        Ok(()) => 0,
        Err(error) => {
            report(Event::Failed { index: job.index, cpu: job.cpu(), error });
            1
        }
    }
}

fn serve<S: Service>(
    job: &Assignment<'_>,
    listener: Listener,
    signals: SignalFd,
    service: &S,
    config: &S::Config,
    report: &impl Fn(Event<'_>),
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
    let protocol = service.protocol(config).map_err(WorkerError::Protocol)?;
    let mut reactor = Reactor::new(listener, protocol, job.options.reactor).map_err(WorkerError::Loop)?;
    #[cfg(feature = "tls")]
    reactor.set_tls(job.options.tls.as_ref());
    let publish_timer = TimerFd::every(PUBLISH_EVERY).map_err(WorkerError::Loop)?;
    reactor.watch(&signals).map_err(WorkerError::Loop)?;
    reactor.watch(&publish_timer).map_err(WorkerError::Loop)?;
    // Its pid and zeros at once, so a SIGUSR1 in its first second reports it.
    job.shared.publish(job.index, reactor.stats(), reactor.protocol().counts());
    let mut retired = false;
    while reactor.run().map_err(WorkerError::Loop)? == Returned::Control {
        if publish_timer.read().map_err(WorkerError::Loop)? > 0 && !retired {
            job.shared.publish(job.index, reactor.stats(), reactor.protocol().counts());
        }
        match on_signals(&signals, &mut reactor, job.options)? {
            Signalled::Nothing => {}
            Signalled::Retired => retired = true,
            Signalled::StopNow => break,
        }
    }
    report(Event::Stopped {
        index: job.index,
        pid: std::process::id(),
        cpu: job.cpu(),
        stats: reactor.stats(),
        counts: reactor.protocol().counts(),
        retired,
    });
    Ok(())
}

/// What the signals read asked for.
enum Signalled {
    Nothing,
    /// A reload or an upgrade retires this worker: it drains, handing its listener over.
    Retired,
    /// A second SIGINT: stop at once.
    StopNow,
}

/// TERM, QUIT or a first INT start a graceful stop; HUP (from the master) retires
/// the worker; an INT during a drain stops at once.
fn on_signals<P: crate::reactor::Protocol>(
    signals: &SignalFd,
    reactor: &mut Reactor<P>,
    options: &Options,
) -> Result<Signalled, WorkerError> {
    let drain =
        |listener| DrainOptions { listener, grace: options.drain_grace, timeout: options.shutdown_timeout };
    let mut signalled = Signalled::Nothing;
    while let Some(signal) = signals.read().map_err(WorkerError::Signals)? {
        match signal {
            libc::SIGINT if reactor.is_draining() => return Ok(Signalled::StopNow),
            libc::SIGINT | libc::SIGTERM | libc::SIGQUIT => {
                reactor.drain(drain(ListenerFate::CloseAfterQueue))
            }
            libc::SIGHUP => {
                reactor.drain(drain(ListenerFate::HandOver));
                signalled = Signalled::Retired;
            }
            _ => {}
        }
    }
    Ok(signalled)
}
