//! The JSON report: every field of the text one, numbers unformatted (latencies in
//! µs), and what ran. Its fields are documented in docs/bench.md and kept stable; a
//! change of meaning gets a new `format`. A TLS run's own fields (`errors.tls`,
//! `tls`) are in a TLS run's report alone: a plain run's is as it was before TLS.
//!
//! The same object, on one line, ends an interval log: `percore bench merge` reads
//! the counts back from it ([`Logged::from_json`]).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde_json::{json, Map, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::figures::{Errors, LatencySummary, Report, RunCounts, PERCENTILES};
use super::handshakes::{Handshakes, HANDSHAKE_PERCENTILES};
use super::run_info::{Mode, RunInfo, Stop};

/// The `format` of the objects written here.
pub const FORMAT: &str = "percore-bench/1";

/// One JSON object with everything the text report says.
pub fn to_json(report: &Report) -> Value {
    let latency = LatencySummary::of(&report.latency);
    let percentiles: Map<String, Value> = PERCENTILES
        .iter()
        .zip(latency.percentiles)
        .map(|((label, _), value)| (label.to_string(), value.into()))
        .collect();
    let status: Map<String, Value> =
        report.counts.status.iter().map(|(code, count)| (code.to_string(), count.into())).collect();
    let (counts, errors) = (&report.counts, &report.counts.errors);
    let mut json = json!({
        "format": FORMAT,
        "runs": report.runs.iter().map(run_json).collect::<Vec<_>>(),
        "started_at": rfc3339(report.started_at),
        "duration_s": report.duration.as_secs_f64(),
        "interrupted": report.interrupted,
        "requests": counts.requests,
        "requests_per_sec": report.requests_per_sec(),
        "bytes_read": counts.bytes_read,
        "bytes_per_sec": report.bytes_per_sec(),
        "status": status,
        "non_2xx_3xx": counts.status.failed(),
        "errors": errors_json(errors, report.speaks_tls()),
        "latency_us": {
            "min": latency.min,
            "mean": latency.mean,
            "stdev": latency.stdev,
            "max": latency.max,
            "percentiles": percentiles,
        },
    });
    if let Some(handshakes) = &counts.tls {
        json["tls"] = handshakes_json(handshakes);
    }
    json
}

/// Errors by kind, then their total; `tls` only for a TLS run (`tls`), so that a
/// plain run's object is as it was before TLS.
fn errors_json(errors: &Errors, tls: bool) -> Value {
    let kinds = [
        ("connect", errors.connect),
        ("read", errors.read),
        ("write", errors.write),
        ("timeout", errors.timeout),
        ("parse", errors.parse),
    ];
    let mut object: Map<String, Value> =
        kinds.iter().map(|&(kind, n)| (kind.to_string(), n.into())).collect();
    if tls {
        object.insert("tls".into(), errors.tls.into());
    }
    object.insert("total".into(), errors.total().into());
    Value::Object(object)
}

/// A TLS run's handshakes: by version and cipher suite, how many resumed, and the
/// handshake time (its figures `null` when none was done).
fn handshakes_json(handshakes: &Handshakes) -> Value {
    let named = |counts: &BTreeMap<String, u64>| -> Map<String, Value> {
        counts.iter().map(|(name, &n)| (name.clone(), n.into())).collect()
    };
    let summary = handshakes.summary();
    let percentiles: Map<String, Value> = (HANDSHAKE_PERCENTILES.iter().enumerate())
        .map(|(i, (label, _))| (label.to_string(), summary.map(|(values, _)| values[i]).into()))
        .collect();
    json!({
        "versions": named(&handshakes.versions),
        "suites": named(&handshakes.suites),
        "handshakes": handshakes.done,
        "resumed": handshakes.resumed,
        "handshake_us": { "max": summary.map(|(_, max)| max), "percentiles": percentiles },
    })
}

fn run_json(run: &RunInfo) -> Value {
    let stop = match run.stop {
        Stop::After(duration) => json!({ "after_s": duration.as_secs_f64() }),
        Stop::Requests(n) => json!({ "requests": n }),
    };
    let pipeline = match run.mode {
        Mode::Pipeline(depth) => depth,
        Mode::KeepAlive | Mode::Close => 1,
    };
    json!({
        "url": run.url,
        "method": run.method,
        "mode": run.mode.name(),
        "pipeline": pipeline,
        "rate": run.rate,
        "threads": run.threads,
        "connections": run.connections,
        "stop": stop,
        "timeout_s": run.timeout.as_secs_f64(),
    })
}

/// An instant as RFC 3339 in UTC, to the microsecond.
pub fn rfc3339(at: SystemTime) -> String {
    let at = OffsetDateTime::from(at);
    let at = at.replace_nanosecond(at.nanosecond() / 1000 * 1000).unwrap_or(at);
    at.format(&Rfc3339).unwrap_or_else(|_| "1970-01-01T00:00:00Z".into())
}

