//! The command line of a server on the loop (behind the default `cli` feature,
//! with clap): the flags `percore serve` and the examples share, their defaults
//! fitted to the machine, and a `main` that runs the workers and prints, one line
//! each, what they report. This module is the program's side: it prints and picks
//! exit statuses; the rest of the library reports to its caller and prints nothing.

mod duration;
mod print;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::listen::{Address, ListenOptions, Opening};
use crate::reactor::{Config, Protocol};
use clap::builder::{PossibleValue, RangedI64ValueParser};

use crate::worker::{self, Options, Outcome, Pinning, PortSharing, Scheduling, Service, Steering};
pub use duration::{parse_duration, parse_timeout};
pub use print::say;

/// The port when `--port` is not given.
const DEFAULT_PORT: u16 = 8080;

/// Connections per worker when `--max-connections` is not given, if the open-file limit
/// allows them.
const DEFAULT_MAX_CONNS: u64 = 65536;

/// Where to listen, on which CPUs, and the loop's limits and timeouts. Flatten it
/// into a clap parser (`#[command(flatten)]`), or let [`main`] parse it alone.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct ServerArgs {
    /// Address to listen on: an IP address, or unix:PATH for a Unix socket (one
    /// that every worker accepts from; a stale socket file there is replaced, and
    /// the file is removed when the server stops).
    #[arg(long, default_value = "0.0.0.0", value_name = "ADDR", value_parser = clap::value_parser!(Bind))]
    pub bind: Bind,

    /// Port to listen on; 0 picks a free one (printed on stderr at start)
    /// [default: 8080]. Not with --bind unix:PATH.
    #[arg(long)]
    pub port: Option<u16>,

    /// CPUs to run workers on, in taskset's syntax (0-3,6) [default: every CPU this
    /// process may run on, as taskset sets it].
    #[arg(long, value_name = "LIST", value_parser = clap::value_parser!(CpuList))]
    pub cpus: Option<CpuList>,

    /// Number of workers, on the first CPUs of the set, wrapping round when more
    /// than CPUs [default: one per CPU].
    // Negative numbers reach the parser, which says what is wrong with them, rather
    // than clap's "unexpected argument '-1'".
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = RangedI64ValueParser::<usize>::new().range(1..))]
    pub workers: Option<usize>,

    /// Do not pin workers to their CPUs.
    #[arg(long)]
    pub no_pin: bool,

    /// Scheduling policy of the workers. `normal` (SCHED_OTHER, Linux's default):
    /// a worker woken by a request preempts a busy task sharing its CPU. `batch`
    /// (SCHED_BATCH): it waits for that task's time slice to end, then answers a
    /// batch. Measured here: the same CPU per response and latency on CPUs of its
    /// own or beside a load generator, but beside a busy task a median latency of
    /// 4 ms under batch against 0.06 ms: normal is the default.
    #[arg(long, value_enum, default_value_t = Scheduling::Normal)]
    pub sched: Scheduling,

    /// Accept queue length of each worker's listener [default: net.core.somaxconn,
    /// the most the kernel allows].
    #[arg(long, value_name = "N")]
    pub backlog: Option<u32>,

    /// How long a graceful stop (SIGTERM, SIGINT, SIGQUIT), or a generation retired
    /// by a reload or an upgrade, waits for open connections.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_timeout)]
    pub shutdown_timeout: Duration,

    /// How long a draining worker keeps an idle connection open, so that a client
    /// sending on it right then is answered (and, if the protocol says so, told to
    /// close) instead of closed under its feet.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_timeout)]
    pub drain_grace: Duration,

    /// Connections open at once per worker; at the limit a worker stops accepting
    /// until one closes [default: 65536, or fewer if the open-file limit says so].
    /// (The loop's max_connections.)
    #[arg(long, visible_alias = "max-conns", value_name = "N", value_parser = clap::value_parser!(u64).range(1..=MAX_CONNS))]
    pub max_connections: Option<u64>,

    /// Share the port with sockets already listening on it (SO_REUSEPORT, same
    /// user); without it, an address in use is an error.
    #[arg(long)]
    pub reuseport_join: bool,

    /// How the kernel picks a worker for a new connection. `hash` (the kernel's
    /// default): by its addresses and ports. `cpu`: the worker on the CPU that
    /// received it (a reuseport BPF program), for a NIC whose queues are pinned to
    /// the workers' CPUs; one worker per CPU, not with --bind unix:PATH.
    #[arg(long, value_enum, default_value_t = Steering::Hash)]
    pub steer: Steering,

    /// Print each worker's requests/s and open connections every SECS seconds, one
    /// line each time.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub stats: Option<u64>,

    /// How long a message (an HTTP request head) may take to arrive, however slowly
    /// it trickles in, and the most a body may fall behind --min-input-rate; then the
    /// connection is closed without an answer. 0: no limit. (The loop's
    /// message_timeout; for HTTP, nginx's client_header_timeout.)
    #[arg(long, visible_alias = "header-timeout", value_name = "DURATION", default_value = "10s", value_parser = parse_timeout)]
    pub message_timeout: Duration,

    /// Bytes per second a message the protocol is busy with (an HTTP request body)
    /// must keep arriving at, on average (each BYTES earn it a second, with
    /// --message-timeout of slack). 0: no minimum. (The loop's min_input_rate.)
    #[arg(long, visible_alias = "min-body-rate", value_name = "BYTES", default_value_t = 1024)]
    pub min_input_rate: u32,

    /// How long an idle connection (an HTTP keep-alive one, a relay's pair) stays
    /// open. 0: no limit. (The loop's idle_timeout; for HTTP, nginx's
    /// keepalive_timeout.)
    #[arg(long, visible_alias = "keepalive-timeout", value_name = "DURATION", default_value = "60s", value_parser = parse_timeout)]
    pub idle_timeout: Duration,

    /// How long a client may leave our output unread before it is dropped. 0: no
    /// limit.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_timeout)]
    pub send_timeout: Duration,

    /// Speak TLS (1.3 and 1.2) with the certificate chain of this PEM file, the
    /// server's certificate first; with --tls-key. Repeated, one for each group of
    /// names: a client gets the certificate whose subjectAltName has the name it
    /// asks for (SNI), the first for any other. All are read again at a reload
    /// (SIGHUP): a renewal.
    #[cfg(feature = "tls")]
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Vec<PathBuf>,

    /// The private key of --tls-cert's certificate, a PEM file (PKCS#8, SEC1 or
    /// PKCS#1); repeated as --tls-cert is, the Nth key for the Nth certificate.
    #[cfg(feature = "tls")]
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Vec<PathBuf>,

    /// How long a TLS handshake may take; then the connection is closed, unseen by
    /// the protocol. 0: no limit. (The loop's handshake_timeout; nginx holds one for
    /// its client_header_timeout, 60 s.)
    #[cfg(feature = "tls")]
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_timeout)]
    pub tls_handshake_timeout: Duration,

    /// Whether clients get TLS session tickets to resume with: sealed with keys
    /// every worker shares, and a reload's workers and an upgraded binary's after
    /// them (the keys step forward every 6 hours; a ticket resumes for 6 to 12).
    #[cfg(feature = "tls")]
    #[arg(long, value_name = "WHEN", default_value = "on")]
    pub tls_tickets: TlsTickets,
}

