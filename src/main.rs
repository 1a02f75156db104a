use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;

use percore::cli;
use percore::http::{Hello, HelloConfig, Limits};
use percore::listen::Opening;

mod bench;
mod commands;
mod tune;

use commands::{Cli, Command, ServeArgs};

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

fn serve(args: ServeArgs) -> Result<ExitCode, String> {
    let mut config = HelloConfig {
        content_type: args.content_type,
        limits: Limits { request_line: size(args.max_request_line), head: size(args.max_header_bytes) },
        max_body: args.max_body,
        delay: args.delay.unwrap_or_default(),
        ..HelloConfig::default()
    };
    if let Some(text) = args.body {
        config.body = Arc::from(text.into_bytes());
    }
    if let Some(path) = &args.body_file {
        let body =
            std::fs::read(path).map_err(|e| format!("cannot read --body-file {}: {e}", path.display()))?;
        config.body = Arc::from(body);
    }
    let options = args.server.options(Opening::ClientSpeaksFirst);
    Ok(cli::serve(&options, || Ok(Hello::new(&config)), |hello| Some(hello.counts())))
}

/// A count from the command line as a `usize`; saturating on 32-bit targets.
fn size(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
