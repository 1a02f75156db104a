//! An SMTP sink on percore's loop: a server-first protocol that greets each
//! connection, speaks enough of RFC 5321 for real clients (Python's smtplib,
//! swaks, a mail server) to deliver to it, counts every message and drops it.
//!
//! ```text
//! cargo run --release --example smtp_sink -- --port 2525
//! swaks --server 127.0.0.1 --port 2525 --to a@example.com
//! ```
//!
//! Commands: EHLO, HELO, MAIL, RCPT, DATA, RSET, NOOP, QUIT (others: 502). Limits,
//! with RFC 5321's replies: a command line of 512 bytes (4.5.3.1.4) and a text line
//! of 1000 (4.5.3.1.6) get "500 Line too long"; a message over `--max-message` gets
//! 552; 100 recipients (4.5.3.1.8), then 452. A connection that sends no command
//! for `--command-timeout` seconds gets 421 and is closed (4.5.3.2.7; its own timer
//! keeps the loop's `--idle-timeout` from closing it first, without the 421).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use percore::cli::{self, ServerArgs};
use percore::listen::Opening;
use percore::reactor::{Counts, Flow, Io, Protocol, Verdict};

/// Longest command line, CRLF included.
const MAX_COMMAND_LINE: usize = 512;
/// Longest line of message text, CRLF included.
const MAX_TEXT_LINE: usize = 1000;
/// Recipients per message (RFC 5321's minimum to accept).
const MAX_RECIPIENTS: usize = 100;

#[derive(Debug, Parser)]
#[command(about = "An SMTP sink: accepts every message, counts it and drops it")]
struct Args {
    #[command(flatten)]
    server: ServerArgs,

    /// Largest message accepted, in bytes; a larger one gets 552.
    #[arg(long, value_name = "BYTES", default_value_t = 10 * 1024 * 1024)]
    max_message: usize,

    /// Seconds a connection may stay silent before it gets 421 and is closed (RFC
    /// 5321's server timeout, 5 minutes at least).
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    command_timeout: u64,

    /// The name the server gives itself in its replies.
    #[arg(long, default_value = "percore.localhost")]
    hostname: String,
}

/// The sink: its limits, and what it counted.
struct Sink {
    hostname: String,
    max_message: usize,
    command_timeout: Duration,
    counts: Counts,
}

/// Where a session is.
#[derive(Debug, Default)]
struct Session {
    greeted: bool,
    /// MAIL was accepted: a transaction is open.
    mail: bool,
    recipients: usize,
    /// Reading message text after DATA.
    data: Option<Message>,
    /// A line over the limit is being dropped up to its end.
    discarding: bool,
}

/// The message being received: counted, never kept.
#[derive(Debug, Default)]
struct Message {
    size: usize,
    line_too_long: bool,
    /// The previous line ended with CRLF, so a "." line may end the message.
    after_crlf: bool,
}

impl Sink {
    fn reply(&self, io: &mut Io<'_>, text: &str) {
        let _ = write!(io, "{text}\r\n");
    }

    /// Handles one command line (without its line end); returns false for QUIT.
    fn command(&mut self, session: &mut Session, line: &[u8], io: &mut Io<'_>) -> bool {
        let line = String::from_utf8_lossy(line);
        let (verb, argument) = line.split_once(' ').unwrap_or((&line, ""));
        let argument = argument.trim();
        match verb.to_ascii_uppercase().as_str() {
            "EHLO" | "HELO" if argument.is_empty() => self.reply(io, "501 5.5.4 Syntax: EHLO hostname"),
            "EHLO" => {
                *session = Session { greeted: true, ..Session::default() };
                let _ = write!(
                    io,
                    "250-{} greets {argument}\r\n250-SIZE {}\r\n250-8BITMIME\r\n250 PIPELINING\r\n",
                    self.hostname, self.max_message
                );
            }
            "HELO" => {
                *session = Session { greeted: true, ..Session::default() };
                self.reply(io, &format!("250 {}", self.hostname));
            }
            "MAIL" if !session.greeted => self.reply(io, "503 5.5.1 Say EHLO or HELO first"),
            "MAIL" if session.mail => self.reply(io, "503 5.5.1 Nested MAIL command"),
            "MAIL" if !starts_with_ignore_case(argument, "FROM:") => {
                self.reply(io, "501 5.5.4 Syntax: MAIL FROM:<address>")
            }
            "MAIL" if declared_size(argument).is_some_and(|size| size > self.max_message) => {
                self.reply(io, "552 5.3.4 Message size exceeds fixed maximum message size")
            }
            "MAIL" => {
                session.mail = true;
                session.recipients = 0;
                self.reply(io, "250 2.1.0 OK");
            }
            "RCPT" if !session.mail => self.reply(io, "503 5.5.1 Need MAIL before RCPT"),
            "RCPT" if !starts_with_ignore_case(argument, "TO:") => {
                self.reply(io, "501 5.5.4 Syntax: RCPT TO:<address>")
            }
            "RCPT" if session.recipients >= MAX_RECIPIENTS => self.reply(io, "452 4.5.3 Too many recipients"),
            "RCPT" => {
                session.recipients += 1;
                self.reply(io, "250 2.1.5 OK");
            }
            "DATA" if session.recipients == 0 => self.reply(io, "503 5.5.1 Need RCPT before DATA"),
            "DATA" => {
                session.data = Some(Message { after_crlf: true, ..Message::default() });
                self.reply(io, "354 End data with <CR><LF>.<CR><LF>");
            }
            "RSET" => {
                *session = Session { greeted: session.greeted, ..Session::default() };
                self.reply(io, "250 2.0.0 OK");
            }
            "NOOP" => self.reply(io, "250 2.0.0 OK"),
            "QUIT" => {
                self.reply(io, &format!("221 2.0.0 {} closing connection", self.hostname));
                return false;
            }
            "" => self.reply(io, "500 5.5.2 Syntax error, command unrecognized"),
            _ => self.reply(io, "502 5.5.1 Command not implemented"),
        }
        true
    }

