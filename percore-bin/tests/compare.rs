//! `percore bench compare`: targets loaded in interleaved rounds, the order rotated
//! from a seed; each server's CPU read from /proc (a pid given, or a server it
//! started, whole process tree); a prepare command before each round; verdicts
//! against the first target; the JSON report (`percore-compare/1`), the Markdown
//! table and the plot; and its errors, usage (exit 2) and at run time (exit 1),
//! the rounds completed being reported even then.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::thread;
use std::time::Duration;

use serde_json::Value;
use util::{
    children_of, cpu_ticks, is_running, percore_bin, run_capturing, run_capturing_within, signal, try_signal,
    wait_until, Finished, Running, Server, TempFile, WAIT,
};

/// Bound on a whole comparison: the runs here take a few seconds, one that waits
/// out a server that never listens (10 s) a little more; a loaded 2-core CI
/// machine may be much slower than that.
const COMPARE_TIMEOUT: Duration = Duration::from_secs(40);

/// Short loads: each target, each round.
const SHORT: [&str; 10] = ["-d", "300ms", "--warmup", "100ms", "-c", "10", "-t", "1", "--seed", "0"];

/// /proc's clock ticks per second (USER_HZ).
const TICKS_PER_SECOND: f64 = 100.0;

/// `percore bench compare ARGS`, to its exit within [`COMPARE_TIMEOUT`].
fn compare(args: &[&str]) -> Finished {
    run_capturing_within(&percore_bin(), &[&["bench", "compare"], args].concat(), COMPARE_TIMEOUT)
}

/// `percore bench compare ARGS --json`, which must exit with `status`, and its report.
fn compare_json_exiting(args: &[&str], status: i32) -> Value {
    let all = [args, &["--json"]].concat();
    let run = compare(&all);
    assert_eq!(run.status.code(), Some(status), "compare {all:?}: {}; stderr:\n{}", run.status, run.stderr);
    let report: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("compare {all:?} printed no JSON object ({e}):\n{}", run.stdout));
    assert_eq!(report["format"], "percore-compare/1", "{report:#}");
    report
}

/// `percore bench compare ARGS --json`, which must succeed, and its report.
fn compare_json(args: &[&str]) -> Value {
    compare_json_exiting(args, 0)
}

/// `arg` quoted for `sh -c`.
fn quoted(arg: &str) -> String {
    format!("'{}'", arg.replace('\'', "'\\''"))
}

/// `--serve NAME=...`'s value: `percore serve` with one worker on loopback, plus `extra`.
fn serve(name: &str, extra: &str) -> String {
    let bin = percore_bin();
    let bin = quoted(bin.to_str().expect("a UTF-8 binary path"));
    format!("{name}={bin} serve --port {{port}} --workers 1 --bind 127.0.0.1 {extra}")
}

fn url(server: &Server) -> String {
    format!("http://{}/", server.addr())
}

/// Every round's result for target `name`, in round order.
fn results<'a>(report: &'a Value, name: &str) -> Vec<&'a Value> {
    let rounds = report["rounds"].as_array().unwrap_or_else(|| panic!("no rounds in:\n{report:#}"));
    rounds
        .iter()
        .map(|round| {
            let results = round["results"].as_array().unwrap_or_else(|| panic!("no results in {round:#}"));
            let mut of = results.iter().filter(|r| r["target"] == name);
            let result = of.next().unwrap_or_else(|| panic!("no result for {name} in {round:#}"));
            assert!(of.next().is_none(), "two results for {name} in {round:#}");
            result
        })
        .collect()
}

/// The verdict on target `name`'s `figure`.
fn verdict<'a>(report: &'a Value, name: &str, figure: &str) -> &'a Value {
    let verdicts = report["verdicts"].as_array().unwrap_or_else(|| panic!("no verdicts in:\n{report:#}"));
    verdicts
        .iter()
        .find(|v| v["target"] == name && v["figure"] == figure)
        .unwrap_or_else(|| panic!("no verdict on {name}'s {figure} in:\n{report:#}"))
}

fn number(value: &Value, key: &str) -> f64 {
    value[key].as_f64().unwrap_or_else(|| panic!("no number {key} in {value:#}"))
}

