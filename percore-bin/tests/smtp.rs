//! The `smtp_sink` example: a server-first protocol on the loop. Raw sessions for
//! each reply the RFC asks for, then the real clients: Python's smtplib and swaks.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;

use util::{connect, run_capturing_within, signal, stopped_lines, tool_available, Server, TempFile, WAIT};

fn sink(extra: &[&str]) -> Server {
    let mut args = vec!["--workers", "1"];
    args.extend(extra);
    Server::example("smtp_sink", &args)
}

/// A line-at-a-time SMTP client.
struct Session {
    reader: BufReader<TcpStream>,
}

impl Session {
    /// Connects and reads the greeting.
    fn open(server: &Server) -> Session {
        let mut session = Session { reader: BufReader::new(connect(server.addr())) };
        let greeting = session.reply();
        assert!(greeting.starts_with("220 "), "greeting: {greeting:?}");
        session
    }

    fn send(&mut self, text: &str) {
        self.reader.get_mut().write_all(text.as_bytes()).unwrap_or_else(|e| panic!("sending {text:?}: {e}"));
    }

    /// One reply, every line of it (a multi-line one ends with a line `NNN text`).
    fn reply(&mut self) -> String {
        let mut all = String::new();
        loop {
            let mut line = String::new();
            let n =
                self.reader.read_line(&mut line).unwrap_or_else(|e| panic!("reading a reply: {e}; {all:?}"));
            assert!(n > 0, "closed while reading a reply; got {all:?}");
            assert!(line.ends_with("\r\n"), "a reply line without CRLF: {line:?}");
            all += &line;
            if line.as_bytes().get(3) == Some(&b' ') {
                return all;
            }
        }
    }

    /// Sends `command` and returns the reply's code.
    fn command(&mut self, command: &str) -> String {
        self.send(&format!("{command}\r\n"));
        self.reply()[..3].to_string()
    }

    fn expect_close(&mut self) {
        let mut rest = String::new();
        match self.reader.read_line(&mut rest) {
            Ok(0) => {}
            other => panic!("expected the connection closed, got {other:?} {rest:?}"),
        }
    }
}

#[test]
fn a_session_delivers_messages_and_quits() {
    let server = sink(&[]);
    let mut s = Session::open(&server);
    s.send("EHLO client.example\r\n");
    let ehlo = s.reply();
    assert!(ehlo.starts_with("250-") && ehlo.contains("PIPELINING") && ehlo.contains("SIZE "), "{ehlo:?}");
    for _ in 0..2 {
        assert_eq!(s.command("MAIL FROM:<a@example.com>"), "250");
        assert_eq!(s.command("RCPT TO:<b@example.com>"), "250");
        assert_eq!(s.command("RCPT TO:<c@example.com>"), "250");
        assert_eq!(s.command("DATA"), "354");
        // A dot-stuffed line, and a lone dot with a bare LF around it, which must not
        // end the message.
        s.send("Subject: hi\r\n\r\n..leading dot\r\n\n.\nstill the message\r\n");
        assert_eq!(s.command("."), "250");
    }
    assert_eq!(s.command("RSET"), "250");
    assert_eq!(s.command("NOOP"), "250");
    assert_eq!(s.command("QUIT"), "221");
    s.expect_close();
}

#[test]
fn commands_out_of_order_and_unknown_get_their_replies() {
    let server = sink(&[]);
    let mut s = Session::open(&server);
    assert_eq!(s.command("MAIL FROM:<a@example.com>"), "503", "MAIL before HELO");
    assert_eq!(s.command("HELO"), "501", "HELO without a name");
    assert_eq!(s.command("HELO client.example"), "250");
    assert_eq!(s.command("RCPT TO:<b@example.com>"), "503", "RCPT before MAIL");
    assert_eq!(s.command("DATA"), "503", "DATA before RCPT");
    assert_eq!(s.command("MAIL TO:<a@example.com>"), "501", "MAIL without FROM:");
    assert_eq!(s.command("VRFY someone"), "502");
    assert_eq!(s.command("MAIL FROM:<a@example.com>"), "250");
    assert_eq!(s.command("MAIL FROM:<a@example.com>"), "503", "nested MAIL");
}

