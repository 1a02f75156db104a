//! The master: forks a worker per CPU and restarts the ones that die; on signals it
//! stops them, reloads them (a new generation on the same listeners, the old one
//! retiring), upgrades the binary, or reports their live figures. It holds every
//! listener while it serves, so a restarted or reloaded worker takes over the queue
//! of the one it replaces.

use std::borrow::Cow;
use std::io::Read;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use super::child::{self, Assignment};
use super::event::{Event, Outcome};
use super::listeners::Listeners;
use super::live::{LiveFigures, SharedLive};
use super::options::Options;
use super::restart::{Decision, Restarts, MAX_BACKOFF};
use super::service::Service;
use super::upgrade;
use crate::reactor::far_future;
use crate::sys::{self, Epoll, Exit, Forked, SignalFd};

/// How long after the shutdown timeout a worker still running is killed.
const KILL_GRACE: Duration = Duration::from_secs(5);

const SIGNALS: u64 = 0;
const UPGRADE_READY: u64 = 1;

/// Which process returns from forking a worker. The child must become the worker:
/// carrying on as the master would make two masters.
#[must_use]
enum Role {
    Master,
    /// The new worker, with its index.
    Worker(usize),
}

/// What the master knows of worker `i` (on `options.cpus[i]`) across its restarts:
/// its process, when it is restarted, and its restart history.
struct WorkerRecord {
    pid: Option<libc::pid_t>,
    restart_at: Option<Instant>,
    restarts: Restarts,
}

/// Where the master is in its life.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Serving,
    /// A new master serves: this one's workers drain, then it exits.
    Upgraded,
    /// Stopping; workers still running then get SIGKILL.
    Stopping {
        kill_at: Instant,
    },
}

pub(crate) struct Master<'a, S: Service, R> {
    /// The options, as a reload renews them (the TLS certificate, read again).
    options: Cow<'a, Options>,
    /// Closed when stopping, so that new connections are refused.
    listeners: Option<Listeners>,
    service: S,
    config: S::Config,
    /// Where events go, in the master and, inherited, in its workers.
    report: R,
    workers: Vec<WorkerRecord>,
    generation: u32,
    /// Workers of earlier generations, draining: pid and index.
    retiring: Vec<(libc::pid_t, usize)>,
    epoll: Epoll,
    signals: SignalFd,
    /// The workers' live figures, and when the next `--stats` report is due.
    live: LiveFigures,
    phase: Phase,
    upgrade: Option<upgrade::Pending>,
    outcome: Outcome,
    /// The master's own pid, which a forked worker checks its parent against.
    pid: u32,
}

