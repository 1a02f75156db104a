//! A TCP relay on percore's loop: each client gets a connection of its own to a
//! backend (round robin over `--backend`), and bytes are copied both ways until
//! both ends are done, on one pinned worker process per CPU.
//!
//! ```text
//! cargo run --release --example relay -- --port 9000 --backend 127.0.0.1:8080
//! curl http://127.0.0.1:9000/
//! ```
//!
//! What the loop gives it: a client's bytes are written on to its backend and the
//! backend's to its client ([`Io::write_to`]); when one side's unsent output is over
//! the loop's budget the other side stops reading until it drains, so a pair holds
//! at most the budget and a read per side whatever its peers do. With `--splice
//! auto` (the default) a direction that carries a bulk transfer is switched to
//! [`Io::splice_to`]: its bytes then cross through a kernel pipe, never copied to
//! user memory. An end of stream
//! on one side shuts the other down for writing once its output is sent
//! (half-close), and a pair closes when both directions are done or either side
//! fails. A backend that refuses, or does not accept within `--connect-timeout`,
//! closes its client at once. A graceful stop (SIGTERM) or a reload (SIGHUP) lets
//! open pairs finish, for up to `--shutdown-timeout`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use percore::cli::{self, ServerArgs};
use percore::listen::Opening;
use percore::reactor::{Closed, ConnId, Counts, DrainPolicy, Flow, Io, Protocol, Verdict};

#[derive(Debug, Parser)]
#[command(about = "A TCP relay: each client gets its own connection to a backend, bytes copied both ways")]
struct Args {
    #[command(flatten)]
    server: ServerArgs,

    /// A backend's address; repeat it for several, taken in turn (round robin).
    #[arg(long, value_name = "ADDR", required = true)]
    backend: Vec<SocketAddr>,

    /// How long a backend may take to accept a connection; then its client is
    /// closed (0: no limit).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = percore::cli::parse_timeout)]
    connect_timeout: Duration,

    /// How bytes cross: `copy` (read into the loop's buffer, written on), `splice`
    /// (through a kernel pipe, never copied to user memory), or `auto`: copied, until
    /// a read as large as a bulk transfer's switches that direction to splice.
    #[arg(long, value_enum, default_value_t = Crossing::Auto)]
    splice: Crossing,
}

/// How a pair's bytes cross from one end to the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Crossing {
    Copy,
    Splice,
    Auto,
}

/// A read at least this large is a bulk transfer's, which `--splice auto` splices.
const BULK_READ: usize = 16 * 1024;

/// The relay: where the backends are, and the pairs being set up.
struct Relay {
    backends: Vec<SocketAddr>,
    crossing: Crossing,
    /// The backend of the next client.
    next: usize,
    /// Each backend connection not yet established, with its client.
    opening: HashMap<ConnId, ConnId>,
    /// Pairs relayed, as requests.
    counts: Counts,
}

/// Either end of a pair: the other end, once known.
#[derive(Debug, Default)]
struct End {
    peer: Option<ConnId>,
    /// The backend's end, established.
    backend: bool,
}

impl Protocol for Relay {
    type Conn = End;

    /// A client accepted: its backend is opened. A backend established: it learns
    /// its client.
    fn on_open(&mut self, end: &mut End, io: &mut Io<'_>) -> Flow {
        // A pause in a stream is no end of it: a stop lets the pair finish.
        io.set_drain_policy(DrainPolicy::UntilClosed);
        let peer = match self.opening.remove(&io.id()) {
            Some(client) => {
                end.backend = true;
                client
            }
            None => {
                let backend = io.connect(self.backends[self.next % self.backends.len()]);
                self.next = self.next.wrapping_add(1);
                self.opening.insert(backend, io.id());
                backend
            }
        };
        end.peer = Some(peer);
        if self.crossing == Crossing::Splice {
            io.splice_to(peer);
        }
        Flow::Continue
    }

    /// Every byte goes on to the other end: the loop stops reading this end while
    /// the other's output is over the budget.
    fn on_data(&mut self, end: &mut End, input: &[u8], io: &mut Io<'_>) -> Verdict {
        if let Some(peer) = end.peer {
            io.write_to(peer, input);
            if self.crossing == Crossing::Auto && input.len() >= BULK_READ {
                io.splice_to(peer);
            }
        }
        Verdict::keep(input.len())
    }

    /// This end's peer finished sending: the other end's peer is told so, once it
    /// has everything before; this end stays open for what comes back.
    fn on_input_end(&mut self, end: &mut End, io: &mut Io<'_>) -> Flow {
        match end.peer {
            Some(peer) => {
                io.shutdown(peer);
                Flow::Continue
            }
            None => Flow::Close,
        }
    }

    /// One end gone: the other closes once its output is sent.
    fn on_close(&mut self, end: &mut End, closed: Closed, _unconsumed: &[u8], io: &mut Io<'_>) {
        // A backend that was never established has its client only in `opening`.
        if let Some(peer) = end.peer.or_else(|| self.opening.remove(&io.id())) {
            io.close(peer);
        }
        // The loop counts a backend it could not reach among its errors.
        if end.backend && !matches!(closed, Closed::ConnectFailed(_)) {
            self.counts.requests += 1;
        }
    }

    fn counts(&self) -> Counts {
        self.counts
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    // Either side may speak first (SMTP, say): a connection is accepted at once.
    let mut options = args.server.options(Opening::ServerSpeaksFirst);
    options.reactor.connect_timeout = Some(args.connect_timeout).filter(|t| !t.is_zero());
    cli::serve(&options, move || {
        Ok(Relay {
            backends: args.backend.clone(),
            crossing: args.splice,
            next: 0,
            opening: HashMap::new(),
            counts: Counts::default(),
        })
    })
}
