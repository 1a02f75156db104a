//! What ran: the URL, the threads and connections, the mode and when it stops, as
//! the report's header line says it and its JSON keeps it.

use std::fmt;
use std::time::Duration;

/// When a run ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// After this long; requests in flight then are not counted.
    After(Duration),
    /// Once this many requests were answered (or failed).
    Requests(u64),
}

/// How requests go out on a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One request at a time on each connection, HTTP/1.1 keep-alive.
    KeepAlive,
    /// This many requests in flight on each connection, sent in one write.
    Pipeline(usize),
    /// A new connection per request, HTTP/1.0 without keep-alive.
    Close,
}

impl Mode {
    /// The name the JSON report gives it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::KeepAlive => "keep-alive",
            Mode::Pipeline(_) => "pipeline",
            Mode::Close => "close",
        }
    }
}

/// One run's description.
#[derive(Clone, Debug, PartialEq)]
pub struct RunInfo {
    /// The URL as sent: normalised, without its fragment.
    pub url: String,
    pub method: String,
    pub mode: Mode,
    /// A fixed total rate, requests per second.
    pub rate: Option<f64>,
    pub threads: usize,
    pub connections: usize,
    pub stop: Stop,
    /// How long a request may wait for its response.
    pub timeout: Duration,
}

impl RunInfo {
    /// Whether it spoke TLS: its URL is https.
    pub fn speaks_tls(&self) -> bool {
        self.url.starts_with("https://")
    }
}

/// `GET http://127.0.0.1:8080/: 10s, 2 threads, 100 connections, keep-alive`: wrk's
/// header line, with the method and the mode.
impl fmt::Display for RunInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: ", self.method, self.url)?;
        match self.stop {
            Stop::After(duration) => write!(f, "{}", Seconds(duration))?,
            Stop::Requests(n) => write!(f, "{n} requests")?,
        }
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let (threads, connections) = (self.threads, self.connections);
        write!(
            f,
            ", {threads} thread{}, {connections} connection{}, ",
            plural(threads),
            plural(connections)
        )?;
        match self.mode {
            Mode::KeepAlive => write!(f, "keep-alive")?,
            Mode::Pipeline(depth) => write!(f, "pipelined {depth} deep")?,
            Mode::Close => write!(f, "a connection per request")?,
        }
        if let Some(rate) = self.rate {
            write!(f, ", fixed rate {}/s", Number(rate))?;
        }
        Ok(())
    }
}

/// A duration in seconds as a person writes it: `10s`, `1.5s`, `0.25s`.
pub struct Seconds(pub Duration);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", Number(self.0.as_secs_f64()))
    }
}

/// A number with no more digits than it has: `50000`, `0.5`, `1.25` (three decimals
/// at most).
pub struct Number(pub f64);

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&trimmed(self.0, 3))
    }
}

/// `value` with `decimals` decimals, less its trailing zeros.
pub fn trimmed(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(mode: Mode, stop: Stop, rate: Option<f64>) -> RunInfo {
        RunInfo {
            url: "http://127.0.0.1:8080/".into(),
            method: "GET".into(),
            mode,
            rate,
            threads: 2,
            connections: 100,
            stop,
            timeout: Duration::from_secs(10),
        }
    }

    #[test]
    fn the_header_line_says_what_ran() {
        let cases = [
            (
                info(Mode::KeepAlive, Stop::After(Duration::from_secs(10)), None),
                "GET http://127.0.0.1:8080/: 10s, 2 threads, 100 connections, keep-alive",
            ),
            (
                info(Mode::Pipeline(16), Stop::Requests(1000), None),
                "GET http://127.0.0.1:8080/: 1000 requests, 2 threads, 100 connections, pipelined 16 deep",
            ),
            (
                info(Mode::Close, Stop::After(Duration::from_millis(1500)), Some(50000.0)),
                "GET http://127.0.0.1:8080/: 1.5s, 2 threads, 100 connections, a connection per request, \
                 fixed rate 50000/s",
            ),
        ];
        for (info, line) in cases {
            assert_eq!(info.to_string(), line);
        }
    }

    #[test]
    fn numbers_keep_only_their_digits() {
        for (value, text) in [(50000.0, "50000"), (0.5, "0.5"), (1.25, "1.25"), (0.0104, "0.01"), (3.0, "3")]
        {
            assert_eq!(Number(value).to_string(), text);
        }
    }
}