/// Each round's order, as names.
fn orders(report: &Value) -> Vec<Vec<String>> {
    let rounds = report["rounds"].as_array().unwrap_or_else(|| panic!("no rounds in:\n{report:#}"));
    rounds
        .iter()
        .map(|round| {
            let order = round["order"].as_array().unwrap_or_else(|| panic!("no order in {round:#}"));
            order.iter().map(|name| name.as_str().expect("a name").to_string()).collect()
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Verdicts on differences no noise can hide.

#[test]
fn a_delayed_server_has_a_higher_median_latency() {
    let report = compare_json(
        &[
            &SHORT[..],
            &["--rounds", "2", "--serve", &serve("quick", ""), "--serve", &serve("slow", "--delay 20ms")],
        ]
        .concat(),
    );
    let names: Vec<&str> =
        report["targets"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["quick", "slow"], "{report:#}");
    assert_eq!(report["rounds"].as_array().unwrap().len(), 2, "{report:#}");
    let p50 = verdict(&report, "slow", "p50_latency");
    assert_eq!(p50["direction"], "higher", "{report:#}");
    assert_eq!(p50["baseline"], "quick", "{report:#}");
    assert!(number(p50, "median") > 10.0, "{report:#}");
    // 20 ms is a floor on every slow answer.
    for result in results(&report, "slow") {
        assert!(number(result, "p50_us") >= 20_000.0, "{report:#}");
    }
}

#[test]
fn a_64_kib_body_costs_more_server_cpu_per_response() {
    let body = TempFile::with_contents(&vec![b'x'; 64 * 1024]);
    let big = serve("big", &format!("--body-file {}", quoted(body.path())));
    let report = compare_json(
        &[&SHORT[..], &["--rounds", "3", "--serve", &serve("small", ""), "--serve", &big]].concat(),
    );
    let cpu = verdict(&report, "big", "server_cpu_per_response");
    assert_eq!(cpu["direction"], "higher", "{report:#}");
    assert_eq!(cpu["rounds"], 3, "{report:#}");
}

// ---------------------------------------------------------------------------
// Server CPU.

#[test]
fn the_cpu_of_started_servers_is_read_every_round() {
    let report = compare_json(
        &[&SHORT[..], &["--rounds", "2", "--serve", &serve("one", ""), "--serve", &serve("two", "")]]
            .concat(),
    );
    for target in report["targets"].as_array().unwrap() {
        assert!(target["pid"].as_u64().is_some_and(|pid| pid > 0), "{report:#}");
    }
    for name in ["one", "two"] {
        let results = results(&report, name);
        assert_eq!(results.len(), 2, "{report:#}");
        for result in results {
            assert!(number(result, "responses") > 0.0, "{report:#}");
            assert!(number(result, "server_cpu_s") > 0.0, "{name}: {report:#}");
            assert!(number(result, "server_cpu_share") > 0.0, "{name}: {report:#}");
            assert!(number(result, "server_cpu_us_per_response") > 0.0, "{name}: {report:#}");
        }
    }
    // Every round read the CPU, so it leads the verdicts.
    verdict(&report, "two", "server_cpu_per_response");
}

#[test]
fn the_cpu_of_a_given_pid_counts_its_workers() {
    let server = Server::percore(&["--workers", "2"]);
    let (pid, url) = (server.pid(), url(&server));
    let started = wait_until(WAIT, || children_of(pid).len() == 2);
    assert!(started, "not two workers; stderr:\n{}", server.stderr());
    let master_before = cpu_ticks(pid);
    let report = compare_json(
        &[
            &SHORT[..],
            &["--rounds", "2", &format!("first={url}"), &format!("second={url}")],
            &["--pid", &format!("first={pid}"), "--pid", &format!("second={pid}")],
        ]
        .concat(),
    );
    let master_cpu = (cpu_ticks(pid) - master_before) as f64 / TICKS_PER_SECOND;
    for target in report["targets"].as_array().unwrap() {
        assert_eq!(target["pid"], pid, "{report:#}");
    }
    let mut total = 0.0;
    for name in ["first", "second"] {
        for result in results(&report, name) {
            let cpu = number(result, "server_cpu_s");
            assert!(cpu > 0.0, "{name}: {report:#}");
            assert!(number(result, "server_cpu_us_per_response") > 0.5, "{name}: {report:#}");
            total += cpu;
        }
    }
    // The master alone used `master_cpu` over the whole run, more than over its
    // rounds: what the rounds read beyond it is its workers'.
    assert!(
        total > master_cpu,
        "the rounds read {total} s of CPU, no more than the master's own {master_cpu} s: workers not counted\n{report:#}"
    );
}

// ---------------------------------------------------------------------------
// Prepare commands and the order of the rounds.

#[test]
fn prepare_runs_once_a_round_for_each_target() {
    let server = Server::percore(&["--workers", "1"]);
    let url = url(&server);
    let (first, second) = (TempFile::with_contents(b""), TempFile::with_contents(b""));
    let report = compare_json(
        &[
            &SHORT[..],
            &["--rounds", "3", &format!("first={url}"), &format!("second={url}")],
            &["--prepare", &format!("first=echo x >> {}", quoted(first.path()))],
            &["--prepare", &format!("second=echo x >> {}", quoted(second.path()))],
        ]
        .concat(),
    );
    assert_eq!(report["rounds"].as_array().unwrap().len(), 3, "{report:#}");
    for file in [&first, &second] {
        let text = std::fs::read_to_string(file.path()).unwrap();
        assert_eq!(text, "x\nx\nx\n", "{}", file.path());
    }
}

#[test]
fn the_order_rotates_from_the_seed() {
    let server = Server::percore(&["--workers", "1"]);
    let url = url(&server);
    let targets = [format!("first={url}"), format!("second={url}")];
    let load = ["-d", "200ms", "--warmup", "100ms", "-c", "10", "-t", "1", "--rounds", "2"];
    let run = |seed: &str| compare_json(&[&load[..], &["--seed", seed, &targets[0], &targets[1]]].concat());

    let report = run("0");
    assert_eq!(report["seed"], 0, "{report:#}");
    assert_eq!(orders(&report), [["first", "second"], ["second", "first"]], "{report:#}");
    // Each round's results come in its order.
    for round in report["rounds"].as_array().unwrap() {
        let got: Vec<&Value> = round["results"].as_array().unwrap().iter().map(|r| &r["target"]).collect();
        let want: Vec<&Value> = round["order"].as_array().unwrap().iter().collect();
        assert_eq!(got, want, "{report:#}");
    }

    let report = run("1");
    assert_eq!(report["seed"], 1, "{report:#}");
    assert_eq!(orders(&report), [["second", "first"], ["first", "second"]], "{report:#}");
}

// ---------------------------------------------------------------------------
// Bad input.

#[test]
fn usage_errors_exit_2() {
    let url = "http://127.0.0.1:1/";
    let cases: [(&str, Vec<String>); 4] = [
        ("one target", vec![format!("only={url}")]),
        ("one --serve", vec!["--serve".into(), serve("only", "")]),
        ("a name twice", vec![format!("twin={url}"), format!("twin={url}")]),
        (
            "--pid of no target",
            vec![format!("one={url}"), format!("two={url}"), "--pid".into(), "ghost=1".into()],
        ),
    ];
    for (what, args) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = compare(&[&SHORT[..], &args].concat());
        assert_eq!(run.status.code(), Some(2), "{what}: {args:?}: {}; stderr:\n{}", run.status, run.stderr);
        assert!(run.stdout.is_empty(), "{what}: a report on a usage error:\n{}", run.stdout);
    }
    let run =
        compare(&[&SHORT[..], &[&format!("one={url}"), &format!("two={url}"), "--pid", "ghost=1"]].concat());
    assert!(run.stderr.contains("ghost"), "the error does not name ghost:\n{}", run.stderr);
}

#[test]
fn a_pid_that_does_not_exist_is_an_error() {
    let server = Server::percore(&["--workers", "1"]);
    let url = url(&server);
    // Beyond any pid_max (at most 2^22).
    let pid = i32::MAX.to_string();
    let run = compare(
        &[&SHORT[..], &[&format!("base={url}"), &format!("ghost={url}"), "--pid", &format!("ghost={pid}")]]
            .concat(),
    );
    assert_eq!(run.status.code(), Some(1), "{}; stderr:\n{}", run.status, run.stderr);
    assert!(run.stderr.contains(&pid), "the error does not name pid {pid}:\n{}", run.stderr);
    assert!(run.stderr.contains("ghost"), "the error does not name ghost:\n{}", run.stderr);
}

#[test]
fn a_server_that_never_listens_is_an_error_and_is_stopped() {
    // A distinctive duration, to tell this sleep from any other.
    let sleep = "sleep 60.4217";
    // {port} in a comment: it never listens there.
    let (base, mute) = (serve("base", ""), format!("mute={sleep} # {{port}}"));
    let args = [&SHORT[..], &["--serve", &base, "--serve", &mute]].concat();
    let running = Running::start(&percore_bin(), &[&["bench", "compare"], &args[..]].concat());
    // Its children: the started servers, both run by `sh -c exec ...`.
    let is_sleep = |pid: u32| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).replace('\0', " ").contains(sleep))
    };
    let mut started = Vec::new();
    let seen = wait_until(WAIT, || {
        for pid in children_of(running.pid()) {
            if !started.contains(&pid) {
                started.push(pid);
            }
        }
        started.iter().any(|&pid| is_sleep(pid))
    });
    let run = running.finish_within(COMPARE_TIMEOUT);
    assert!(seen, "no `{sleep}` started; children seen: {started:?}; stderr:\n{}", run.stderr);
    assert_eq!(run.status.code(), Some(1), "{}; stderr:\n{}", run.status, run.stderr);
    assert!(run.stderr.contains("mute"), "the error does not name mute:\n{}", run.stderr);
    for pid in started {
        assert!(!is_running(pid), "process {pid} (started by compare) outlived it");
    }
}

