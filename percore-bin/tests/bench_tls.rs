//! `percore bench https://...` against `percore serve` over TLS (the test
//! certificates of tests/tls/: a CA, a certificate it signed for 127.0.0.1, one
//! that expired): each mode's handshakes counted, resumed with --tls-resume, and
//! reported in text and JSON; a handshake that fails counted as an error of its own
//! kind and said once; an https URL without whom to trust a usage error; and
//! `percore bench compare` over https.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::time::Duration;

use serde_json::Value;
use util::{percore_bin, run_capturing_within, Finished, Server};

/// Bound on a whole bench run: the runs here take well under a second, but a
/// loaded 2-core CI machine may be much slower than that.
const BENCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Bound on a comparison of two short loads, with the two servers it starts.
const COMPARE_TIMEOUT: Duration = Duration::from_secs(40);

/// A comparison of one short round of each target.
const SHORT_COMPARE: [&str; 12] =
    ["-d", "300ms", "--warmup", "100ms", "--rounds", "1", "-c", "2", "-t", "1", "--seed", "0"];

/// A file of the test certificates (tests/tls/, at the workspace's root).
fn tls_file(name: &str) -> String {
    format!("{}/../tests/tls/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `percore serve` with one worker (whose ticket keys are its own, so that every
/// ticket it sends resumes there) over TLS with the certificate `name` (`.pem`,
/// `.key`).
fn tls_server(name: &str) -> Server {
    let (cert, key) = (tls_file(&format!("{name}.pem")), tls_file(&format!("{name}.key")));
    Server::percore(&["--workers", "1", "--tls-cert", &cert, "--tls-key", &key])
}

fn https(server: &Server) -> String {
    format!("https://{}/", server.addr())
}

/// `percore bench ARGS`, to its exit within [`BENCH_TIMEOUT`].
fn bench(args: &[&str]) -> Finished {
    run_capturing_within(&percore_bin(), &[&["bench"], args].concat(), BENCH_TIMEOUT)
}

/// `percore bench ARGS --json`, which must exit with `status`, and its report.
fn bench_json_exiting(args: &[&str], status: i32) -> (Value, String) {
    let all = [args, &["--json"]].concat();
    let run = bench(&all);
    assert_eq!(run.status.code(), Some(status), "bench {all:?}: {}; stderr:\n{}", run.status, run.stderr);
    let report = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("bench {all:?} printed no JSON report ({e}):\n{}", run.stdout));
    (report, run.stderr)
}

fn count(report: &Value, pointer: &str) -> u64 {
    report.pointer(pointer).and_then(Value::as_u64).unwrap_or_else(|| panic!("no {pointer} in:\n{report:#}"))
}

/// The names and counts of a JSON object of counts (`tls.versions`, `tls.suites`).
fn counts(report: &Value, pointer: &str) -> Vec<(String, u64)> {
    let object = report.pointer(pointer).and_then(Value::as_object);
    let object = object.unwrap_or_else(|| panic!("no {pointer} in:\n{report:#}"));
    object.iter().map(|(name, n)| (name.clone(), n.as_u64().expect("a count"))).collect()
}

/// The lines of `stderr` that say why a handshake failed.
fn tls_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|line| line.starts_with("percore bench: TLS: ")).collect()
}

/// Every request of a TLS run answered 200, none failed, and as many handshakes as
/// `handshakes`, each of TLS 1.3 with one cipher suite: what the JSON report says.
fn assert_all_answered(report: &Value, requests: u64, handshakes: u64) {
    assert_eq!(count(report, "/requests"), requests, "{report:#}");
    assert_eq!(count(report, "/status/200"), requests, "{report:#}");
    assert_eq!((count(report, "/errors/tls"), count(report, "/errors/total")), (0, 0), "{report:#}");
    assert_eq!(count(report, "/tls/handshakes"), handshakes, "{report:#}");
    assert_eq!(counts(report, "/tls/versions"), [("TLSv1.3".to_string(), handshakes)], "{report:#}");
    let suites = counts(report, "/tls/suites");
    assert!(
        matches!(&suites[..], [(suite, n)] if suite.starts_with("TLS13_") && *n == handshakes),
        "{report:#}"
    );
    for pointer in
        ["/tls/handshake_us/max", "/tls/handshake_us/percentiles/50", "/tls/handshake_us/percentiles/99"]
    {
        count(report, pointer);
    }
}