/// Whether a TLS server sends session tickets (`--tls-tickets`).
#[cfg(feature = "tls")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TlsTickets {
    /// One a connection; a client resumes with it on any worker
    On,
    /// None: every handshake is a full one
    Off,
}

/// Connections per worker at most: far above what one core serves, and far below
/// where counts would overflow.
const MAX_CONNS: u64 = 1 << 24;

// The worker's own enums are the flags' values: their names and one-line help here.
impl clap::ValueEnum for Steering {
    fn value_variants<'a>() -> &'a [Steering] {
        &[Steering::Hash, Steering::Cpu]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            Steering::Hash => {
                PossibleValue::new("hash").help("By a hash of the connection (the kernel's default)")
            }
            Steering::Cpu => PossibleValue::new("cpu").help("To the worker on the CPU that received it"),
        })
    }
}

impl clap::ValueEnum for Scheduling {
    fn value_variants<'a>() -> &'a [Scheduling] {
        &[Scheduling::Normal, Scheduling::Batch]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            Scheduling::Normal => {
                PossibleValue::new("normal").help("`SCHED_OTHER`, the default Linux policy")
            }
            Scheduling::Batch => PossibleValue::new("batch").help("`SCHED_BATCH`"),
        })
    }
}

/// What `--bind` names: an IP address, whose port is `--port`'s, or a Unix
/// socket's path (`unix:PATH`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bind {
    /// An IP address.
    Ip(IpAddr),
    /// A Unix socket's path.
    Unix(PathBuf),
}