impl<'a, S: Service, R: Fn(Event<'_>)> Master<'a, S, R> {
    pub(crate) fn new(
        options: &'a Options,
        listeners: Listeners,
        signals: SignalFd,
        service: S,
        config: S::Config,
        report: R,
    ) -> std::io::Result<Self> {
        // The signals were blocked before the first fork: workers inherit the mask.
        let epoll = Epoll::new()?;
        epoll.add(signals.as_fd(), sys::INTEREST_READ, SIGNALS)?;
        let now = Instant::now();
        let workers = options
            .cpus
            .iter()
            .map(|_| WorkerRecord { pid: None, restart_at: None, restarts: Restarts::new(now) })
            .collect();
        Ok(Master {
            options: Cow::Borrowed(options),
            listeners: Some(listeners),
            service,
            config,
            report,
            workers,
            generation: 1,
            retiring: Vec::new(),
            epoll,
            signals,
            live: LiveFigures::new(SharedLive::new(options.cpus.len())?, options.stats_interval),
            phase: Phase::Serving,
            upgrade: None,
            outcome: Outcome::Gracefully,
            pid: std::process::id(),
        })
    }

    /// Starts every worker and supervises them until they have all stopped. In a
    /// forked child it becomes the worker and never returns.
    pub(crate) fn run(mut self) -> std::io::Result<Outcome> {
        for index in 0..self.workers.len() {
            if let Role::Worker(index) = self.start(index)? {
                self.become_worker(index);
            }
        }
        // A master this one upgrades waits for this to retire its own workers.
        if let Some(ready) = self.listeners.as_mut().and_then(|listeners| listeners.ready.take()) {
            upgrade::say_ready(ready);
        }
        let mut events = Vec::with_capacity(4);
        while !self.finished() {
            self.epoll.wait(&mut events, self.timeout())?;
            while let Some(signal) = self.signals.read()? {
                let role = match signal {
                    libc::SIGHUP => self.reload()?,
                    libc::SIGCHLD => self.reap().map(|()| Role::Master)?,
                    libc::SIGUSR1 => {
                        (self.report)(Event::Live(&self.live.read(&self.options.cpus, Instant::now())));
                        Role::Master
                    }
                    libc::SIGUSR2 => {
                        self.upgrade();
                        Role::Master
                    }
                    _ => {
                        self.stop(signal);
                        Role::Master
                    }
                };
                if let Role::Worker(index) = role {
                    self.become_worker(index);
                }
            }
            if events.iter().any(|event| event.token() == UPGRADE_READY) {
                self.on_upgrade_ready();
            }
            self.give_up_upgrade_if_late();
            if let Role::Worker(index) = self.restart_due() {
                self.become_worker(index);
            }
            if let Some(lives) = self.live.due(&self.options.cpus, Instant::now()) {
                (self.report)(Event::Stats(&lives));
            }
            if let Phase::Stopping { kill_at } = self.phase {
                if kill_at <= Instant::now() {
                    self.signal_all(libc::SIGKILL);
                    // Each is reaped on its SIGCHLD; not sent again at every wake until then.
                    self.phase = Phase::Stopping { kill_at: Instant::now() + KILL_GRACE };
                }
            }
        }
        Ok(self.outcome)
    }

    /// Stopping or upgraded, and every worker is gone.
    fn finished(&self) -> bool {
        self.phase != Phase::Serving
            && self.workers.iter().all(|worker| worker.pid.is_none())
            && self.retiring.is_empty()
    }

    /// Forks worker `index` of the current generation; says which side returns.
    fn start(&mut self, index: usize) -> std::io::Result<Role> {
        self.live.shared().clear(index);
        let (worker, cpu) = (&mut self.workers[index], self.options.cpus[index]);
        worker.restart_at = None;
        match sys::fork()? {
            Forked::Child => Ok(Role::Worker(index)),
            Forked::Parent(pid) => {
                worker.pid = Some(pid);
                worker.restarts.started(Instant::now());
                (self.report)(Event::Started { index, pid, cpu, generation: self.generation });
                Ok(Role::Master)
            }
        }
    }

    /// In the child of a fork: closes what belongs to the master (its epoll, the
    /// other workers' listeners, an upgrade's pipe) and runs as worker `index`, on
    /// the inherited signalfd.
    fn become_worker(self, index: usize) -> ! {
        let job =
            Assignment { index, master_pid: self.pid, options: &self.options, shared: self.live.shared() };
        let Some(listener) = self.listeners.as_ref().and_then(|l| l.for_worker(index).try_clone().ok())
        else {
            std::process::exit(1)
        };
        drop((self.listeners, self.epoll, self.upgrade));
        // After a fork a signalfd reads the signals of the process that reads it.
        let status = child::run(&job, listener, self.signals, &self.service, &self.config, &self.report);
        std::process::exit(status)
    }

    fn reap(&mut self) -> std::io::Result<()> {
        while let Some((pid, exit)) = sys::reap_child()? {
            if let Some(at) = self.retiring.iter().position(|&(p, _)| p == pid) {
                self.retiring.swap_remove(at);
                continue;
            }
            if self.upgrade.as_ref().is_some_and(|pending| pending.pid == pid) {
                self.upgrade = None;
                let why = format!("the new master {exit} before it was ready");
                (self.report)(Event::UpgradeFailed(std::io::Error::other(why)));
                continue;
            }
            let Some(index) = self.workers.iter().position(|worker| worker.pid == Some(pid)) else {
                continue;
            };
            self.workers[index].pid = None;
            match self.phase {
                Phase::Serving => self.on_death(index, exit),
                Phase::Upgraded => {}
                Phase::Stopping { .. } => {
                    if exit != Exit::Code(0) && self.outcome == Outcome::Gracefully {
                        self.outcome = Outcome::Unclean { index, exit };
                        (self.report)(Event::Stopping(&self.outcome));
                    }
                }
            }
        }
        Ok(())
    }

    /// Schedules the restart of a worker that died unexpectedly, or gives up, as
    /// [`Restarts`] decides.
    fn on_death(&mut self, index: usize, exit: Exit) {
        let now = Instant::now();
        let (worker, cpu) = (&mut self.workers[index], self.options.cpus[index]);
        match worker.restarts.died(exit, now) {
            Decision::GiveUp => {
                self.outcome = Outcome::GaveUp { index, cpu, last: exit };
                (self.report)(Event::Stopping(&self.outcome));
                self.stop(libc::SIGTERM);
            }
            Decision::RestartIn(restart_in) => {
                worker.restart_at = Some(now + restart_in);
                (self.report)(Event::Died { index, cpu, exit, restart_in });
            }
        }
    }

    /// Restarts the workers whose back-off is over. A fork that fails is tried again
    /// later: one failure must not take down the workers that run.
    fn restart_due(&mut self) -> Role {
        let now = Instant::now();
        for index in 0..self.workers.len() {
            if self.phase == Phase::Serving && self.workers[index].restart_at.is_some_and(|at| at <= now) {
                match self.start(index) {
                    Ok(Role::Master) => {}
                    Ok(role @ Role::Worker(_)) => return role,
                    Err(error) => {
                        self.workers[index].restart_at = Some(now + MAX_BACKOFF);
                        (self.report)(Event::RestartFailed { index, error, retry_in: MAX_BACKOFF });
                    }
                }
            }
        }
        Role::Master
    }

    /// SIGHUP: loads the configuration again (and the TLS certificate and key)
    /// and starts a new generation of workers on the same listeners; the old one
    /// retires (drains, handing the listeners over). A configuration or a
    /// certificate that cannot be loaded leaves the workers as they are.
    fn reload(&mut self) -> std::io::Result<Role> {
        if self.phase != Phase::Serving {
            return Ok(Role::Master);
        }
        // Both loaded before either is taken: a reload that fails changes nothing.
        #[cfg(feature = "tls")]
        let renewed = match self.options.tls.as_ref().map(crate::tls::ServerTls::reloaded).transpose() {
            Ok(renewed) => renewed,
            Err(error) => {
                (self.report)(Event::ReloadFailed(std::io::Error::other(error)));
                return Ok(Role::Master);
            }
        };
        match self.service.load() {
            Ok(config) => self.config = config,
            Err(error) => {
                (self.report)(Event::ReloadFailed(error));
                return Ok(Role::Master);
            }
        }
        #[cfg(feature = "tls")]
        if renewed.is_some() {
            self.options.to_mut().tls = renewed;
        }
        self.generation += 1;
        (self.report)(Event::Reloading { generation: self.generation });
        for index in 0..self.workers.len() {
            let old = self.workers[index].pid.take();
            let role = self.start(index)?;
            if let Role::Worker(_) = role {
                return Ok(role);
            }
            if let Some(pid) = old {
                self.retire(pid, index);
            }
        }
        Ok(Role::Master)
    }

    fn retire(&mut self, pid: libc::pid_t, index: usize) {
        self.retiring.push((pid, index));
        // A worker that exited already is reaped on the coming SIGCHLD.
        let _ = sys::kill(pid, libc::SIGHUP);
    }

    /// SIGUSR2: executes the program on disk with the listeners; once it says it
    /// is ready, this master retires its workers and exits.
    fn upgrade(&mut self) {
        if let Some(pending) = &self.upgrade {
            let why = format!(
                "an upgrade is under way (new master pid {}, given up {} s after it started): this SIGUSR2 is ignored",
                pending.pid,
                upgrade::READY_TIMEOUT.as_secs()
            );
            return (self.report)(Event::UpgradeFailed(std::io::Error::other(why)));
        }
        if self.phase != Phase::Serving {
            return;
        }
        let Some(listeners) = self.listeners.as_ref() else { return };
        match upgrade::start(listeners, &self.handed()) {
            Ok(pending) => {
                let registered = self.epoll.add(pending.ready.as_fd(), sys::INTEREST_READ, UPGRADE_READY);
                match registered {
                    Ok(()) => {
                        (self.report)(Event::Upgrading { pid: pending.pid });
                        self.upgrade = Some(pending);
                    }
                    Err(error) => (self.report)(Event::UpgradeFailed(error)),
                }
            }
            Err(error) => (self.report)(Event::UpgradeFailed(error)),
        }
    }

    /// What a new master goes on from: the TLS ticket keys, if the workers seal
    /// tickets.
    fn handed(&self) -> Vec<u8> {
        #[cfg(feature = "tls")]
        if let Some(keys) = self.options.tls.as_ref().and_then(crate::tls::ServerTls::ticket_keys) {
            return keys;
        }
        Vec::new()
    }

    /// A new master that has not said it is ready by its deadline is killed (and
    /// reaped on its SIGCHLD), and the upgrade said to have failed: this master goes
    /// on, and a later SIGUSR2 starts another.
    fn give_up_upgrade_if_late(&mut self) {
        let Some(pending) = self.upgrade.take_if(|pending| pending.deadline <= Instant::now()) else {
            return;
        };
        let _ = self.epoll.delete(pending.ready.as_fd());
        let _ = sys::kill(pending.pid, libc::SIGKILL);
        let why = format!(
            "the new master (pid {}) did not say it was ready within {} s: killed",
            pending.pid,
            upgrade::READY_TIMEOUT.as_secs()
        );
        (self.report)(Event::UpgradeFailed(std::io::Error::other(why)));
    }

    /// The new master said it is ready, or closed its end without a word: then it
    /// exited, and is said to have failed, with its status, when it is reaped (or,
    /// still running, is given up at its deadline).
    fn on_upgrade_ready(&mut self) {
        let Some(pending) = self.upgrade.take() else { return };
        let ready = matches!((&pending.ready).read(&mut [0u8]), Ok(1));
        let _ = self.epoll.delete(pending.ready.as_fd());
        if !ready {
            self.upgrade = Some(pending);
            return;
        }
        (self.report)(Event::Upgraded);
        self.phase = Phase::Upgraded;
        self.outcome = Outcome::Upgraded;
        for index in 0..self.workers.len() {
            self.workers[index].restart_at = None;
            if let Some(pid) = self.workers[index].pid.take() {
                self.retire(pid, index);
            }
        }
        self.listeners = None;
    }

    /// A first SIGTERM, SIGINT or SIGQUIT starts a graceful stop of every worker: the
    /// listeners take no new connection, the master closes its copies, and the
    /// workers close theirs once they served their queue; a SIGINT during one stops
    /// them at once.
    fn stop(&mut self, signal: libc::c_int) {
        if !matches!(signal, libc::SIGTERM | libc::SIGINT | libc::SIGQUIT) {
            return;
        }
        if let Phase::Stopping { .. } = self.phase {
            if signal == libc::SIGINT {
                self.outcome = Outcome::AtOnce;
                self.signal_all(libc::SIGINT);
            }
            return;
        }
        let grace = self.options.shutdown_timeout.saturating_add(KILL_GRACE);
        let now = Instant::now();
        self.phase = Phase::Stopping { kill_at: now.checked_add(grace).unwrap_or_else(|| far_future(now)) };
        if let Some(listeners) = self.listeners.take() {
            listeners.refuse_new_connections();
        }
        for worker in &mut self.workers {
            worker.restart_at = None;
        }
        self.signal_all(libc::SIGTERM);
    }

    fn signal_all(&self, signal: libc::c_int) {
        let current = self.workers.iter().filter_map(|worker| worker.pid);
        for pid in current.chain(self.retiring.iter().map(|&(pid, _)| pid)) {
            // A worker that exited already is reaped on the coming SIGCHLD.
            let _ = sys::kill(pid, signal);
        }
    }

    /// How long until the next restart, kill or live report is due; `None` when none is.
    fn timeout(&self) -> Option<Duration> {
        let restarts = self.workers.iter().filter_map(|worker| worker.restart_at);
        let kill = match self.phase {
            Phase::Stopping { kill_at } => Some(kill_at),
            _ => None,
        };
        let upgrade = self.upgrade.as_ref().map(|pending| pending.deadline);
        let next = restarts.chain(kill).chain(upgrade).chain(self.live.next()).min();
        next.map(|at| at.saturating_duration_since(Instant::now()))
    }
}