#[test]
fn keep_alive_over_tls_makes_one_handshake_per_connection_and_reports_it() {
    let server = tls_server("localhost");
    let (url, ca) = (https(&server), tls_file("ca.pem"));
    let args = [url.as_str(), "-n", "200", "-c", "4", "-t", "1", "--cacert", &ca];
    let (report, stderr) = bench_json_exiting(&args, 0);
    assert_all_answered(&report, 200, 4);
    assert_eq!(count(&report, "/tls/resumed"), 0, "no --tls-resume: {report:#}");
    assert_eq!(report["runs"][0]["url"], url.as_str(), "{report:#}");
    assert!(tls_lines(&stderr).is_empty(), "{stderr}");
    // The text report says the same, and its errors line has the kind of its own.
    let run = bench(&args);
    assert!(run.status.success(), "{}; stderr:\n{}", run.status, run.stderr);
    let text = &run.stdout;
    assert!(
        text.contains("\nerrors:          0 (connect 0, read 0, write 0, timeout 0, parse 0, tls 0)\n"),
        "{text}"
    );
    assert!(text.contains("\ntls versions:    TLSv1.3 4\n"), "{text}");
    assert!(text.contains("\ncipher suites:   TLS13_"), "{text}");
    assert!(text.contains("\nhandshakes:      4 (0 resumed)\n"), "{text}");
    assert!(text.contains("\nhandshake time:  p50 "), "{text}");
}

#[test]
fn insecure_takes_a_certificate_that_cacert_refuses() {
    // Expired: no CA makes it verify; --insecure takes it all the same.
    let server = tls_server("expired");
    let url = https(&server);
    let (report, _) = bench_json_exiting(&[&url, "-n", "50", "-c", "2", "-t", "1", "--insecure"], 0);
    assert_all_answered(&report, 50, 2);
    let ca = tls_file("ca.pem");
    let (report, stderr) = bench_json_exiting(&[&url, "-n", "10", "-c", "2", "-t", "1", "--cacert", &ca], 1);
    assert_eq!(count(&report, "/errors/tls"), 10, "{report:#}");
    assert_eq!(tls_lines(&stderr).len(), 1, "{stderr}");
}

#[test]
fn close_makes_a_full_handshake_per_request_and_tls_resume_resumes_them() {
    let server = tls_server("localhost");
    let (url, ca) = (https(&server), tls_file("ca.pem"));
    let args = [url.as_str(), "-n", "20", "-c", "2", "-t", "1", "--close", "--cacert", &ca];
    let (report, _) = bench_json_exiting(&args, 0);
    assert_all_answered(&report, 20, 20);
    assert_eq!(count(&report, "/tls/resumed"), 0, "{report:#}");
    // Each connection is sent one ticket, before its answer, and the one that
    // replaces it resumes with it: only the first 12, opened together, make full
    // handshakes, however many the loop replaces at once (more than the 8 tickets
    // rustls's own store keeps for a server).
    let args = [url.as_str(), "-n", "120", "-c", "12", "-t", "1", "--close", "--tls-resume", "--cacert", &ca];
    let (report, _) = bench_json_exiting(&args, 0);
    assert_all_answered(&report, 120, 120);
    let (handshakes, resumed) = (count(&report, "/tls/handshakes"), count(&report, "/tls/resumed"));
    assert_eq!(handshakes - resumed, 12, "{resumed} of {handshakes} handshakes resumed: {report:#}");
}

