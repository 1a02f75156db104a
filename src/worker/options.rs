//! [`Options`]: how to run the workers, and the choices each option has.

use std::time::Duration;

use super::cpus::allowed_cpus;
use crate::listen::{Address, ListenOptions, Opening};
use crate::reactor::Config;

/// How to run the workers. [`Options::new`] gives what `percore serve` does by
/// default, for an address and a protocol's first speaker; change what differs with
/// struct update syntax:
///
/// ```no_run
/// use percore::listen::Opening;
/// use percore::reactor::{Flow, Io, Protocol, Verdict};
/// use percore::worker::{self, Options, PortSharing};
///
/// /// Greets each connection, and closes it.
/// struct Greeter;
/// impl Protocol for Greeter {
///     type Conn = ();
///     fn on_open(&mut self, _: &mut (), io: &mut Io<'_>) -> Flow {
///         io.write(b"220 hello\r\n");
///         Flow::Close
///     }
///     fn on_data(&mut self, _: &mut (), input: &[u8], _: &mut Io<'_>) -> Verdict {
///         Verdict::close(input.len())
///     }
/// }
///
/// // The server speaks first; the port is shared with the sockets already on it.
/// let addr = ([127, 0, 0, 1], 2525).into();
/// let options = Options { port_sharing: PortSharing::Join, ..Options::new(addr, Opening::ServerSpeaksFirst) };
/// worker::run(&options, || Ok(Greeter), |_event| {})?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Address all workers listen on: an IP address (a listener per worker, in one
    /// `SO_REUSEPORT` group) or a Unix socket's path (one listener for all; its file
    /// is removed when the master exits, unless an upgrade handed it over).
    pub addr: Address,
    /// The CPU of each worker, one entry per worker (see [`plan`](super::plan)).
    pub cpus: Vec<usize>,
    /// Whether each worker is pinned to its CPU.
    pub pinning: Pinning,
    /// The workers' scheduling policy.
    pub scheduling: Scheduling,
    /// Each listener's options; its backlog is capped at `net.core.somaxconn`.
    pub listen: ListenOptions,
    /// Whether the IP address may already be held by other sockets (a Unix
    /// socket's path a server listens on is always refused).
    pub port_sharing: PortSharing,
    /// How the kernel picks a worker for a new connection.
    pub steering: Steering,
    /// How long a graceful stop (or a retiring generation) waits for open
    /// connections.
    pub shutdown_timeout: Duration,
    /// How long a draining worker keeps an idle keep-alive connection, so that a
    /// client sending on it right then gets an answer, not a close.
    pub drain_grace: Duration,
    /// How often to report every worker's live figures ([`Event::Stats`](super::Event::Stats)); `None`:
    /// never (SIGUSR1 still asks once).
    pub stats_interval: Option<Duration>,
    /// Limits of each worker's loop.
    pub reactor: Config,
    /// What each worker's connections speak TLS with, if they do
    /// ([`Reactor::set_tls`](crate::reactor::Reactor::set_tls)).
    #[cfg(feature = "tls")]
    pub tls: Option<crate::tls::ServerTls>,
}

impl Options {
    /// Workers listening on `addr` for a protocol whose first speaker is `opening`,
    /// with `percore serve`'s defaults: one worker on each CPU this process may run
    /// on ([`allowed_cpus`], as `taskset` sets it), each pinned to its CPU, under
    /// the default policy (`SCHED_OTHER`); a backlog of `net.core.somaxconn` (the most the kernel allows;
    /// 4096 if it cannot be read); the address held by no other socket; connections
    /// spread by the kernel's hash; a graceful stop waiting 10 s for open
    /// connections, and idle ones kept 1 s; no periodic report; the loop's
    /// [`Config::default`]. Its `max_connections` is not fitted to the open-file
    /// limit: see [`raise_open_file_limit`](super::raise_open_file_limit) and [`OTHER_FDS`](super::OTHER_FDS).
    pub fn new(addr: Address, opening: Opening) -> Options {
        let backlog = somaxconn().unwrap_or(ListenOptions::default().backlog);
        Options {
            addr,
            cpus: allowed_cpus(),
            pinning: Pinning::Pinned,
            scheduling: Scheduling::Normal,
            listen: ListenOptions { backlog, opening },
            port_sharing: PortSharing::Exclusive,
            steering: Steering::Hash,
            shutdown_timeout: Duration::from_secs(10),
            drain_grace: Duration::from_secs(1),
            stats_interval: None,
            reactor: Config::default(),
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

impl Default for Options {
    /// [`Options::new`] on `0.0.0.0:8080`, the client speaking first, as `percore
    /// serve` listens by default.
    fn default() -> Options {
        Options::new(([0, 0, 0, 0], 8080).into(), Opening::ClientSpeaksFirst)
    }
}

/// Whether a worker runs on its CPU alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pinning {
    /// Each worker is pinned to its CPU (`sched_setaffinity`).
    Pinned,
    /// Workers run where the scheduler puts them, within the inherited mask.
    Unpinned,
}

/// The workers' scheduling policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduling {
    /// `SCHED_OTHER`, the default Linux policy: a worker woken by a request
    /// preempts a busy task sharing its CPU. The default.
    Normal,
    /// `SCHED_BATCH`: a worker woken by new requests does not preempt another task
    /// on its CPU but runs when that task's slice ends or it blocks, and then answers
    /// a batch of requests instead of one. Beside a busy task a request waits for
    /// the rest of its slice (milliseconds); on CPUs of its own, or beside a load
    /// generator, it measured the same as `Normal`.
    Batch,
}

/// Whether the listening address may be shared with sockets of other processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortSharing {
    /// Another socket on the address is an error ([`Error::AddressInUse`](super::Error::AddressInUse)): without
    /// this check `SO_REUSEPORT` would share the port with any process of the same
    /// user, and split its connections.
    Exclusive,
    /// Joins the sockets already there, as `SO_REUSEPORT` allows.
    Join,
}

/// How the kernel picks the listener, and so the worker, for a new connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steering {
    /// By a hash of the connection's addresses and ports (the kernel's default).
    Hash,
    /// To the worker on the CPU that received the connection, by a classic BPF
    /// program on the `SO_REUSEPORT` group: for a NIC whose queues are pinned to the
    /// workers' CPUs, the connection then stays on one CPU's caches.
    Cpu,
}

/// `net.core.somaxconn`, the kernel's cap on every listener's backlog, if readable.
pub fn somaxconn() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn").ok()?.trim().parse().ok()
}
