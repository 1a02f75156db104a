use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use percore::cli;
use percore::http::{Body, Hello, HelloConfig, Limits};
use percore::listen::Opening;
use percore::worker::Service;

mod bench;
mod commands;
mod tune;
mod units;

use commands::{Cli, Command, ServeArgs};
use units::as_usize;

fn main() -> ExitCode {
    let Cli { command } = Cli::parse();
    let result = match command {
        Command::Serve(args) => serve(args),
        Command::Tune(args) => tune::run(args),
        Command::Bench(args) => bench::run(args).map(|()| ExitCode::SUCCESS),
    };
    result.unwrap_or_else(|message| {
        eprintln!("percore: {message}");
        ExitCode::FAILURE
    })
}

fn serve(args: ServeArgs) -> Result<ExitCode, String> {
    if args.max_request_line > args.max_header_bytes {
        let message = "--max-request-line must not be larger than --max-header-bytes\n";
        clap::Error::raw(clap::error::ErrorKind::ValueValidation, message).exit();
    }
    let mut config = HelloConfig {
        content_type: args.content_type,
        limits: Limits {
            request_line: as_usize(args.max_request_line),
            head: as_usize(args.max_header_bytes),
        },
        max_body: args.max_body,
        delay: args.delay.unwrap_or_default(),
        ..HelloConfig::default()
    };
    if let Some(text) = args.body {
        let len = text.len() as u64;
        config.body = body_from(text.as_bytes(), len, args.sendfile_min).map_err(|e| e.to_string())?;
    }
    let mut options = args.server.options(Opening::ClientSpeaksFirst);
    // A head up to the limit is the protocol's to refuse (431), not the loop's to cut.
    options.reactor.max_pending_input = options.reactor.max_pending_input.max(config.pending_input_needed());
    let service = HelloService { config, body_file: args.body_file, sendfile_min: args.sendfile_min };
    Ok(cli::serve(&options, service))
}

/// The hello server: its configuration, with the body read from `body_file` at
/// start and again at each reload (SIGHUP), sealed in a new memfd each time when it
/// has `sendfile_min` bytes or more.
struct HelloService {
    config: HelloConfig,
    body_file: Option<PathBuf>,
    sendfile_min: u64,
}

impl Service for HelloService {
    type Protocol = Hello;
    type Config = HelloConfig;

    fn load(&self) -> std::io::Result<HelloConfig> {
        let mut config = self.config.clone();
        if let Some(path) = &self.body_file {
            let file = File::open(path);
            config.body = file
                .and_then(|file| body_from(&file, file.metadata()?.len(), self.sendfile_min))
                .map_err(|e| {
                std::io::Error::new(e.kind(), format!("cannot read --body-file {}: {e}", path.display()))
            })?;
        }
        Ok(config)
    }

    fn protocol(&self, config: &HelloConfig) -> std::io::Result<Hello> {
        Ok(Hello::new(config))
    }
}

/// The `len` bytes `from` reads as a response body: from `sendfile_min` bytes on,
/// sealed in a memfd for sendfile(2) (from a file, copied in the kernel: the body
/// never passes through the master's memory, nor its allocator's, which its workers
/// would inherit); else read into memory.
fn body_from(mut from: impl Read, len: u64, sendfile_min: u64) -> std::io::Result<Body> {
    if len >= sendfile_min {
        let sealing = |e: std::io::Error| {
            std::io::Error::new(
                e.kind(),
                format!("cannot seal the body in a memfd (try --sendfile-min off): {e}"),
            )
        };
        return Body::sealed(from).map_err(sealing);
    }
    let mut bytes = Vec::new();
    from.read_to_end(&mut bytes)?;
    Ok(Body::bytes(bytes))
}
