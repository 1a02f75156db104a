//! An echo server on percore's loop: every byte received is sent back, on one
//! pinned worker process per CPU, with the same flags as `percore serve`.
//!
//! ```text
//! cargo run --release --example echo -- --port 7000
//! ```

use std::process::ExitCode;

use percore::listen::Opening;
use percore::reactor::{Io, Protocol, Verdict};

/// Echo needs no state per connection: whatever arrives is answered at once.
struct Echo;

impl Protocol for Echo {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        io.write(input);
        Verdict::keep(input.len())
    }
}

fn main() -> ExitCode {
    // The client speaks first: the kernel may hold a connection until it does.
    percore::cli::main(Opening::ClientSpeaksFirst, || Ok(Echo))
}
