//! Processes, not threads: a master binds one `SO_REUSEPORT` listener per worker
//! (or one Unix socket that every worker accepts from, its file removed when the
//! master exits, unless an upgrade handed it over),
//! forks one worker process per CPU, each pinned to its CPU and running one loop, and
//! supervises them: restarts, reloads, binary upgrades, graceful stops. Any
//! [`Service`] can be served this way.
//!
//! The library prints nothing: what happens is reported to the caller's closure as
//! an [`Event`], in the master or (for its own end) in a worker, and [`run`] returns
//! how the workers stopped or a typed [`Error`].
//!
//! Signals, as nginx's: TERM, INT and QUIT stop gracefully (a second INT stops at
//! once); HUP reloads (the service's configuration is loaded again and a new
//! generation of workers takes over the same listeners while the old one drains);
//! USR2 upgrades the binary (the program on disk is executed with the listeners,
//! and this master retires once the new one is ready); USR1 reports every worker's
//! live figures.

mod child;
mod cpus;
mod error;
mod event;
mod listeners;
mod live;
mod master;
mod options;
mod restart;
mod service;
mod upgrade;

pub use cpus::{allowed_cpus, parse_cpu_list, plan};
pub use error::{Error, WorkerError};
pub use event::{Event, Outcome};
pub use live::{Live, WorkerLive};
pub use options::{somaxconn, Options, Pinning, PortSharing, Scheduling, Steering};
pub use service::Service;

use std::borrow::Cow;

use crate::sys;
pub use crate::sys::Exit;

/// Opens the listeners (or takes the ones passed by systemd or an upgrading master),
/// loads the service, forks the workers, and supervises them until they stop;
/// `report` hears of everything that happens, in the master and in the workers.
///
/// The master forks, so it must be the only thread of its process (a fork copies
/// the calling thread alone, and a lock another thread held would stay locked in
/// the child for ever): with more than one, `run` returns [`Error::Threaded`].
///
/// ```no_run
/// use std::time::Duration;
/// use percore::http::{Hello, HelloConfig};
/// use percore::listen::Opening;
/// use percore::worker::{self, Event, Options};
///
/// let options = Options {
///     cpus: worker::plan(&worker::allowed_cpus(), None, Some(2))?, // two workers
///     shutdown_timeout: Duration::from_secs(30),
///     ..Options::new(([0, 0, 0, 0], 8080).into(), Opening::ClientSpeaksFirst)
/// };
/// let config = HelloConfig::default();
/// let hello = || Ok(Hello::new(&config));
/// let stopped = worker::run(&options, hello, |event: Event<'_>| {
///     if let Event::Listening(addr) = event {
///         println!("listening on {addr}");
///     }
/// })?;
/// println!("{stopped}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn run<S: Service>(options: &Options, service: S, report: impl Fn(Event<'_>)) -> Result<Outcome, Error> {
    if options.cpus.is_empty() {
        return Err(Error::NoWorkers);
    }
    let threads = sys::thread_count().map_err(Error::Setup)?;
    if threads > 1 {
        return Err(Error::Threaded { threads });
    }
    // Blocked before anything is said: a signal sent once `Listening` is reported
    // must reach the signalfd, not take its default action (HUP's is to terminate).
    let signals = sys::SignalFd::new().map_err(Error::Setup)?;
    let mut listeners = listeners::Listeners::open(options)?;
    let socket_file = listeners.socket_file.take();
    let handed = upgrade::take_handed(listeners.handed.take());
    let outcome = supervise(&with_handed(options, &handed), listeners, signals, service, report);
    // Only the master returns here (a worker exits in `Master::run`). A master that
    // handed its listener over to a new one leaves the file to it.
    if !matches!(outcome, Ok(Outcome::Upgraded)) {
        if let Some(file) = socket_file {
            file.remove();
        }
    }
    outcome
}

/// `options` with what a master this one upgrades handed over: its TLS ticket
/// keys, so that the tickets its workers sent resume on this one's.
#[cfg_attr(not(feature = "tls"), allow(unused_variables))]
fn with_handed<'a>(options: &'a Options, handed: &[u8]) -> Cow<'a, Options> {
    #[cfg(feature = "tls")]
    if let (Some(tls), false) = (&options.tls, handed.is_empty()) {
        return Cow::Owned(Options { tls: Some(tls.with_ticket_keys(handed)), ..options.clone() });
    }
    Cow::Borrowed(options)
}

/// Loads the service, reports the address, and runs the master on `listeners`.
fn supervise<S: Service>(
    options: &Options,
    listeners: listeners::Listeners,
    signals: sys::SignalFd,
    service: S,
    report: impl Fn(Event<'_>),
) -> Result<Outcome, Error> {
    let local = listeners.local_addr().map_err(Error::Setup)?;
    let config = service.load().map_err(Error::Load)?;
    report(Event::Listening(local));
    let master =
        master::Master::new(options, listeners, signals, service, config, report).map_err(Error::Setup)?;
    master.run().map_err(Error::Master)
}

/// Descriptors a worker holds beside its connections: listener, epoll, signalfd,
/// timerfd, stdio, the reserve for `EMFILE`.
pub const OTHER_FDS: u64 = 16;

/// Raises this process's open-file limit to its hard limit (workers inherit it) and
/// returns the new limit; `None` when it cannot be read.
pub fn raise_open_file_limit() -> Option<u64> {
    sys::raise_nofile_limit().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listen::Opening;
    use crate::reactor::Unused;

    #[test]
    fn run_refuses_a_process_of_several_threads() {
        // The test harness runs this on a thread of its own: two at least.
        let options = Options::new(([127, 0, 0, 1], 0).into(), Opening::ClientSpeaksFirst);
        match run(&options, || Ok(Unused), |_| {}) {
            Err(Error::Threaded { threads }) => assert!(threads > 1, "{threads}"),
            other => panic!("{other:?}"),
        }
    }

    /// The soft and hard open-file limits, from /proc.
    fn open_file_limits() -> (String, String) {
        let limits = std::fs::read_to_string("/proc/self/limits").expect("/proc/self/limits");
        let line = limits.lines().find(|line| line.starts_with("Max open files")).expect("its line");
        let mut words = line["Max open files".len()..].split_whitespace().map(str::to_owned);
        (words.next().expect("soft"), words.next().expect("hard"))
    }

    #[test]
    fn the_open_file_limit_is_raised_to_the_hard_one_and_said() {
        let raised = raise_open_file_limit().expect("a limit");
        let (soft, hard) = open_file_limits();
        assert_eq!(soft, hard);
        let expected = if soft == "unlimited" { u64::MAX } else { soft.parse().expect("a number") };
        assert_eq!(raised, expected);
    }

    #[test]
    fn somaxconn_is_read_from_the_kernel() {
        let text = std::fs::read_to_string("/proc/sys/net/core/somaxconn").expect("readable here");
        assert_eq!(somaxconn().map(|n| n.to_string()), Some(text.trim().to_owned()));
    }
}
