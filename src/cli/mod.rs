//! The command-line flags every server on the loop shares, so that `percore serve`
//! and a server built on the library (the examples) take the same ones.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use super::{allowed_cpus, parse_cpu_list, plan, raise_fd_limit, run, Options, Stopped};
use crate::reactor::{Config, Protocol};

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

    /// Accept queue length of each worker's listener (capped at net.core.somaxconn).
    #[arg(long, value_name = "N", default_value_t = 65535)]
    pub backlog: u32,

    /// Seconds a graceful stop (SIGTERM, SIGINT) waits for open connections.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub shutdown_timeout: u64,

    /// Connections open at once per worker (capped by the open-file limit); at the
    /// limit a worker stops accepting until one closes.
    #[arg(long, value_name = "N", default_value_t = 65536)]
    pub max_conns: u64,

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

/// The workers' scheduling policy.
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
        parse_cpu_list(list).map(CpuList)
    }
}

impl ServerArgs {
    /// The worker options these flags ask for. Raises the open-file limit (and caps
    /// `--max-conns` by it); a CPU outside the allowed set is a usage error that
    /// exits with status 2, as clap's own errors do.
    pub fn options(&self, client_speaks_first: bool) -> Options {
        let cpus = plan_or_exit(self.cpus.as_ref(), self.workers);
        let max_connections = raise_fd_limit(self.max_conns);
        Options {
            addr: SocketAddr::new(self.bind, self.port),
            cpus,
            pin: !self.no_pin,
            batch_scheduling: self.sched == Sched::Batch,
            backlog: self.backlog,
            shutdown_timeout: Duration::from_secs(self.shutdown_timeout),
            client_speaks_first,
            reactor: Config {
                max_connections: usize::try_from(max_connections).unwrap_or(usize::MAX),
                request_timeout: self.header_timeout,
                idle_timeout: self.keepalive_timeout,
                send_timeout: self.send_timeout,
                ..Config::default()
            },
        }
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
            Stopped::GaveUp(_) | Stopped::Unclean(_) => ExitCode::FAILURE,
        }
    }
}

/// The CPU of each of `count` workers or threads (see [`plan`]), from `cpus` or the
/// allowed set; a CPU outside the allowed set is a usage error: exit status 2.
pub fn plan_or_exit(cpus: Option<&CpuList>, count: Option<usize>) -> Vec<usize> {
    plan(&allowed_cpus(), cpus.map(|list| &list.0[..]), count).unwrap_or_else(|message| {
        clap::Error::raw(clap::error::ErrorKind::InvalidValue, message + "\n").exit()
    })
}

/// The flags of [`ServerArgs`] alone, for a program that has no others.
#[derive(Debug, Parser)]
#[command(about = "A server on percore's loop: one pinned worker process per CPU")]
struct Standalone {
    #[command(flatten)]
    server: ServerArgs,
}

/// A whole server's `main`: parses [`ServerArgs`] from the command line, runs the
/// workers (each building its protocol with `make_protocol`), and returns the exit
/// status. `client_speaks_first`: see [`Options::client_speaks_first`].
///
/// ```no_run
/// use percore::reactor::{Protocol, Verdict};
///
/// struct Echo;
/// impl Protocol for Echo {
///     type Conn = ();
///     fn on_data(&mut self, _: &mut (), input: &[u8], out: &mut Vec<u8>) -> Verdict {
///         out.extend_from_slice(input);
///         Verdict::keep(input.len())
///     }
/// }
///
/// fn main() -> std::process::ExitCode {
///     percore::worker::main(true, || Ok(Echo))
/// }
/// ```
pub fn main<P: Protocol>(
    client_speaks_first: bool,
    make_protocol: impl Fn() -> std::io::Result<P>,
) -> ExitCode {
    let args = Standalone::parse();
    match run(&args.server.options(client_speaks_first), make_protocol) {
        Ok(stopped) => stopped.exit_code(),
        Err(message) => {
            say!("{}: {message}", program_name());
            ExitCode::FAILURE
        }
    }
}

fn program_name() -> String {
    let arg0 = std::env::args().next().unwrap_or_default();
    std::path::Path::new(&arg0).file_name().map_or(arg0.clone(), |name| name.to_string_lossy().into_owned())
}
