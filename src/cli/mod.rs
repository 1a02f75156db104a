//! The command line of a server on the loop (behind the default `cli` feature,
//! with clap): the flags `percore serve` and the examples share, their defaults
//! fitted to the machine, and a `main` that runs the workers and prints, one line
//! each, what they report. This module is the program's side: it prints and picks
//! exit statuses; the rest of the library reports to its caller and prints nothing.

mod print;

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::http::Counts;
use crate::listen::{ListenOptions, Opening};
use crate::reactor::{Config, Protocol};
use crate::worker::{self, Options, Pinning, Scheduling, Stopped};
pub use print::say;

/// Connections per worker when `--max-conns` is not given, if the open-file limit
/// allows them.
const DEFAULT_MAX_CONNS: u64 = 65536;

/// Where to listen, on which CPUs, and the loop's limits and timeouts. Flatten it
/// into a clap parser (`#[command(flatten)]`), or let [`main`] parse it alone.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct ServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0", value_name = "ADDR")]
    pub bind: IpAddr,

    /// Port to listen on; 0 picks a free one (printed on stderr at start).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,

    /// CPUs to run workers on, in taskset's syntax (0-3,6) [default: every CPU this
    /// process may run on, as taskset sets it].
    #[arg(long, value_name = "LIST", value_parser = clap::value_parser!(CpuList))]
    pub cpus: Option<CpuList>,

    /// Number of workers, on the first CPUs of the set, wrapping round when more
    /// than CPUs [default: one per CPU].
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,

    /// Do not pin workers to their CPUs.
    #[arg(long)]
    pub no_pin: bool,

    /// Scheduling policy of the workers. `batch` (SCHED_BATCH): a worker woken by
    /// new requests does not preempt another task on its CPU (a load generator
    /// sharing it) but runs when that task blocks, and then answers a batch of
    /// requests instead of one; on CPUs of its own it changes nothing. `normal`:
    /// the default Linux policy.
    #[arg(long, value_enum, default_value_t = Sched::Batch)]
    pub sched: Sched,

    /// Accept queue length of each worker's listener [default: net.core.somaxconn,
    /// the most the kernel allows].
    #[arg(long, value_name = "N")]
    pub backlog: Option<u32>,

    /// Seconds a graceful stop (SIGTERM, SIGINT) waits for open connections.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub shutdown_timeout: u64,

    /// Connections open at once per worker; at the limit a worker stops accepting
    /// until one closes [default: 65536, or fewer if the open-file limit says so].
    #[arg(long, value_name = "N")]
    pub max_conns: Option<u64>,

    /// Seconds a request head may take to arrive, however slowly it trickles in,
    /// and the longest a body may stall; then the connection is closed without an
    /// answer. 0: no limit.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub header_timeout: u32,

    /// Seconds an idle keep-alive connection stays open. 0: no limit.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub keepalive_timeout: u32,

    /// Seconds a client may leave our output unread before it is dropped. 0: no limit.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub send_timeout: u32,
}

/// The workers' scheduling policy, as a flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Sched {
    /// `SCHED_OTHER`, the default Linux policy.
    Normal,
    /// `SCHED_BATCH`.
    Batch,
}

/// A CPU list as given to `--cpus` (a type of its own, which clap parses as one
/// value, where it would take a `Vec` for a repeated flag).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl std::str::FromStr for CpuList {
    type Err = String;
    fn from_str(list: &str) -> Result<CpuList, String> {
        worker::parse_cpu_list(list).map(CpuList)
    }
}

impl ServerArgs {
    /// The worker options these flags ask for, for a protocol whose first speaker
    /// is `opening`. Raises the open-file limit. A default that the machine cannot
    /// give (the backlog above `somaxconn`, connections above the open-file limit)
    /// is fitted to it quietly; a value the user asked for is fitted too, with a
    /// warning. A CPU outside the allowed set is a usage error: exit status 2.
    pub fn options(&self, opening: Opening) -> Options {
        let cpus = plan_or_exit(self.cpus.as_ref(), self.workers);
        Options {
            addr: SocketAddr::new(self.bind, self.port),
            cpus,
            pinning: if self.no_pin { Pinning::Unpinned } else { Pinning::Pinned },
            scheduling: match self.sched {
                Sched::Normal => Scheduling::Normal,
                Sched::Batch => Scheduling::Batch,
            },
            listen: ListenOptions { backlog: self.backlog(), opening },
            shutdown_timeout: Duration::from_secs(self.shutdown_timeout),
            reactor: Config {
                max_connections: usize::try_from(self.max_connections()).unwrap_or(usize::MAX),
                request_timeout: self.header_timeout,
                idle_timeout: self.keepalive_timeout,
                send_timeout: self.send_timeout,
                ..Config::default()
            },
        }
    }

