//! The master: forks a worker per CPU, restarts the ones that die, and stops them
//! all on SIGTERM or SIGINT. It holds every listener for its whole life, so a
//! restarted worker takes over the queue of the one it replaces.

use std::collections::VecDeque;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use super::child::{self, Assignment};
use super::{Event, Options, Stopped};
use crate::reactor::Protocol;
use crate::sys::{self, Epoll, Exit, Forked, SignalFd};

/// A worker that dies this many times within [`CRASH_WINDOW`] makes the master give up.
pub(crate) const CRASH_LIMIT: usize = 5;
pub(crate) const CRASH_WINDOW: Duration = Duration::from_secs(10);
/// First restart delay, doubled for each recent death, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How long after the shutdown timeout a worker still running is killed.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// Which process returns from forking a worker. The child must become the worker:
/// carrying on as the master would make two masters.
#[must_use]
enum Role {
    Master,
    /// The new worker, with its index.
    Worker(usize),
}

/// A worker's place: worker `i` runs on `options.cpus[i]`.
#[derive(Default)]
struct Slot {
    pid: Option<libc::pid_t>,
    restart_at: Option<Instant>,
    deaths: VecDeque<Instant>,
}

pub(crate) struct Master<'a, F, R> {
    options: &'a Options,
    listeners: Vec<TcpListener>,
    make_protocol: F,
    /// Where events go, in the master and, inherited, in its workers.
    report: R,
    slots: Vec<Slot>,
    epoll: Epoll,
    signals: SignalFd,
    /// Set once stopping: when workers still running get SIGKILL.
    kill_at: Option<Instant>,
    outcome: Stopped,
    /// The master's own pid, which a forked worker checks its parent against.
    pid: u32,
}