impl std::str::FromStr for Bind {
    type Err = String;
    fn from_str(text: &str) -> Result<Bind, String> {
        match text.parse::<Address>() {
            Ok(Address::Unix(path)) => Ok(Bind::Unix(path)),
            _ => text
                .parse()
                .map(Bind::Ip)
                .map_err(|_| format!("`{text}` is neither an IP address nor unix:PATH")),
        }
    }
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
    /// warning. A CPU outside the allowed set, and a flag a Unix socket has no use
    /// for (`--port`, `--steer cpu`), are usage errors: exit status 2.
    pub fn options(&self, opening: Opening) -> Options {
        let addr = self.address().unwrap_or_else(|message| usage_error(message));
        let cpus = plan_or_exit(self.cpus.as_ref(), self.workers);
        Options {
            addr,
            cpus,
            pinning: if self.no_pin { Pinning::Unpinned } else { Pinning::Pinned },
            scheduling: self.sched,
            listen: ListenOptions { backlog: self.backlog(), opening },
            port_sharing: if self.reuseport_join { PortSharing::Join } else { PortSharing::Exclusive },
            steering: self.steer,
            shutdown_timeout: self.shutdown_timeout,
            drain_grace: self.drain_grace,
            stats_interval: self.stats.map(Duration::from_secs),
            reactor: Config {
                max_connections: usize::try_from(self.connection_limit()).unwrap_or(usize::MAX),
                message_timeout: timeout(self.message_timeout),
                min_input_rate: self.min_input_rate,
                idle_timeout: timeout(self.idle_timeout),
                send_timeout: timeout(self.send_timeout),
                #[cfg(feature = "tls")]
                handshake_timeout: timeout(self.tls_handshake_timeout),
                ..Config::default()
            },
            #[cfg(feature = "tls")]
            tls: self.tls(),
        }
    }

    /// The TLS of `--tls-cert` and `--tls-key`, if given. A file that cannot be
    /// read, a malformed PEM, a key that is not the certificate's: one line that
    /// names the file, and exit status 1, as for the other files a server reads. A
    /// certificate past its date: a warning (clients will refuse it). As many
    /// certificates as keys, or it is a usage error.
    #[cfg(feature = "tls")]
    fn tls(&self) -> Option<crate::tls::ServerTls> {
        let (certs, keys) = (&self.tls_cert, &self.tls_key);
        if certs.len() != keys.len() {
            let (c, k) = (certs.len(), keys.len());
            usage_error(format!(
                "--tls-cert is given {c} times and --tls-key {k}: a key for each certificate"
            ));
        }
        let mut pairs = certs.iter().zip(keys);
        let (cert, key) = pairs.next()?;
        let mut tls = crate::tls::ServerTls::from_pem_files(cert, key);
        for (cert, key) in pairs {
            tls = tls.and_then(|tls| tls.with_certificate(cert, key));
        }
        let tls = tls.unwrap_or_else(|error| {
            say(format_args!("{}: --tls-cert/--tls-key: {error}", program_name()));
            std::process::exit(1)
        });
        let tls = match self.tls_tickets {
            TlsTickets::On => tls,
            TlsTickets::Off => tls.without_tickets(),
        };
        for (path, end) in tls.not_after() {
            if end.is_some_and(|end| end < std::time::SystemTime::now()) {
                let path = path.display();
                say(format_args!("{}: warning: the certificate of {path} has expired", program_name()));
            }
        }
        Some(tls)
    }