#[test]
fn lines_over_the_limits_get_500_and_the_session_goes_on() {
    let server = sink(&[]);
    let mut s = Session::open(&server);
    assert_eq!(s.command(&format!("NOOP {}", "x".repeat(600))), "500", "a 600-byte command line");
    assert_eq!(s.command("HELO client.example"), "250", "the session goes on");
    assert_eq!(s.command("MAIL FROM:<a@example.com>"), "250");
    assert_eq!(s.command("RCPT TO:<b@example.com>"), "250");
    assert_eq!(s.command("DATA"), "354");
    s.send(&format!("{}\r\n", "y".repeat(2000)));
    assert_eq!(s.command("."), "500", "a 2000-byte text line");
    assert_eq!(s.command("NOOP"), "250", "the session goes on");
}

#[test]
fn a_message_over_the_size_limit_gets_552() {
    let server = sink(&["--max-message", "100"]);
    let mut s = Session::open(&server);
    assert_eq!(s.command("EHLO client.example"), "250");
    assert_eq!(s.command("MAIL FROM:<a@example.com> SIZE=1000"), "552", "declared too large");
    assert_eq!(s.command("MAIL FROM:<a@example.com>"), "250");
    assert_eq!(s.command("RCPT TO:<b@example.com>"), "250");
    assert_eq!(s.command("DATA"), "354");
    s.send(&"0123456789\r\n".repeat(20));
    assert_eq!(s.command("."), "552", "240 bytes over a 100-byte limit");
}

#[test]
fn an_idle_connection_gets_421_and_is_closed() {
    let server = sink(&["--command-timeout", "1"]);
    let mut s = Session::open(&server);
    assert!(s.reply().starts_with("421 "), "the timeout's reply");
    s.expect_close();
}

/// The sink's `stopped` line after SIGTERM: its messages counted as requests.
fn messages_counted(mut server: Server) -> u64 {
    signal(server.pid(), "TERM");
    server.wait_exit(WAIT);
    let stopped = stopped_lines(&server.stderr());
    assert_eq!(stopped.len(), 1, "{}", server.stderr());
    stopped[0].requests
}

const SMTPLIB_SESSION: &str = r#"
import smtplib, sys
port = int(sys.argv[1])
with smtplib.SMTP("127.0.0.1", port, timeout=10) as smtp:
    print(smtp.ehlo()[0])
    for i in range(3):
        refused = smtp.sendmail("a@example.com", ["b@example.com", "c@example.com"],
                                f"Subject: {i}\r\n\r\n.a line that starts with a dot\r\nbody {i}\r\n")
        print("sent", i, refused)
    try:
        smtp.sendmail("a@example.com", ["b@example.com"], "x" * 5000 + "\r\n")
        print("oversized line accepted")
    except smtplib.SMTPDataError as e:
        print("oversized line refused", e.smtp_code)
print("quit")
"#;

#[test]
fn python_smtplib_delivers_three_messages_on_one_connection() {
    let server = sink(&[]);
    let script = TempFile::with_contents(SMTPLIB_SESSION.as_bytes());
    let port = server.addr().port().to_string();
    let run = run_capturing_within(Path::new("python3"), &[script.path(), &port], WAIT);
    assert!(run.status.success(), "python3 failed: {}\n{}", run.stdout, run.stderr);
    assert_eq!(run.stdout, "250\nsent 0 {}\nsent 1 {}\nsent 2 {}\noversized line refused 500\nquit\n");
    assert_eq!(messages_counted(server), 3);
}

#[test]
fn swaks_delivers_a_message() {
    if !tool_available("swaks", "swaks") {
        return;
    }
    let server = sink(&[]);
    let port = server.addr().port().to_string();
    let args = ["--server", "127.0.0.1", "--port", &port, "--from", "a@example.com", "--to", "b@example.com"];
    let run = run_capturing_within(Path::new("swaks"), &[&args[..], &["--timeout", "10"]].concat(), WAIT);
    assert!(run.status.success(), "swaks failed ({}):\n{}{}", run.status, run.stdout, run.stderr);
    assert!(run.stdout.contains("<-  250 2.0.0 OK: message accepted"), "{}", run.stdout);
    assert_eq!(messages_counted(server), 1);
}