#[test]
fn a_failing_prepare_is_an_error_naming_its_target() {
    let server = Server::percore(&["--workers", "1"]);
    let url = url(&server);
    let (base, broken) = (format!("base={url}"), format!("broken={url}"));
    let args = [&SHORT[..], &["--rounds", "2", &base, &broken, "--prepare", "broken=false"]].concat();
    let report = compare_json_exiting(&args, 1);
    assert!(report["stopped"].as_str().is_some_and(|why| why.contains("broken")), "{report:#}");
    assert_eq!(report["rounds"].as_array().map(Vec::len), Some(0), "{report:#}");
    let run = compare(&args);
    assert_eq!(run.status.code(), Some(1), "{}; stderr:\n{}", run.status, run.stderr);
    assert!(run.stderr.contains("broken"), "the error does not name broken:\n{}", run.stderr);
}

#[test]
fn a_server_that_dies_mid_run_stops_the_comparison_with_its_report() {
    let base = Server::percore(&["--workers", "1"]);
    let mut victim = Server::percore(&["--workers", "1"]);
    let pid = victim.pid();
    let (base_target, victim_target) = (format!("base={}", url(&base)), format!("victim={}", url(&victim)));
    let victim_pid = format!("victim={pid}");
    let args = [
        &["-d", "1s", "--warmup", "100ms", "-c", "10", "-t", "1", "--seed", "0", "--rounds", "3"][..],
        &[&base_target, &victim_target, "--pid", &victim_pid],
    ]
    .concat();
    let killer = JoinOnDrop(Some(thread::spawn(move || {
        thread::sleep(Duration::from_millis(1500));
        // The master and its workers, and the master reaped, as its shell would.
        let workers = children_of(pid);
        signal(pid, "KILL");
        for worker in workers {
            try_signal(worker, "KILL");
        }
        victim.wait_exit(WAIT);
    })));
    let report = compare_json_exiting(&args, 1);
    drop(killer);
    let stopped = report["stopped"].as_str().unwrap_or_else(|| panic!("not stopped:\n{report:#}"));
    assert!(stopped.contains("victim"), "{report:#}");
    let rounds = report["rounds"].as_array().unwrap_or_else(|| panic!("no rounds:\n{report:#}"));
    assert!(rounds.len() < 3, "{report:#}");
}