/// What a report written by [`to_json`] says of a run, without its latencies (which
/// the interval log holds) and a TLS run's handshakes (which no log holds: a merge
/// counts their errors, not their figures).
#[derive(Debug)]
pub struct Logged {
    pub runs: Vec<RunInfo>,
    pub started_at: SystemTime,
    pub duration: Duration,
    pub interrupted: bool,
    pub counts: RunCounts,
}

impl Logged {
    /// Reads back what [`to_json`] wrote; `None` for anything else.
    pub fn from_json(value: &Value) -> Option<Logged> {
        if value.get("format")?.as_str()? != FORMAT {
            return None;
        }
        let runs = value.get("runs")?.as_array()?.iter().map(run_from_json).collect::<Option<Vec<_>>>()?;
        let started_at = OffsetDateTime::parse(value.get("started_at")?.as_str()?, &Rfc3339).ok()?.into();
        let duration = Duration::try_from_secs_f64(value.get("duration_s")?.as_f64()?).ok()?;
        let errors = value.get("errors")?;
        let count = |key: &str| errors.get(key)?.as_u64();
        let mut counts = RunCounts {
            requests: value.get("requests")?.as_u64()?,
            bytes_read: value.get("bytes_read")?.as_u64()?,
            errors: Errors {
                connect: count("connect")?,
                read: count("read")?,
                write: count("write")?,
                timeout: count("timeout")?,
                parse: count("parse")?,
                tls: count("tls").unwrap_or(0),
            },
            ..RunCounts::default()
        };
        for (code, n) in value.get("status")?.as_object()? {
            counts.status.add(code.parse().ok()?, n.as_u64()?);
        }
        let interrupted = value.get("interrupted")?.as_bool()?;
        Some(Logged { runs, started_at, duration, interrupted, counts })
    }
}