    /// `--backlog`, or `somaxconn`; a larger one asked for is capped, with a warning.
    fn backlog(&self) -> u32 {
        let Some(somaxconn) = worker::somaxconn() else { return self.backlog.unwrap_or(4096) };
        match self.backlog {
            None => somaxconn,
            Some(asked) if asked > somaxconn => {
                say(format_args!(
                    "percore: warning: --backlog {asked} is above net.core.somaxconn ({somaxconn}), using \
                     {somaxconn}; see sysctl.conf"
                ));
                somaxconn
            }
            Some(asked) => asked,
        }
    }

    /// `--max-conns`, or 65536, within what the open-file limit allows (raised to
    /// its hard limit first); a larger one asked for is capped, with a warning.
    fn max_connections(&self) -> u64 {
        // Unknown (getrlimit failed): assume no limit rather than cap connections at 0.
        let limit = worker::raise_open_file_limit().unwrap_or(u64::MAX);
        let allowed = limit.saturating_sub(worker::OTHER_FDS).max(1);
        let asked = self.max_conns.unwrap_or(DEFAULT_MAX_CONNS);
        if self.max_conns.is_some() && asked > allowed {
            let needed = asked.saturating_add(worker::OTHER_FDS);
            say(format_args!(
                "percore: warning: open-file limit {limit} is below the {needed} that --max-conns {asked} needs \
                 per worker; using {allowed}; raise it with ulimit -n (see sysctl.conf)"
            ));
        }
        asked.min(allowed)
    }
}

impl Stopped {
    /// The exit status for a server that stopped this way: 0 after a graceful stop,
    /// 130 (as after Ctrl-C) when a second SIGINT cut it short, 1 when a worker kept
    /// dying or did not stop cleanly.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Stopped::Gracefully => ExitCode::SUCCESS,
            Stopped::AtOnce => ExitCode::from(130),
            Stopped::GaveUp { .. } | Stopped::Unclean { .. } => ExitCode::FAILURE,
        }
    }
}

/// The CPU of each of `count` workers or threads (see [`worker::plan`]), from `cpus`
/// or the allowed set; a CPU outside the allowed set is a usage error: exit status 2.
pub fn plan_or_exit(cpus: Option<&CpuList>, count: Option<usize>) -> Vec<usize> {
    worker::plan(&worker::allowed_cpus(), cpus.map(|list| &list.0[..]), count).unwrap_or_else(|message| {
        clap::Error::raw(clap::error::ErrorKind::InvalidValue, message + "\n").exit()
    })
}

/// Runs the workers with `options` and prints what they report; returns the exit
/// status. `counts` says what a worker's protocol counted, for its last line.
pub fn serve<P: Protocol>(
    options: &Options,
    make_protocol: impl Fn() -> std::io::Result<P>,
    counts: impl Fn(&P) -> Option<Counts>,
) -> ExitCode {
    match worker::run(options, make_protocol, |event| print::event(&event, &counts)) {
        Ok(stopped) => stopped.exit_code(),
        Err(error) => {
            say(format_args!("{}: {error}", program_name()));
            ExitCode::FAILURE
        }
    }
}

/// The flags of [`ServerArgs`] alone, for a program that has no others.
#[derive(Debug, Parser)]
#[command(about = "A server on percore's loop: one pinned worker process per CPU")]
struct Standalone {
    #[command(flatten)]
    server: ServerArgs,
}

/// A whole server's `main`: parses [`ServerArgs`] from the command line, runs the
/// workers (each building its protocol with `make_protocol`), prints what they
/// report, and returns the exit status.
///
/// ```no_run
/// use percore::listen::Opening;
/// use percore::reactor::{Io, Protocol, Verdict};
///
/// struct Echo;
/// impl Protocol for Echo {
///     type Conn = ();
///     fn on_data(&mut self, _: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
///         io.write(input);
///         Verdict::keep(input.len())
///     }
/// }
///
/// fn main() -> std::process::ExitCode {
///     percore::cli::main(Opening::ClientSpeaksFirst, || Ok(Echo))
/// }
/// ```
pub fn main<P: Protocol>(opening: Opening, make_protocol: impl Fn() -> std::io::Result<P>) -> ExitCode {
    let args = Standalone::parse();
    serve(&args.server.options(opening), make_protocol, |_| None)
}

fn program_name() -> String {
    let arg0 = std::env::args().next().unwrap_or_default();
    std::path::Path::new(&arg0).file_name().map_or(arg0.clone(), |name| name.to_string_lossy().into_owned())
}