    /// The address `--bind` and `--port` name; what a Unix socket cannot take is a
    /// usage error's message.
    fn address(&self) -> Result<Address, String> {
        match &self.bind {
            Bind::Ip(ip) => Ok(Address::Ip(SocketAddr::new(*ip, self.port.unwrap_or(DEFAULT_PORT)))),
            Bind::Unix(_) if self.port.is_some() => {
                Err("--port: a Unix socket (--bind unix:PATH) has no port".to_owned())
            }
            Bind::Unix(_) if self.steer == Steering::Cpu => {
                Err("--steer cpu: a Unix socket (--bind unix:PATH) has no SO_REUSEPORT group to steer"
                    .to_owned())
            }
            Bind::Unix(path) => Ok(Address::Unix(path.clone())),
        }
    }

    /// `--backlog`, or `somaxconn`; a larger one asked for is capped, with a warning.
    fn backlog(&self) -> u32 {
        let (backlog, warning) = fit_backlog(self.backlog, worker::somaxconn());
        if let Some(warning) = warning {
            say(format_args!("percore: warning: {warning}"));
        }
        backlog
    }

    /// `--max-connections`, or 65536 within what the open-file limit allows (raised to its
    /// hard limit first). A `--max-connections` given is honoured, with a warning when the
    /// limit is lower (as nginx does with worker_connections): at the limit a worker
    /// refuses the connection at the head of its queue rather than stalling.
    fn connection_limit(&self) -> u64 {
        // Unknown (getrlimit failed): assume no limit rather than cap connections at 0.
        let limit = worker::raise_open_file_limit().unwrap_or(u64::MAX);
        let (connections, warning) = fit_connections(self.max_connections, limit);
        if let Some(warning) = warning {
            say(format_args!("percore: warning: {warning}"));
        }
        connections
    }
}

/// The backlog for `asked` under the kernel's cap `somaxconn` (unknown: `None`), and
/// the warning to print when what was asked for is capped.
fn fit_backlog(asked: Option<u32>, somaxconn: Option<u32>) -> (u32, Option<String>) {
    let Some(somaxconn) = somaxconn else { return (asked.unwrap_or(4096), None) };
    match asked {
        None => (somaxconn, None),
        Some(asked) if asked > somaxconn => {
            let warning =
                format!("--backlog {asked} is above net.core.somaxconn ({somaxconn}), using {somaxconn}; see sysctl.conf");
            (somaxconn, Some(warning))
        }
        Some(asked) => (asked, None),
    }
}

/// The connections per worker for `asked` under the open-file limit `limit`, and the
/// warning to print when what was asked for is more than the limit allows.
fn fit_connections(asked: Option<u64>, limit: u64) -> (u64, Option<String>) {
    let allowed = limit.saturating_sub(worker::OTHER_FDS).max(1);
    let Some(asked) = asked else { return (DEFAULT_MAX_CONNS.min(allowed), None) };
    let warning = (asked > allowed).then(|| {
        let needed = asked.saturating_add(worker::OTHER_FDS);
        format!(
            "open-file limit {limit} is below the {needed} that --max-connections {asked} needs per worker; \
             raise it with ulimit -n (see sysctl.conf)"
        )
    });
    (asked, warning)
}

impl Outcome {
    /// The exit status for a server that stopped this way: 0 after a graceful stop,
    /// 130 (as after Ctrl-C) when a second SIGINT cut it short, 1 when a worker kept
    /// dying or did not stop cleanly.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Outcome::Gracefully | Outcome::Upgraded => ExitCode::SUCCESS,
            Outcome::AtOnce => ExitCode::from(130),
            Outcome::GaveUp { .. } | Outcome::Unclean { .. } => ExitCode::FAILURE,
        }
    }
}

/// The CPU of each of `count` workers or threads (see [`worker::plan`]), from `cpus`
/// or the allowed set; a CPU outside the allowed set is a usage error: exit status 2.
pub fn plan_or_exit(cpus: Option<&CpuList>, count: Option<usize>) -> Vec<usize> {
    worker::plan(&worker::allowed_cpus(), cpus.map(|list| &list.0[..]), count)
        .unwrap_or_else(|message| usage_error(message))
}

/// Says `message` as clap says a usage error, and exits with status 2.
fn usage_error(message: String) -> ! {
    clap::Error::raw(clap::error::ErrorKind::InvalidValue, message + "\n").exit()
}

