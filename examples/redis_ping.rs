//! A Redis-protocol (RESP) server on percore's loop that answers `PING`, `ECHO` and
//! `QUIT` (and `-ERR` to anything else), pipelined, so that the stock `redis-cli`
//! and `redis-benchmark -t ping` talk to it unmodified.
//!
//! ```text
//! cargo run --release --example redis_ping -- --port 6380
//! redis-benchmark -p 6380 -t ping -P 16 -q
//! ```

use std::io::Write;
use std::process::ExitCode;

use percore::listen::Opening;
use percore::reactor::{Counts, Io, Protocol, Verdict};

/// Longest argument accepted; a longer one is refused and the connection closed.
const MAX_ARG: usize = 64 * 1024;

/// One command: its name and first argument (the others are counted, not kept).
struct Command<'a> {
    args: [&'a [u8]; 2],
    count: usize,
    len: usize,
}

enum Parsed<'a> {
    Complete(Command<'a>),
    Partial,
    Invalid,
}

/// The line at the start of `buf`, without its CRLF, and the length with it.
fn line(buf: &[u8]) -> Option<(&[u8], usize)> {
    let end = buf.iter().position(|&b| b == b'\n')?;
    Some((buf[..end].strip_suffix(b"\r").unwrap_or(&buf[..end]), end + 1))
}

fn number(digits: &[u8]) -> Option<usize> {
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// A command as RESP sends it (`*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n`), or inline, as typed
/// into telnet (`PING\r\n`).
fn parse(buf: &[u8]) -> Parsed<'_> {
    let Some((first, mut at)) = line(buf) else {
        return if buf.len() > MAX_ARG { Parsed::Invalid } else { Parsed::Partial };
    };
    let mut command = Command { args: [b"", b""], count: 0, len: 0 };
    let Some(count) = first.strip_prefix(b"*") else {
        for (i, word) in first.split(|&b| b == b' ').filter(|w| !w.is_empty()).enumerate() {
            if let Some(arg) = command.args.get_mut(i) {
                *arg = word;
            }
            command.count += 1;
        }
        command.len = at;
        return Parsed::Complete(command);
    };
    let Some(count) = number(count).filter(|&n| n <= 1024) else { return Parsed::Invalid };
    for i in 0..count {
        let Some((header, header_len)) = line(&buf[at..]) else { return Parsed::Partial };
        let Some(len) = header.strip_prefix(b"$").and_then(number).filter(|&n| n <= MAX_ARG) else {
            return Parsed::Invalid;
        };
        let start = at + header_len;
        let Some(arg) = buf.get(start..start + len) else { return Parsed::Partial };
        match buf.get(start + len..start + len + 2) {
            Some(b"\r\n") => {}
            Some(_) => return Parsed::Invalid,
            None => return Parsed::Partial,
        }
        if let Some(slot) = command.args.get_mut(i) {
            *slot = arg;
        }
        at = start + len + 2;
    }
    command.count = count;
    command.len = at;
    Parsed::Complete(command)
}

fn bulk(io: &mut Io<'_>, value: &[u8]) {
    // Writing to an Io cannot fail: it copies to the output.
    let _ = write!(io, "${}\r\n", value.len());
    io.write(value);
    io.write(b"\r\n");
}

/// What to do after a command's reply.
enum Replied {
    /// Answered: the next command.
    Answered,
    /// Answered with an error (unknown, or the wrong number of arguments).
    Refused,
    /// `QUIT`: close once the reply is out.
    Quit,
}

/// Appends the reply to `command`. Names match in any case, without allocating: this
/// runs once per command.
fn reply(command: &Command<'_>, io: &mut Io<'_>) -> Replied {
    let [name, arg] = command.args;
    let is = |known: &[u8]| name.eq_ignore_ascii_case(known);
    match command.count {
        1 if is(b"PING") => io.write(b"+PONG\r\n"),
        2 if is(b"PING") || is(b"ECHO") => bulk(io, arg),
        _ if is(b"QUIT") => {
            io.write(b"+OK\r\n");
            return Replied::Quit;
        }
        _ if is(b"PING") || is(b"ECHO") => {
            let name = String::from_utf8_lossy(name).to_lowercase();
            let _ = write!(io, "-ERR wrong number of arguments for '{name}' command\r\n");
            return Replied::Refused;
        }
        _ => {
            // Quotes and line breaks in the name would break the reply's line.
            let name: String =
                String::from_utf8_lossy(name).chars().filter(|c| !c.is_control() && *c != '\'').collect();
            let _ = write!(io, "-ERR unknown command '{name}'\r\n");
            return Replied::Refused;
        }
    }
    Replied::Answered
}

/// Every complete command in the input is answered, in order, in one write; each
/// counted, for the workers' lines: answered (as requests) and refused.
#[derive(Default)]
struct RedisPing {
    counts: Counts,
}

impl Protocol for RedisPing {
    type Conn = ();

    fn on_data(&mut self, _conn: &mut (), input: &[u8], io: &mut Io<'_>) -> Verdict {
        let mut at = 0;
        loop {
            match parse(&input[at..]) {
                Parsed::Partial => return Verdict::keep(at),
                Parsed::Invalid => {
                    io.write(b"-ERR Protocol error\r\n");
                    self.counts.requests += 1;
                    self.counts.refused += 1;
                    return Verdict::close(at);
                }
                // An empty inline line is no command: Redis ignores it too.
                Parsed::Complete(command) if command.count == 0 => at += command.len,
                Parsed::Complete(command) => {
                    at += command.len;
                    self.counts.requests += 1;
                    match reply(&command, io) {
                        Replied::Answered => {}
                        Replied::Refused => self.counts.refused += 1,
                        Replied::Quit => return Verdict::close(at),
                    }
                }
            }
        }
    }

    fn counts(&self) -> Counts {
        self.counts
    }
}

fn main() -> ExitCode {
    percore::cli::main(Opening::ClientSpeaksFirst, || Ok(RedisPing::default()))
}
