use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;

use percore::http::{Hello, HelloConfig};
use percore::reactor::Reactor;

mod cli;

use cli::{Cli, Command, ServeArgs};

/// Kernel queue of connections not yet accepted; the kernel caps it at somaxconn.
const BACKLOG: i32 = 65535;

fn main() -> ExitCode {
    let Cli { command } = Cli::parse();
    let result = match command {
        Command::Serve(args) => serve(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("percore: {message}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: ServeArgs) -> Result<(), String> {
    let mut config = HelloConfig { content_type: args.content_type, ..HelloConfig::default() };
    if let Some(text) = args.body {
        config.body = text.into_bytes();
    }
    if let Some(path) = &args.body_file {
        config.body =
            std::fs::read(path).map_err(|e| format!("cannot read --body-file {}: {e}", path.display()))?;
    }
    let addr = SocketAddr::new(args.bind, args.port);
    let listener =
        percore::listen::bind(addr, BACKLOG, true).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("listening on {local}");
    let mut reactor = Reactor::new(listener, Hello::new(&config)).map_err(|e| e.to_string())?;
    reactor.run().map_err(|e| format!("event loop failed: {e}"))
}