/// Runs `service` on the workers with `options` and prints what they report;
/// returns the exit status. For a server with flags of its own beside
/// [`ServerArgs`] (a closure that builds the protocol is a [`Service`]):
///
/// ```no_run
/// // The program's own dependency (percore does not re-export clap, whose derive
/// // names the `clap` crate), with the features percore's `cli` takes, so that it
/// // adds nothing: clap = { version = "4", default-features = false,
/// //   features = ["std", "derive", "help", "usage", "error-context"] }
/// use clap::Parser;
/// use percore::cli::{self, ServerArgs};
/// use percore::listen::Opening;
/// use percore::reactor::{Io, Protocol, Verdict};
///
/// #[derive(Parser)]
/// struct Args {
///     #[command(flatten)]
///     server: ServerArgs,
///     /// What to greet with.
///     #[arg(long, default_value = "hello")]
///     greeting: String,
/// }
///
/// struct Greeter(String);
/// impl Protocol for Greeter {
///     type Conn = ();
///     fn on_data(&mut self, _: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
///         io.write(self.0.as_bytes());
///         Verdict::close(input.len())
///     }
/// }
///
/// fn main() -> std::process::ExitCode {
///     let args = Args::parse();
///     let options = args.server.options(Opening::ClientSpeaksFirst);
///     cli::serve(&options, move || Ok(Greeter(args.greeting.clone())))
/// }
/// ```
pub fn serve<S: Service>(options: &Options, service: S) -> ExitCode {
    match worker::run(options, service, |event| print::event(&event, options.pinning)) {
        Ok(outcome) => outcome.exit_code(),
        Err(error) => {
            say(format_args!("{}: {}", program_name(), with_flags(&error)));
            ExitCode::FAILURE
        }
    }
}

