use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser};

use percore::http::{Hello, HelloConfig, Limits};
use percore::reactor::Config;
use percore::worker::{self, Options, Stopped};

mod bench;
mod cli;
mod tune;

use cli::{Cli, Command, CpuList, ServeArgs};

fn main() -> ExitCode {
    let Cli { command } = Cli::parse();
    let result = match command {
        Command::Serve(args) => serve(args),
        Command::Tune => tune::report().map(|()| ExitCode::SUCCESS),
        Command::Bench(args) => bench::run(args).map(|()| ExitCode::SUCCESS),
    };
    result.unwrap_or_else(|message| {
        eprintln!("percore: {message}");
        ExitCode::FAILURE
    })
}

/// The CPU of each worker or thread, or a usage error (exit 2) naming the bad CPU.
fn plan_cpus(cpus: Option<&CpuList>, count: Option<usize>) -> Vec<usize> {
    worker::plan(&worker::allowed_cpus(), cpus.map(|list| &list.0[..]), count)
        .unwrap_or_else(|message| Cli::command().error(clap::error::ErrorKind::InvalidValue, message).exit())
}

fn serve(args: ServeArgs) -> Result<ExitCode, String> {
    let cpus = plan_cpus(args.cpus.as_ref(), args.workers);
    let mut config = HelloConfig {
        content_type: args.content_type,
        limits: Limits { request_line: size(args.max_request_line), head: size(args.max_header_bytes) },
        max_body: args.max_body,
        ..HelloConfig::default()
    };
    if let Some(text) = args.body {
        config.body = text.into_bytes();
    }
    if let Some(path) = &args.body_file {
        config.body =
            std::fs::read(path).map_err(|e| format!("cannot read --body-file {}: {e}", path.display()))?;
    }
    let fd_limit = worker::raise_fd_limit(args.max_conns);
    let options = Options {
        addr: SocketAddr::new(args.bind, args.port),
        cpus,
        pin: !args.no_pin,
        backlog: args.backlog,
        shutdown_timeout: Duration::from_secs(args.shutdown_timeout),
        client_speaks_first: true,
        reactor: Config {
            max_connections: size(args.max_conns.min(fd_limit.saturating_sub(16)).max(1)),
            request_timeout: args.header_timeout,
            idle_timeout: args.keepalive_timeout,
            send_timeout: args.send_timeout,
        },
    };
    match worker::run(&options, || Ok(Hello::new(&config)))? {
        Stopped::Gracefully => Ok(ExitCode::SUCCESS),
        // 128 + SIGINT, as a shell reports a process stopped by Ctrl-C.
        Stopped::AtOnce => Ok(ExitCode::from(130)),
        // The master already said why.
        Stopped::GaveUp(_) => Ok(ExitCode::FAILURE),
    }
}

/// A count from the command line as a `usize`; saturating on 32-bit targets.
fn size(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