/// Joins its thread when dropped, a failing test too, so that the thread's
/// server is stopped before the test binary may exit.
struct JoinOnDrop(Option<thread::JoinHandle<()>>);

impl Drop for JoinOnDrop {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            let joined = handle.join();
            if !thread::panicking() {
                joined.expect("the thread panicked");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The Markdown table and the plot.

#[test]
fn markdown_and_plot_files_are_written() {
    let server = Server::percore(&["--workers", "1"]);
    let url = url(&server);
    let (markdown, plot) = (TempFile::with_contents(b""), TempFile::with_contents(b""));
    let svg = format!("{}.svg", plot.path());
    let _svg_file = SvgFile(svg.clone());
    let run = compare(
        &[
            &SHORT[..],
            &["--rounds", "2", &format!("first={url}"), &format!("second={url}")],
            &["--markdown", markdown.path(), "--plot", &svg],
        ]
        .concat(),
    );
    assert!(run.status.success(), "{}; stderr:\n{}", run.status, run.stderr);
    let table = std::fs::read_to_string(markdown.path()).unwrap();
    assert_eq!(table.lines().next(), Some("```sh"), "{table}");
    assert!(table.contains("| first |") && table.contains("| second |"), "{table}");
    let drawn = std::fs::read_to_string(&svg).unwrap_or_else(|e| panic!("no plot at {svg}: {e}"));
    let start = drawn.trim_start();
    assert!(
        start.starts_with("<svg") || start.starts_with("<?xml"),
        "not an SVG: {:?}",
        &drawn[..drawn.len().min(200)]
    );
    assert!(drawn.contains("first") && drawn.contains("second"), "the plot names no target");
}

/// A file a run writes, removed at the end.
struct SvgFile(String);

impl Drop for SvgFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn a_server_killed_mid_load_and_not_yet_reaped_is_gone() {
    // The server is killed half-way through its load, and stays a zombie until
    // its parent (this test) reaps it at the end, as under a parent slow to reap.
    let base = Server::percore(&["--workers", "1"]);
    let victim = Server::percore(&["--workers", "1"]);
    let pid = victim.pid();
    let started = wait_until(WAIT, || children_of(pid).len() == 1);
    assert!(started, "no worker; stderr:\n{}", victim.stderr());
    let worker = children_of(pid)[0];
    let (base_target, victim_target) = (format!("base={}", url(&base)), format!("victim={}", url(&victim)));
    let victim_pid = format!("victim={pid}");
    // In the background: prepare returns at once, the load starts 100 ms later.
    let prepare = format!("victim=(sleep 0.5; kill -KILL {pid} {worker}) >/dev/null 2>&1 &");
    let args = [
        &["-d", "1s", "--warmup", "100ms", "-c", "10", "-t", "1", "--seed", "1", "--rounds", "2"][..],
        &[&base_target, &victim_target, "--pid", &victim_pid, "--prepare", &prepare],
    ]
    .concat();
    let report = compare_json_exiting(&args, 1);
    let stopped = report["stopped"].as_str().unwrap_or_else(|| panic!("not stopped:\n{report:#}"));
    assert!(stopped.contains("victim"), "{report:#}");
    for result in results(&report, "victim") {
        for key in ["server_cpu_s", "server_cpu_share", "server_cpu_us_per_response"] {
            assert!(result[key].as_f64().is_none_or(|v| v >= 0.0), "negative {key}:\n{report:#}");
        }
    }
    // Its server died during the first round's load: that round is not complete.
    assert_eq!(report["rounds"].as_array().map(Vec::len), Some(0), "{report:#}");
}

#[test]
fn help_says_what_plot_draws_for_a_compare_and_for_a_run() {
    let help = |args: &[&str]| {
        let run = run_capturing(&percore_bin(), args);
        assert!(run.status.success(), "{run:?}");
        run.stdout.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let plot = |text: &str| {
        let at = text.find("--plot").unwrap_or_else(|| panic!("no --plot in:\n{text}"));
        text[at..].split(" --").next().unwrap().to_string()
    };
    // One flag, one text: it names what each command draws.
    for args in [&["bench", "compare", "--help"][..], &["bench", "--help"]] {
        let text = plot(&help(args));
        assert!(text.contains("for a compare, each target's server CPU per response"), "{args:?}: {text}");
        assert!(text.contains("round by round"), "{args:?}: {text}");
        assert!(text.contains("for a run or a merge, the latency by percentile"), "{args:?}: {text}");
    }
}

#[test]
fn e2e_help_names_its_other_modes() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../benches/e2e.py");
    let run = run_capturing(std::path::Path::new("python3"), &[script, "--help"]);
    assert!(run.status.success(), "{run:?}");
    let text = run.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains("usage: e2e.py [loaders | compare]"), "{text}");
    assert!(text.contains("`e2e.py loaders`") && text.contains("`e2e.py compare`"), "{text}");
}