impl<'a, P: Protocol, F: Fn() -> std::io::Result<P>, R: Fn(Event<'_, P>)> Master<'a, F, R> {
    pub(crate) fn new(
        options: &'a Options,
        listeners: Vec<TcpListener>,
        make_protocol: F,
        report: R,
    ) -> std::io::Result<Self> {
        // Blocked before the first fork, so that workers inherit the mask too.
        let signals = SignalFd::new()?;
        let epoll = Epoll::new()?;
        epoll.add(signals.raw_fd(), sys::INTEREST_READ, 0)?;
        let slots = options.cpus.iter().map(|_| Slot::default()).collect();
        Ok(Master {
            options,
            listeners,
            make_protocol,
            report,
            slots,
            epoll,
            signals,
            kill_at: None,
            outcome: Stopped::Gracefully,
            pid: std::process::id(),
        })
    }

    /// Starts every worker and supervises them until they have all stopped. In a
    /// forked child it becomes the worker and never returns.
    pub(crate) fn run(mut self) -> std::io::Result<Stopped> {
        for index in 0..self.slots.len() {
            if let Role::Worker(index) = self.start(index)? {
                self.become_worker(index);
            }
        }
        let mut events = Vec::with_capacity(4);
        while self.kill_at.is_none() || self.slots.iter().any(|slot| slot.pid.is_some()) {
            self.epoll.wait(&mut events, self.timeout())?;
            while let Some(signal) = self.signals.read()? {
                match signal {
                    libc::SIGCHLD => self.reap()?,
                    _ => self.stop(signal),
                }
            }
            if let Role::Worker(index) = self.restart_due() {
                self.become_worker(index);
            }
            if self.kill_at.is_some_and(|at| at <= Instant::now()) {
                self.signal_workers(libc::SIGKILL);
                // Each is reaped on its SIGCHLD; not sent again at every wake until then.
                self.kill_at = Some(Instant::now() + KILL_GRACE);
            }
        }
        Ok(self.outcome)
    }

    /// Forks worker `index`; says which side of the fork returns.
    fn start(&mut self, index: usize) -> std::io::Result<Role> {
        let (slot, cpu) = (&mut self.slots[index], self.options.cpus[index]);
        slot.restart_at = None;
        match sys::fork()? {
            Forked::Child => Ok(Role::Worker(index)),
            Forked::Parent(pid) => {
                slot.pid = Some(pid);
                (self.report)(Event::Started { index, pid, cpu });
                Ok(Role::Master)
            }
        }
    }

    /// In the child of a fork: closes what belongs to the master (its epoll, the other
    /// workers' listeners) and runs as worker `index`, on the inherited signalfd.
    fn become_worker(mut self, index: usize) -> ! {
        let job = Assignment { index, master_pid: self.pid, options: self.options };
        let listener = self.listeners.swap_remove(index);
        drop((self.listeners, self.epoll));
        // After a fork a signalfd reads the signals of the process that reads it.
        std::process::exit(child::run(&job, listener, self.signals, self.make_protocol, self.report))
    }

    fn reap(&mut self) -> std::io::Result<()> {
        while let Some((pid, exit)) = sys::reap_child()? {
            let Some(index) = self.slots.iter().position(|slot| slot.pid == Some(pid)) else { continue };
            self.slots[index].pid = None;
            if self.kill_at.is_none() {
                self.on_crash(index, exit);
            } else if exit != Exit::Code(0) && self.outcome == Stopped::Gracefully {
                self.outcome = Stopped::Unclean { index, exit };
                (self.report)(Event::Stopping(&self.outcome));
            }
        }
        Ok(())
    }

    /// Schedules the restart of a worker that died unexpectedly, or gives up.
    fn on_crash(&mut self, index: usize, exit: Exit) {
        let now = Instant::now();
        let (slot, cpu) = (&mut self.slots[index], self.options.cpus[index]);
        slot.deaths.retain(|&at| now.duration_since(at) < CRASH_WINDOW);
        slot.deaths.push_back(now);
        if slot.deaths.len() >= CRASH_LIMIT {
            self.outcome = Stopped::GaveUp { index, cpu, last: exit };
            (self.report)(Event::Stopping(&self.outcome));
            return self.stop(libc::SIGTERM);
        }
        let backoff = FIRST_BACKOFF.saturating_mul(1 << (slot.deaths.len() - 1)).min(MAX_BACKOFF);
        slot.restart_at = Some(now + backoff);
        (self.report)(Event::Died { index, cpu, exit, restart_in: backoff });
    }

    /// Restarts the workers whose back-off is over. A fork that fails is tried again
    /// later: one failure must not take down the workers that run.
    fn restart_due(&mut self) -> Role {
        let now = Instant::now();
        for index in 0..self.slots.len() {
            if self.kill_at.is_none() && self.slots[index].restart_at.is_some_and(|at| at <= now) {
                match self.start(index) {
                    Ok(Role::Master) => {}
                    Ok(role @ Role::Worker(_)) => return role,
                    Err(error) => {
                        self.slots[index].restart_at = Some(now + MAX_BACKOFF);
                        (self.report)(Event::RestartFailed { index, error, retry_in: MAX_BACKOFF });
                    }
                }
            }
        }
        Role::Master
    }

    /// A first SIGTERM or SIGINT starts a graceful stop of every worker; a SIGINT
    /// during one stops them at once.
    fn stop(&mut self, signal: libc::c_int) {
        if self.kill_at.is_none() {
            let grace = self.options.shutdown_timeout.saturating_add(KILL_GRACE);
            self.kill_at = Some(Instant::now().checked_add(grace).unwrap_or_else(far_future));
            for slot in &mut self.slots {
                slot.restart_at = None;
            }
            self.signal_workers(libc::SIGTERM);
        } else if signal == libc::SIGINT {
            self.outcome = Stopped::AtOnce;
            self.signal_workers(libc::SIGINT);
        }
    }

    fn signal_workers(&self, signal: libc::c_int) {
        for pid in self.slots.iter().filter_map(|slot| slot.pid) {
            // A worker that exited already is reaped on the coming SIGCHLD.
            let _ = sys::kill(pid, signal);
        }
    }

    /// How long until the next restart or kill is due; `None` when none is.
    fn timeout(&self) -> Option<Duration> {
        let restarts = self.slots.iter().filter_map(|slot| slot.restart_at);
        let next = restarts.chain(self.kill_at).min();
        next.map(|at| at.saturating_duration_since(Instant::now()))
    }
}

/// A time no stop will reach, for a shutdown timeout too large to add to now.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}