/// What `error` says, and the flag that changes it where one does: the library
/// speaks of its options, the command line of its flags.
fn with_flags(error: &worker::Error) -> String {
    match error {
        worker::Error::AddressInUse(_) => format!("{error} (--reuseport-join shares it)"),
        worker::Error::Steering(why) => format!("--steer cpu: {why}"),
        _ => error.to_string(),
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
/// workers (each building its protocol with `make_protocol`, in its own process:
/// a protocol's state is per worker, never shared), prints what they report, and
/// returns the exit status. A worker whose `make_protocol` fails says why and exits;
/// the master restarts it, and gives up (exit status 1) when it fails at once five
/// times in ten seconds. For a description and flags of your own, parse them
/// yourself (clap, with [`ServerArgs`] flattened in) and call [`serve`].
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
    serve(&args.server.options(opening), make_protocol)
}

fn program_name() -> String {
    let arg0 = std::env::args().next().unwrap_or_default();
    std::path::Path::new(&arg0).file_name().map_or(arg0.clone(), |name| name.to_string_lossy().into_owned())
}

/// A timeout flag's duration: 0 is none.
fn timeout(duration: Duration) -> Option<Duration> {
    Some(duration).filter(|d| !d.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        server: ServerArgs,
    }

    #[test]
    fn the_workers_enums_are_the_flags_values() {
        let parsed =
            |args: &[&str]| Flags::try_parse_from([&["serve"], args].concat()).map(|flags| flags.server);
        let server = parsed(&["--steer", "cpu", "--sched", "normal"]).expect("parsed");
        assert_eq!((server.steer, server.sched), (Steering::Cpu, Scheduling::Normal));
        let server = parsed(&["--steer", "hash", "--sched", "batch"]).expect("parsed");
        assert_eq!((server.steer, server.sched), (Steering::Hash, Scheduling::Batch));
        assert!(parsed(&["--steer", "round-robin"]).is_err());
    }

    #[test]
    fn a_workers_error_names_the_flag_behind_it() {
        let in_use = worker::Error::AddressInUse(Address::from(([127, 0, 0, 1], 8080)));
        assert_eq!(
            with_flags(&in_use),
            "cannot listen on 127.0.0.1:8080: address in use by another socket (--reuseport-join shares it)"
        );
        let steering = worker::Error::Steering(std::io::Error::other("needs one worker per CPU"));
        assert_eq!(with_flags(&steering), "--steer cpu: needs one worker per CPU");
        assert_eq!(with_flags(&worker::Error::NoWorkers), worker::Error::NoWorkers.to_string());
    }

    #[test]
    fn timeouts_are_durations_to_the_millisecond_or_seconds_and_zero_is_none() {
        let server = Flags::try_parse_from(["serve", "--idle-timeout", "250ms", "--send-timeout", "0"])
            .expect("parsed")
            .server;
        assert_eq!(timeout(server.idle_timeout), Some(Duration::from_millis(250)));
        assert_eq!(timeout(server.send_timeout), None);
        assert_eq!(server.message_timeout, Duration::from_secs(10), "the default");
        let seconds = Flags::try_parse_from(["serve", "--header-timeout", "3"]).expect("parsed").server;
        assert_eq!(seconds.message_timeout, Duration::from_secs(3), "a bare number is seconds");
        let refused = Flags::try_parse_from(["serve", "--idle-timeout", "soon"]).err().expect("refused");
        assert!(refused.to_string().contains("is not a duration"), "{refused}");
    }

    #[test]
    fn bind_takes_an_ip_address_and_its_port_or_a_unix_path_alone() {
        let address = |args: &[&str]| {
            Flags::try_parse_from([&["serve"], args].concat()).expect("parsed").server.address()
        };
        assert_eq!(address(&[]), Ok(Address::from(([0, 0, 0, 0], DEFAULT_PORT))));
        assert_eq!(
            address(&["--bind", "::1", "--port", "0"]),
            Ok(Address::from((IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1]), 0)))
        );
        assert_eq!(address(&["--bind", "unix:/run/p.sock"]), Ok(Address::Unix(PathBuf::from("/run/p.sock"))));
        let port = address(&["--bind", "unix:/run/p.sock", "--port", "80"]).expect_err("no port");
        assert!(port.starts_with("--port"), "{port}");
        let steer = address(&["--bind", "unix:/run/p.sock", "--steer", "cpu"]).expect_err("no steering");
        assert!(steer.starts_with("--steer cpu"), "{steer}");
        for refused in ["unix:", "localhost", "127.0.0.1:80"] {
            let error = Flags::try_parse_from(["serve", "--bind", refused]).err().expect(refused);
            assert!(error.to_string().contains("neither an IP address nor unix:PATH"), "{error}");
        }
    }

    #[test]
    fn zero_workers_is_refused_by_the_flag() {
        let parsed = |workers| {
            Flags::try_parse_from(["serve", "--workers", workers]).map(|flags| flags.server.workers)
        };
        assert_eq!(parsed("1").expect("one worker"), Some(1));
        let refused = parsed("0").expect_err("zero workers").to_string();
        assert!(refused.contains("--workers"), "{refused}");
    }

    #[test]
    fn a_backlog_asked_above_the_kernels_cap_is_capped_with_a_warning() {
        assert_eq!(fit_backlog(None, Some(4096)), (4096, None));
        assert_eq!(fit_backlog(Some(128), Some(4096)), (128, None));
        assert_eq!(fit_backlog(Some(4096), Some(4096)), (4096, None));
        let (backlog, warning) = fit_backlog(Some(4097), Some(4096));
        assert_eq!(backlog, 4096);
        assert!(warning.is_some_and(|w| w.contains("--backlog 4097 is above net.core.somaxconn (4096)")));
        assert_eq!(fit_backlog(Some(100_000), None), (100_000, None), "no cap known");
    }

    #[test]
    fn connections_asked_above_the_open_file_limit_are_kept_with_a_warning() {
        let limit = 1024 + worker::OTHER_FDS;
        assert_eq!(fit_connections(None, limit), (1024, None), "the default, fitted");
        assert_eq!(fit_connections(None, u64::MAX), (DEFAULT_MAX_CONNS, None));
        assert_eq!(fit_connections(Some(1024), limit), (1024, None), "exactly what the limit allows");
        let (connections, warning) = fit_connections(Some(5000), limit);
        assert_eq!(connections, 5000);
        assert!(warning.is_some_and(|w| w.contains("is below the 5016 that --max-connections 5000 needs")));
    }
}