fn run_from_json(run: &Value) -> Option<RunInfo> {
    let text = |key: &str| Some(run.get(key)?.as_str()?.to_string());
    let size = |key: &str| usize::try_from(run.get(key)?.as_u64()?).ok();
    let mode = match run.get("mode")?.as_str()? {
        "keep-alive" => Mode::KeepAlive,
        "pipeline" => Mode::Pipeline(size("pipeline")?),
        "close" => Mode::Close,
        _ => return None,
    };
    let stop = run.get("stop")?;
    let stop = match (stop.get("after_s"), stop.get("requests")) {
        (Some(after), _) => Stop::After(Duration::try_from_secs_f64(after.as_f64()?).ok()?),
        (None, Some(n)) => Stop::Requests(n.as_u64()?),
        (None, None) => return None,
    };
    Some(RunInfo {
        url: text("url")?,
        method: text("method")?,
        mode,
        rate: run.get("rate")?.as_f64(),
        threads: size("threads")?,
        connections: size("connections")?,
        stop,
        timeout: Duration::try_from_secs_f64(run.get("timeout_s")?.as_f64()?).ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::Handshake;
    use super::*;

    fn report() -> Report {
        let run = RunInfo {
            url: "http://127.0.0.1:8080/".into(),
            method: "POST".into(),
            mode: Mode::Pipeline(16),
            rate: Some(50000.0),
            threads: 2,
            connections: 100,
            stop: Stop::Requests(100_000),
            timeout: Duration::from_millis(1500),
        };
        let mut report =
            Report::new(vec![run], SystemTime::UNIX_EPOCH + Duration::from_micros(1_748_779_200_250_000));
        report.counts.requests = 100_000;
        report.counts.bytes_read = 13_750_000;
        report.counts.status.add(200, 99_990);
        report.counts.status.add(302, 4);
        report.counts.status.add(500, 6);
        report.counts.errors = Errors { connect: 1, read: 2, write: 3, timeout: 4, parse: 5, tls: 0 };
        report.duration = Duration::from_secs(10);
        for micros in 1..=1000 {
            report.latency.saturating_record(micros);
        }
        report
    }

    #[test]
    fn json_has_every_field() {
        let json = to_json(&report());
        let keys =
            |v: &Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
        let top = [
            "format",
            "runs",
            "started_at",
            "duration_s",
            "interrupted",
            "requests",
            "requests_per_sec",
            "bytes_read",
            "bytes_per_sec",
            "status",
            "non_2xx_3xx",
            "errors",
            "latency_us",
        ];
        assert_eq!(keys(&json), top);
        let run =
            ["url", "method", "mode", "pipeline", "rate", "threads", "connections", "stop", "timeout_s"];
        assert_eq!(keys(&json["runs"][0]), run);
        assert_eq!(json["started_at"], "2025-06-01T12:00:00.25Z");
        assert_eq!(
            (json["requests_per_sec"].as_f64(), json["bytes_per_sec"].as_f64()),
            (Some(10_000.0), Some(1_375_000.0))
        );
        assert_eq!(json["status"], json!({ "200": 99_990, "302": 4, "500": 6 }));
        let percentiles =
            json["latency_us"]["percentiles"].as_object().map(|p| p.keys().cloned().collect::<Vec<_>>());
        assert_eq!(percentiles, Some(PERCENTILES.iter().map(|(label, _)| label.to_string()).collect()));
        assert_eq!(json["non_2xx_3xx"], 6);
        assert_eq!(json["errors"]["total"], 15);
        assert_eq!(json["runs"][0]["stop"], json!({ "requests": 100_000 }));
        assert_eq!(
            (json["runs"][0]["mode"].as_str(), json["runs"][0]["pipeline"].as_u64()),
            (Some("pipeline"), Some(16))
        );
    }

    #[test]
    fn a_tls_run_has_its_kind_of_error_and_its_handshakes_and_a_plain_one_neither() {
        let plain = to_json(&report());
        assert_eq!(plain["errors"].as_object().map(|kinds| kinds.contains_key("tls")), Some(false));
        assert!(plain.get("tls").is_none(), "{plain:#}");
        let mut tls = report();
        tls.runs[0].url = "https://127.0.0.1:8443/".into();
        tls.counts.errors.tls = 7;
        let mut handshakes = Handshakes::default();
        for resumed in [false, true] {
            let took = Duration::from_micros(1500);
            let suite = "TLS13_AES_256_GCM_SHA384";
            handshakes.record(&Handshake { version: "TLSv1.3", suite, resumed, took });
        }
        tls.counts.tls = Some(handshakes);
        let json = to_json(&tls);
        let kinds = json["errors"].as_object().map(|kinds| kinds.keys().cloned().collect::<Vec<_>>());
        let expected = ["connect", "read", "write", "timeout", "parse", "tls", "total"];
        assert_eq!(kinds, Some(expected.map(String::from).to_vec()));
        assert_eq!((&json["errors"]["tls"], &json["errors"]["total"]), (&json!(7), &json!(22)));
        let expected = json!({
            "versions": { "TLSv1.3": 2 },
            "suites": { "TLS13_AES_256_GCM_SHA384": 2 },
            "handshakes": 2,
            "resumed": 1,
            "handshake_us": { "max": 1500, "percentiles": { "50": 1500, "99": 1500 } },
        });
        assert_eq!(json["tls"], expected, "{json:#}");
        // The errors read back; the handshakes are no log's.
        assert_eq!(Logged::from_json(&json).map(|logged| logged.counts.errors), Some(tls.counts.errors));
        tls.counts.tls = Some(Handshakes::default());
        let none = json!({ "max": null, "percentiles": { "50": null, "99": null } });
        assert_eq!(to_json(&tls)["tls"]["handshake_us"], none);
    }

    #[test]
    fn known_latencies_give_their_percentiles() {
        // 1..=1000 µs once each: the p-th percentile is 10 * p µs. Below 2048 the
        // histogram is exact at 3 significant digits.
        let json = to_json(&report());
        let expected = [
            ("50", 500),
            ("66", 660),
            ("75", 750),
            ("80", 800),
            ("90", 900),
            ("95", 950),
            ("98", 980),
            ("99", 990),
            ("99.9", 999),
            ("100", 1000),
        ];
        for (label, micros) in expected {
            assert_eq!(json["latency_us"]["percentiles"][label], micros, "p{label}");
        }
        assert_eq!(
            (json["latency_us"]["min"].as_u64(), json["latency_us"]["max"].as_u64()),
            (Some(1), Some(1000))
        );
        assert_eq!(json["latency_us"]["mean"], 500.5);
    }

    #[test]
    fn what_is_written_reads_back() {
        let report = report();
        let logged = Logged::from_json(&to_json(&report)).expect("reads back");
        assert_eq!(logged.runs, report.runs);
        assert_eq!(
            (logged.started_at, logged.duration, logged.interrupted),
            (report.started_at, report.duration, false)
        );
        assert_eq!(logged.counts, report.counts);
        // Every mode and way of stopping reads back, and an interrupted run says so.
        let mut other = report.clone();
        other.interrupted = true;
        other.runs.extend([Mode::KeepAlive, Mode::Close].map(|mode| RunInfo {
            mode,
            rate: None,
            stop: Stop::After(Duration::from_millis(2500)),
            ..report.runs[0].clone()
        }));
        let logged = Logged::from_json(&to_json(&other)).expect("reads back");
        assert_eq!((logged.runs, logged.interrupted), (other.runs, true));
        assert!(Logged::from_json(&json!({ "format": "percore-bench/0" })).is_none());
        assert!(Logged::from_json(&json!([1, 2])).is_none());
    }
}
