//! An echo server on percore's loop: every byte received is sent back.
//!
//! ```text
//! cargo run --release --example echo -- --bind 127.0.0.1 --port 7000
//! ```

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;

use percore::reactor::{Config, Protocol, Reactor, Verdict};

/// Echo needs no state per connection: whatever arrives is answered at once.
struct Echo;

impl Protocol for Echo {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], out: &mut Vec<u8>) -> Verdict {
        out.extend_from_slice(input);
        Verdict::keep(input.len())
    }
}

fn main() -> ExitCode {
    let addr = match parse_args(std::env::args().skip(1)) {
        Ok(addr) => addr,
        Err(message) => {
            eprintln!("echo: {message}\nusage: echo [--bind ADDR] [--port PORT]");
            return ExitCode::from(2);
        }
    };
    let run = || -> std::io::Result<()> {
        let listener = percore::listen::bind(addr, 1024, true)?;
        eprintln!("listening on {}", listener.local_addr()?);
        Reactor::new(listener, Echo, Config::default())?.run().map(drop)
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<SocketAddr, String> {
    let mut addr = SocketAddr::new(IpAddr::from([0, 0, 0, 0]), 7000);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--bind" => addr.set_ip(value.parse().map_err(|e| format!("--bind {value}: {e}"))?),
            "--port" => addr.set_port(value.parse().map_err(|e| format!("--port {value}: {e}"))?),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(addr)
}