#[test]
fn a_handshake_that_fails_is_a_tls_error_said_once() {
    let server = tls_server("localhost");
    let wrong_name = tls_server("example.test");
    let plain = Server::percore(&["--workers", "1"]);
    let cases = [
        ("a CA that did not sign the certificate", https(&server), tls_file("expired.pem")),
        ("a certificate for another name", https(&wrong_name), tls_file("ca.pem")),
        ("a server that speaks plain HTTP", https(&plain), tls_file("ca.pem")),
    ];
    for (what, url, ca) in cases {
        let (report, stderr) =
            bench_json_exiting(&[&url, "-n", "10", "-c", "3", "-t", "1", "--cacert", &ca], 1);
        assert_eq!(count(&report, "/requests"), 0, "{what}: {report:#}");
        // Every connection failed, each one error of its kind, and no other.
        assert_eq!(
            (count(&report, "/errors/tls"), count(&report, "/errors/total")),
            (10, 10),
            "{what}: {report:#}"
        );
        assert_eq!(count(&report, "/tls/handshakes"), 0, "{what}: {report:#}");
        assert_eq!(tls_lines(&stderr).len(), 1, "{what}: said once:\n{stderr}");
        assert!(stderr.contains("requests failed (--fail-on any)"), "{what}:\n{stderr}");
    }
}

#[test]
fn an_https_url_without_whom_to_trust_is_a_usage_error() {
    let run = bench(&["https://127.0.0.1:1/", "-n", "1"]);
    assert_eq!(run.status.code(), Some(2), "{}; stderr:\n{}", run.status, run.stderr);
    assert!(run.stdout.is_empty(), "a report on a usage error:\n{}", run.stdout);
    assert!(run.stderr.contains("--cacert") && run.stderr.contains("--insecure"), "{}", run.stderr);
    // Both at once, or a CA file that cannot be used, are refused too.
    let ca = tls_file("ca.pem");
    let both = bench(&["https://127.0.0.1:1/", "-n", "1", "--cacert", &ca, "--insecure"]);
    assert_eq!(both.status.code(), Some(2), "{}; stderr:\n{}", both.status, both.stderr);
    let key = tls_file("localhost.key");
    let no_ca = bench(&["https://127.0.0.1:1/", "-n", "1", "--cacert", &key]);
    assert_eq!(no_ca.status.code(), Some(1), "{}; stderr:\n{}", no_ca.status, no_ca.stderr);
    assert!(no_ca.stderr.contains("--cacert") && no_ca.stderr.contains("localhost.key"), "{}", no_ca.stderr);
}

#[test]
fn compare_starts_servers_over_https_when_told_whom_to_trust() {
    let bin = percore_bin();
    let bin = bin.to_str().expect("a UTF-8 binary path");
    let (cert, key, ca) = (tls_file("localhost.pem"), tls_file("localhost.key"), tls_file("ca.pem"));
    let command = format!("'{bin}' serve --port {{port}} --workers 1 --bind 127.0.0.1");
    let serve = |name: &str| format!("{name}={command} --tls-cert '{cert}' --tls-key '{key}'");
    let (a, b) = (serve("a"), serve("b"));
    let servers = ["--cacert", &ca, "--serve", &a, "--serve", &b, "--json"];
    let args = [&["bench", "compare"][..], &SHORT_COMPARE, &servers].concat();
    let run = run_capturing_within(&percore_bin(), &args, COMPARE_TIMEOUT);
    assert_eq!(run.status.code(), Some(0), "{}; stderr:\n{}", run.status, run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}:\n{}", run.stdout));
    let point = &report["points"][0];
    for target in point["targets"].as_array().unwrap_or_else(|| panic!("no targets in:\n{report:#}")) {
        let url = target["url"].as_str().unwrap_or_default();
        assert!(url.starts_with("https://127.0.0.1:"), "{report:#}");
    }
    for result in
        point["rounds"][0]["results"].as_array().unwrap_or_else(|| panic!("no results:\n{report:#}"))
    {
        assert!(count(result, "/responses") > 0 && count(result, "/errors") == 0, "{report:#}");
    }
    // A URL given as https needs whom to trust, before any server starts.
    let run = run_capturing_within(
        &percore_bin(),
        &[&["bench", "compare"][..], &SHORT_COMPARE, &["a=https://127.0.0.1:1/", "b=http://127.0.0.1:1/"]]
            .concat(),
        COMPARE_TIMEOUT,
    );
    assert_eq!(run.status.code(), Some(2), "{}; stderr:\n{}", run.status, run.stderr);
    assert!(run.stderr.contains("--cacert"), "{}", run.stderr);
}