    /// Handles one line of message text (with its line end).
    fn text(&mut self, session: &mut Session, line: &[u8], io: &mut Io<'_>) {
        let Some(message) = session.data.as_mut() else { return };
        let crlf = line.ends_with(b"\r\n");
        // Only <CRLF>.<CRLF> ends a message: a bare LF around the dot must not, or a
        // message could smuggle a second one past a server that reads it otherwise.
        if line == b".\r\n" && message.after_crlf {
            let verdict = if message.line_too_long {
                "500 5.5.2 Line too long"
            } else if message.size > self.max_message {
                "552 5.3.4 Message size exceeds fixed maximum message size"
            } else {
                self.counts.requests += 1;
                "250 2.0.0 OK: message accepted and dropped"
            };
            if verdict.starts_with('5') {
                self.counts.refused += 1;
            }
            self.reply(io, verdict);
            *session = Session { greeted: true, ..Session::default() };
            return;
        }
        message.after_crlf = crlf;
        // Dot-stuffing (4.5.2): a leading dot was added by the client; not counted.
        let unstuffed = line.strip_prefix(b".").unwrap_or(line);
        message.size = message.size.saturating_add(unstuffed.len());
        message.line_too_long |= line.len() > MAX_TEXT_LINE;
    }
}

fn starts_with_ignore_case(text: &str, prefix: &str) -> bool {
    text.get(..prefix.len()).is_some_and(|start| start.eq_ignore_ascii_case(prefix))
}

/// The `SIZE=` parameter of a MAIL command (RFC 1870), if given.
fn declared_size(argument: &str) -> Option<usize> {
    argument.split_whitespace().find_map(|param| {
        let value = param.get(..5).filter(|name| name.eq_ignore_ascii_case("SIZE="))?;
        param[value.len()..].parse().ok()
    })
}

impl Protocol for Sink {
    type Conn = Session;

    fn on_open(&mut self, _session: &mut Session, io: &mut Io<'_>) -> Flow {
        self.reply(io, &format!("220 {} ESMTP percore smtp sink", self.hostname));
        io.set_timer(self.command_timeout);
        Flow::Continue
    }

    fn on_data(&mut self, session: &mut Session, input: &[u8], io: &mut Io<'_>) -> Verdict {
        io.set_timer(self.command_timeout);
        let mut at = 0;
        while !io.is_full() {
            let rest = &input[at..];
            let limit = if session.data.is_some() { MAX_TEXT_LINE } else { MAX_COMMAND_LINE };
            let Some(end) = rest.iter().position(|&b| b == b'\n') else {
                if rest.len() <= limit {
                    return Verdict::keep(at);
                }
                // A line over the limit: what came of it is dropped, up to its end.
                if let Some(message) = session.data.as_mut() {
                    message.line_too_long = true;
                } else if !session.discarding {
                    self.reply(io, "500 5.5.2 Line too long");
                }
                session.discarding = true;
                return Verdict::keep(input.len());
            };
            let line = &rest[..=end];
            at += end + 1;
            if std::mem::take(&mut session.discarding) {
                if let Some(message) = session.data.as_mut() {
                    message.after_crlf = line.ends_with(b"\r\n");
                }
                continue;
            }
            if session.data.is_some() {
                self.text(session, line, io);
            } else if line.len() > limit {
                self.reply(io, "500 5.5.2 Line too long");
            } else {
                let command = line.strip_suffix(b"\n").unwrap_or(line);
                if !self.command(session, command.strip_suffix(b"\r").unwrap_or(command), io) {
                    return Verdict::close(at);
                }
            }
        }
        Verdict::pause(at)
    }

    fn on_timer(&mut self, _session: &mut Session, io: &mut Io<'_>) -> Flow {
        self.reply(io, &format!("421 4.4.2 {} Timeout, closing connection", self.hostname));
        Flow::Close
    }

    /// Receiving a message: held to the loop's request timeout, not closed by a
    /// graceful stop until it ends.
    fn is_busy(session: &Session) -> bool {
        session.data.is_some()
    }

    /// Messages accepted, as requests; refused, as errors.
    fn counts(&self) -> Counts {
        self.counts
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let options = args.server.options(Opening::ServerSpeaksFirst);
    let command_timeout = Duration::from_secs(args.command_timeout);
    cli::serve(&options, move || {
        Ok(Sink {
            hostname: args.hostname.clone(),
            max_message: args.max_message,
            command_timeout,
            counts: Counts::default(),
        })
    })
}
