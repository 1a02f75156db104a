//! `percore bench compare`: targets loaded in interleaved rounds, the order rotated
//! from a seed; each server's CPU read from /proc (a pid given, or a server it
//! started, whole process tree); a prepare command before each round; verdicts
//! against the first target; the JSON report (`percore-compare/2`), the Markdown
//! table and the plot; and its errors, usage (exit 2) and at run time (exit 1),
//! the rounds completed being reported even then. Then the grid: a comparison at
//! each connection count on each server CPU set, the servers restarted on each set,
//! its plan and progress on standard error, its tables and charts, and Ctrl-C.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::thread;
use std::time::Duration;

use serde_json::Value;
use util::{
    children_of, cpu_ticks, cpus_allowed, euid, is_running, percore_bin, run_capturing, run_capturing_within,
    signal, tool_available, try_signal, wait_until, Finished, Running, Server, TempFile, WAIT,
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
    one_point(grid_json_exiting(args, status).0)
}

/// `percore bench compare ARGS --json`, which must exit with `status`: its whole
/// report, every point, and its standard error.
fn grid_json_exiting(args: &[&str], status: i32) -> (Value, String) {
    let all = [args, &["--json"]].concat();
    let run = compare(&all);
    (report_of(&run, &all, status), run.stderr)
}

/// The JSON report of a comparison run with `args`, which must have exited with `status`.
fn report_of(run: &Finished, args: &[&str], status: i32) -> Value {
    assert_eq!(run.status.code(), Some(status), "compare {args:?}: {}; stderr:\n{}", run.status, run.stderr);
    let report: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("compare {args:?} printed no JSON object ({e}):\n{}", run.stdout));
    assert_eq!(report["format"], "percore-compare/2", "{report:#}");
    report
}

/// A comparison of one point (one -c, one server CPU set) as that point: its
/// targets, rounds and verdicts, with the report's seed and stopped. A comparison
/// stopped before its first round has no point: its rounds and verdicts are empty.
fn one_point(report: Value) -> Value {
    let points = report["points"].as_array().unwrap_or_else(|| panic!("no points in:\n{report:#}"));
    assert!(points.len() <= 1, "more than one point:\n{report:#}");
    let mut point =
        points.first().cloned().unwrap_or_else(|| serde_json::json!({ "rounds": [], "verdicts": [] }));
    for key in ["format", "seed", "stopped"] {
        point[key] = report[key].clone();
    }
    point
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
    format!("{name}={}", serve_command(extra))
}

/// `percore serve` with one worker on loopback at `{port}`, plus `extra`, for `sh -c`.
fn serve_command(extra: &str) -> String {
    let bin = percore_bin();
    let bin = quoted(bin.to_str().expect("a UTF-8 binary path"));
    format!("{bin} serve --port {{port}} --workers 1 --bind 127.0.0.1 {extra}")
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
        usage_error(what, &[&SHORT[..], &args].concat());
    }
    let stderr = usage_error(
        "--pid of no target",
        &[&SHORT[..], &[&format!("one={url}"), &format!("two={url}"), "--pid", "ghost=1"]].concat(),
    );
    assert!(stderr.contains("ghost"), "the error does not name ghost:\n{stderr}");
}

/// `percore bench compare ARGS` (`what`, for the messages), which must be a usage
/// error: exit status 2, nothing on standard output. Its standard error.
fn usage_error(what: &str, args: &[&str]) -> String {
    let run = compare(args);
    assert_eq!(run.status.code(), Some(2), "{what}: {args:?}: {}; stderr:\n{}", run.status, run.stderr);
    assert!(run.stdout.is_empty(), "{what}: a report on a usage error:\n{}", run.stdout);
    run.stderr
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

// ---------------------------------------------------------------------------
// The grid.

/// [`SHORT`]'s loads with `-c connections` (a list makes a grid) instead of its -c 10.
fn short_at(connections: &str) -> Vec<&str> {
    let mut args = SHORT.to_vec();
    let at = args.iter().position(|&arg| arg == "-c").expect("SHORT gives -c");
    args[at + 1] = connections;
    args
}

/// Two server CPU sets, written apart: the first CPU this process may run on, and
/// every CPU it may run on, in /proc's syntax (on a machine of one CPU, that CPU
/// again as a range, `0-0`, which compare takes for a set of its own).
fn server_cpu_sets() -> (String, String) {
    let all = cpus_allowed(std::process::id()).expect("this process's CPUs");
    let first = all.split([',', '-']).next().expect("a CPU").to_string();
    let all = if all == first { format!("{first}-{first}") } else { all };
    (first, all)
}

/// `--serve NAME=...`'s value: [`serve`]'s server, started by a shell that first
/// appends the CPUs it may run on (`Cpus_allowed_list: 0-1`) to `record`.
fn serve_recording_cpus(name: &str, record: &TempFile) -> String {
    let record = quoted(record.path());
    format!("{name}=grep Cpus_allowed_list /proc/self/status >> {record}; exec {}", serve_command(""))
}

/// The CPU lists [`serve_recording_cpus`]' servers recorded, in the order they started.
fn recorded_cpus(record: &TempFile) -> Vec<String> {
    let text = std::fs::read_to_string(record.path()).expect("reading the recorded CPUs");
    text.lines().map(|line| line.trim_start_matches("Cpus_allowed_list:").trim().to_string()).collect()
}

/// `percore bench compare ARGS` started, its standard error appended to `stderr`, to
/// be read while it runs (the result's own `stderr` is then empty).
fn compare_started(args: &[&str], stderr: &TempFile) -> Running {
    let bin = percore_bin();
    let bin = bin.to_str().expect("a UTF-8 binary path");
    let shell = ["-c", r#"exec "$@" 2>>"$0""#, stderr.path(), bin, "bench", "compare"];
    Running::start(std::path::Path::new("sh"), &[&shell[..], args].concat())
}

/// The points of a grid's report, in the order they ran.
fn points(report: &Value) -> &[Value] {
    report["points"].as_array().unwrap_or_else(|| panic!("no points in:\n{report:#}"))
}

/// Each point of a grid's report as its connections and its server CPU set.
fn grid_of(report: &Value) -> Vec<(u64, Option<&str>)> {
    let connections = |point: &Value| point["connections"].as_u64();
    let points = points(report).iter();
    let grid = points.map(|point| Some((connections(point)?, point["server_cpus"].as_str())));
    grid.collect::<Option<_>>().unwrap_or_else(|| panic!("a point without connections in:\n{report:#}"))
}

/// The pids of a point's targets, in order.
fn pids(point: &Value) -> Vec<u32> {
    let targets = point["targets"].as_array().unwrap_or_else(|| panic!("no targets in {point:#}"));
    let pid = |target: &Value| target["pid"].as_u64().and_then(|pid| u32::try_from(pid).ok());
    targets.iter().map(|target| pid(target).unwrap_or_else(|| panic!("no pid in {target:#}"))).collect()
}

/// The names of a point's targets, in order.
fn target_names(point: &Value) -> Vec<&str> {
    let targets = point["targets"].as_array().unwrap_or_else(|| panic!("no targets in {point:#}"));
    targets
        .iter()
        .map(|target| target["name"].as_str().unwrap_or_else(|| panic!("no name in {target:#}")))
        .collect()
}

/// The lines of standard error that say a load is done (`[ 1/16] c3 ...`).
fn progress_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|line| line.starts_with('[')).collect()
}

/// How the progress lines of a grid start, in order, the targets `names` rotated from
/// seed 0: for each server CPU set (`None`: no --server-cpus), each connection
/// count, each round, each target in the round's order (`[ 1/16] c3 CPUs 0 round 1/2 a: `).
fn progress_expected(
    sets: &[Option<&str>],
    connections: &[u64],
    rounds: usize,
    names: &[&str],
) -> Vec<String> {
    let loads = sets.len() * connections.len() * rounds * names.len();
    let width = loads.to_string().len();
    let (mut lines, mut overall) = (Vec::new(), 0);
    for set in sets {
        let cpus = set.map_or(String::new(), |set| format!(" CPUs {set}"));
        for c in connections {
            for round in 1..=rounds {
                for i in 0..names.len() {
                    let name = names[(overall + i) % names.len()];
                    let done = lines.len() + 1;
                    lines
                        .push(format!("[{done:>width$}/{loads}] c{c}{cpus} round {round}/{rounds} {name}: "));
                }
                overall += 1;
            }
        }
    }
    lines
}

/// The progress lines of `stderr` start as `expected` (a prefix of it when `all` is
/// false), each then giving the load's figures.
fn assert_progress(stderr: &str, expected: &[String], all: bool) {
    let lines = progress_lines(stderr);
    let count_ok = if all { lines.len() == expected.len() } else { lines.len() <= expected.len() };
    assert!(count_ok, "{} progress lines, {} loads planned:\n{stderr}", lines.len(), expected.len());
    for (line, start) in lines.iter().zip(expected) {
        let figures =
            line.strip_prefix(start.as_str()).unwrap_or_else(|| panic!("not {start:?}...:\n{stderr}"));
        let said = figures.contains(" responses/s, p99 ") && figures.ends_with(" errors");
        assert!(said, "no figures in {line:?}:\n{stderr}");
    }
}

/// The plan on the first line of `stderr`: `plan`, then `about 12 s (until 03:41 UTC)`.
fn assert_timed_plan(stderr: &str, plan: &str) {
    let line = stderr.lines().next().unwrap_or_default();
    let estimate = line.strip_prefix(plan).and_then(|rest| rest.strip_prefix("about "));
    let estimate = estimate.unwrap_or_else(|| panic!("the plan is not {plan:?}about ...:\n{stderr}"));
    let (how_long, until) = estimate.split_once(" (until ").unwrap_or_else(|| panic!("no end: {line}"));
    let amount = how_long.strip_suffix(" s").or_else(|| how_long.strip_suffix(" min"));
    assert!(amount.is_some_and(|amount| amount.parse::<u64>().is_ok()), "how long: {line}");
    let clock = until.strip_suffix(" UTC)").and_then(|clock| clock.split_once(':'));
    let clock =
        clock.and_then(|(hours, minutes)| Some((hours.parse::<u8>().ok()?, minutes.parse::<u8>().ok()?)));
    assert!(clock.is_some_and(|(hours, minutes)| hours < 24 && minutes < 60), "until when: {line}");
}

/// The rows of the Markdown table under `heading` in `text`, each as its cells,
/// its header first (the `|---|` line left out).
fn markdown_table<'a>(text: &'a str, heading: &str) -> Vec<Vec<&'a str>> {
    let mut lines = text.lines().skip_while(|line| *line != heading);
    assert!(lines.next().is_some(), "no {heading:?} in:\n{text}");
    lines
        .skip_while(|line| line.trim().is_empty())
        .take_while(|line| line.starts_with('|'))
        .filter(|line| !line.starts_with("|---"))
        .map(|line| line.trim().trim_matches('|').split('|').map(str::trim).collect())
        .collect()
}

/// Each `<text>` of the SVG file at `path`: its `text-anchor` and its text.
/// (plotters centres the x axis's labels, and right-aligns the y axis's.)
fn svg_texts(path: &str) -> Vec<(String, String)> {
    let svg = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("no chart at {path}: {e}"));
    let element = |element: &str| {
        let (attributes, rest) = element.split_once('>')?;
        let text = rest.split_once("</text>")?.0.trim();
        let anchor = attributes.split_once("text-anchor=\"").and_then(|(_, anchor)| anchor.split('"').next());
        Some((anchor.unwrap_or_default().to_string(), text.to_string()))
    };
    svg.split("<text").skip(1).filter_map(element).collect()
}

/// A grid of -c 3,5 on the server CPU sets `sets` (see [`server_cpu_sets`]), a round
/// at each point, of targets a and b, which `serves` start (`--serve` values).
fn two_by_two<'a>(serves: [&'a str; 2], sets: &'a (String, String)) -> Vec<&'a str> {
    let [a, b] = serves;
    let grid =
        ["--rounds", "1", "--serve", a, "--serve", b, "--server-cpus", &sets.0, "--server-cpus", &sets.1];
    [&short_at("3,5")[..], &grid].concat()
}

/// The lines of a grid of -c 3,5 on the sets `first` and `all`: each target on each
/// set, as the tables and the charts name them.
fn series_of(first: &str, all: &str) -> Vec<String> {
    let names = [first, all].map(|set| ["a", "b"].map(|name| format!("{name} (CPUs {set})")));
    names.into_iter().flatten().collect()
}

#[test]
fn a_grid_runs_each_connection_count_on_each_server_cpu_set_restarting_the_servers() {
    let sets = server_cpu_sets();
    let (first, all) = &sets;
    let record = TempFile::with_contents(b"");
    let (a, b) = (serve_recording_cpus("a", &record), serve_recording_cpus("b", &record));
    let (report, _) = grid_json_exiting(&two_by_two([&a, &b], &sets), 0);
    assert_eq!(report["targets"], serde_json::json!(["a", "b"]), "{report:#}");
    assert_eq!(report["stopped"], Value::Null, "{report:#}");
    let (on_first, on_all) = (Some(first.as_str()), Some(all.as_str()));
    assert_eq!(grid_of(&report), [(3, on_first), (5, on_first), (3, on_all), (5, on_all)], "{report:#}");
    for point in points(&report) {
        assert_eq!(target_names(point), ["a", "b"], "{report:#}");
        assert_eq!(point["rounds"].as_array().map(Vec::len), Some(1), "{report:#}");
        for name in ["a", "b"] {
            results(point, name);
        }
    }
    // Each set's servers, started once for its points, and anew for the next set.
    let [at_3, at_5, again_at_3, again_at_5] = points(&report) else { unreachable!("four points") };
    assert_eq!(pids(at_3), pids(at_5), "{report:#}");
    assert_eq!(pids(again_at_3), pids(again_at_5), "{report:#}");
    for (before, after) in pids(at_3).into_iter().zip(pids(again_at_3)) {
        assert_ne!(before, after, "a server not restarted for the second CPU set:\n{report:#}");
    }
    // Each started on its set: a and b on the first, then a and b on every CPU.
    let every = cpus_allowed(std::process::id()).expect("this process's CPUs");
    assert_eq!(recorded_cpus(&record), [first.as_str(), first, &every, &every], "{report:#}");
    for pid in pids(at_3).into_iter().chain(pids(again_at_3)) {
        assert!(!is_running(pid), "server {pid} (started by compare) outlived it");
    }
}

#[test]
fn stderr_says_the_plan_then_one_numbered_line_per_load() {
    let (first, all) = server_cpu_sets();
    let (a, b) = (serve("a", ""), serve("b", ""));
    let load = ["-n", "100", "--warmup", "100ms", "-t", "1", "--seed", "0", "-c", "3,5", "--rounds", "3"];
    let sets = ["--server-cpus", &first, "--server-cpus", &all];
    let (_, stderr) = grid_json_exiting(&[&load[..], &["--serve", &a, "--serve", &b], &sets].concat(), 0);
    let plan =
        "compare: 4 points (-c 3,5 on 2 server CPU sets), 2 targets, 3 rounds: 24 loads of a set number \
                of requests; how long they take is not known before";
    assert_eq!(stderr.lines().next(), Some(plan), "{stderr}");
    let expected = progress_expected(&[Some(&first), Some(&all)], &[3, 5], 3, &["a", "b"]);
    assert_progress(&stderr, &expected, true);
}

#[test]
fn a_plan_of_timed_loads_says_about_how_long_it_takes() {
    let server = Server::percore(&["--workers", "1"]);
    let url = url(&server);
    let targets = [format!("first={url}"), format!("second={url}")];
    let (_, stderr) =
        grid_json_exiting(&[&SHORT[..], &["--rounds", "2", &targets[0], &targets[1]]].concat(), 0);
    assert_timed_plan(
        &stderr,
        "compare: 1 point (-c 10 on 1 server CPU set), 2 targets, 2 rounds: 4 loads of 0.3s, with 2 warm-ups of 0.1s: ",
    );
    assert_progress(&stderr, &progress_expected(&[None], &[10], 2, &["first", "second"]), true);
}

#[test]
fn a_grid_is_reported_point_by_point_and_in_markdown_tables_against_the_connections() {
    let sets = server_cpu_sets();
    let (first, all) = &sets;
    let (a, b) = (serve("a", ""), serve("b", ""));
    let markdown = TempFile::with_contents(b"");
    let run = compare(&[&two_by_two([&a, &b], &sets)[..], &["--markdown", markdown.path()]].concat());
    assert!(run.status.success(), "{}; stderr:\n{}", run.status, run.stderr);
    let points: Vec<String> = [first, all]
        .iter()
        .flat_map(|set| [3, 5].map(|c| format!("-c {c}, servers on CPUs {set}")))
        .collect();
    // The text report: the grid in a line, then each point under its heading.
    let report = &run.stdout;
    let grid = "2 targets, 4 points, 4 rounds, the order rotated from seed 0; the baseline is a";
    assert_eq!(report.lines().next(), Some(grid), "{report}");
    let headings: Vec<&str> = report.lines().filter(|line| line.starts_with("-c ")).collect();
    assert_eq!(headings, points.iter().map(|point| format!("{point}:")).collect::<Vec<_>>(), "{report}");

    let text = std::fs::read_to_string(markdown.path()).unwrap();
    assert_eq!(text.lines().next(), Some("```sh"), "{text}");
    let series = series_of(first, all);
    let header: Vec<&str> = ["connections"].into_iter().chain(series.iter().map(String::as_str)).collect();
    for figure in ["responses per second", "99th percentile latency"] {
        let table = markdown_table(&text, &format!("### {figure} (median of each point's rounds)"));
        assert_eq!(table.first(), Some(&header), "{figure}:\n{text}");
        let rows: Vec<&str> = table.iter().skip(1).map(|row| row[0]).collect();
        assert_eq!(rows, ["3", "5"], "{figure}: not a row per connection count:\n{text}");
        for row in &table[1..] {
            assert!(row.len() == header.len() && !row.contains(&"–"), "{figure}: {row:?}:\n{text}");
        }
    }
    let sections: Vec<&str> = text.lines().filter_map(|line| line.strip_prefix("### -c ")).collect();
    let want: Vec<&str> = points.iter().map(|point| &point["-c ".len()..]).collect();
    assert_eq!(sections, want, "{text}");
    for point in &points {
        let table = markdown_table(&text, &format!("### {point}"));
        let targets: Vec<&str> = table.iter().skip(1).map(|row| row[0]).collect();
        assert_eq!(targets, ["a", "b"], "{point}:\n{text}");
    }
}

#[test]
fn a_grid_is_drawn_against_the_connections_a_line_per_target_and_server_cpu_set() {
    let base = TempFile::with_contents(b"");
    let (rate, p99) =
        (SvgFile(format!("{}-rate.svg", base.path())), SvgFile(format!("{}-p99.svg", base.path())));
    let sets = server_cpu_sets();
    let (a, b) = (serve("a", ""), serve("b", ""));
    let charts = ["--rate-plot", &rate.0, "--p99-plot", &p99.0];
    let run = compare(&[&two_by_two([&a, &b], &sets)[..], &charts].concat());
    assert!(run.status.success(), "{}; stderr:\n{}", run.status, run.stderr);
    for chart in [&rate.0, &p99.0] {
        let texts = svg_texts(chart);
        for name in series_of(&sets.0, &sets.1) {
            assert!(texts.iter().any(|(_, text)| *text == name), "{chart}: no line named {name}: {texts:?}");
        }
        let numbers = texts.iter().filter(|(anchor, text)| anchor == "middle" && text.parse::<u64>().is_ok());
        let x_labels: Vec<&str> = numbers.map(|(_, text)| text.as_str()).collect();
        assert_eq!(x_labels, ["3", "5"], "{chart}: the x axis labels each connection count once: {texts:?}");
    }
}

#[test]
fn a_bad_grid_is_a_usage_error() {
    let url = "http://127.0.0.1:1/";
    let targets = [format!("one={url}"), format!("two={url}")];
    let targets = [&targets[0][..], &targets[1], "--json"];
    for bad in ["0", "1000001", "30,x"] {
        let stderr = usage_error(&format!("-c {bad}"), &[&short_at(bad)[..], &targets].concat());
        let value = bad.rsplit(',').next().unwrap_or(bad);
        let says = stderr.contains(&format!("{value:?}")) && stderr.contains("connections");
        assert!(says, "-c {bad}: the error does not name {value} as a bad connection count:\n{stderr}");
    }

    let plot = TempFile::with_contents(b"");
    let svg = SvgFile(format!("{}.svg", plot.path()));
    let stderr =
        usage_error("--plot of a grid", &[&short_at("3,5")[..], &targets, &["--plot", &svg.0]].concat());
    assert!(stderr.contains("--plot"), "the error does not name --plot:\n{stderr}");
    assert!(!std::path::Path::new(&svg.0).exists(), "a grid drew --plot {}", svg.0);

    let (first, all) = server_cpu_sets();
    let (given, served) = (format!("given={url}"), serve("served", ""));
    let sets = ["--server-cpus", &first, "--server-cpus", &all];
    let stderr = usage_error(
        "two server CPU sets and a target not served",
        &[&SHORT[..], &[&given, "--serve", &served, "--json"], &sets].concat(),
    );
    assert!(stderr.contains("given is not started by --serve"), "{stderr}");
    let sets = ["--server-cpus", &first, "--server-cpus", &first];
    let stderr = usage_error(
        "a server CPU set twice",
        &[&SHORT[..], &["--serve", &served, "--serve", &serve("other", ""), "--json"], &sets].concat(),
    );
    assert!(stderr.contains(&format!("--server-cpus {first} is given twice")), "{stderr}");
}

#[test]
fn the_order_goes_on_rotating_from_one_point_to_the_next() {
    let server = Server::percore(&["--workers", "1"]);
    let url = url(&server);
    let targets = [format!("a={url}"), format!("b={url}")];
    let (report, _) =
        grid_json_exiting(&[&short_at("3,5")[..], &["--rounds", "1", &targets[0], &targets[1]]].concat(), 0);
    assert_eq!(report["seed"], 0, "{report:#}");
    assert_eq!(grid_of(&report), [(3, None), (5, None)], "{report:#}");
    let orders: Vec<Vec<Vec<String>>> = points(&report).iter().map(orders).collect();
    assert_eq!(orders, [[["a", "b"]], [["b", "a"]]], "{report:#}");
}

#[test]
fn ctrl_c_in_a_grid_reports_the_rounds_done_and_exits_0() {
    let server = Server::percore(&["--workers", "1"]);
    let url = url(&server);
    let targets = [format!("a={url}"), format!("b={url}")];
    let load = ["-d", "500ms", "--warmup", "100ms", "-t", "1", "--seed", "0", "-c", "3,5,7", "--rounds", "2"];
    let args = [&load[..], &["--fail-on", "never", "--json", &targets[0], &targets[1]]].concat();
    let said = TempFile::with_contents(b"");
    let running = compare_started(&args, &said);
    let stderr = || std::fs::read_to_string(said.path()).unwrap_or_default();
    // The first point's 4 loads, and the next point's first round: Ctrl-C then
    // comes in its second round.
    let shown = wait_until(WAIT, || progress_lines(&stderr()).len() >= 6);
    assert!(shown, "not 6 loads done; stderr:\n{}", stderr());
    signal(running.pid(), "INT");
    let run = Finished { stderr: stderr(), ..running.finish_within(COMPARE_TIMEOUT) };
    let report = report_of(&run, &args, 0);
    assert_eq!(report["stopped"], "interrupted", "{report:#}");

    // The points done, in order, each with its rounds complete: all of them but in
    // the last, the one Ctrl-C cut short.
    let grid = grid_of(&report);
    assert!((2..=3).contains(&grid.len()), "{report:#}");
    assert_eq!(grid, [(3, None), (5, None), (7, None)][..grid.len()], "{report:#}");
    let points = points(&report);
    for (i, point) in points.iter().enumerate() {
        let rounds = point["rounds"].as_array().map_or(0, Vec::len);
        let complete = if i + 1 < points.len() { rounds == 2 } else { (1..=2).contains(&rounds) };
        assert!(complete, "point {}: {rounds} rounds:\n{report:#}", i + 1);
        for name in ["a", "b"] {
            results(point, name);
        }
    }
    let rounds: usize = points.iter().map(|point| point["rounds"].as_array().map_or(0, Vec::len)).sum();
    assert!(rounds < 6, "Ctrl-C did not end the grid:\n{report:#}");
    // Each load that ended said so, and no other: the rounds kept, and perhaps the
    // first load of the round cut short.
    assert_progress(&run.stderr, &progress_expected(&[None], &[3, 5, 7], 2, &["a", "b"]), false);
    let loads = progress_lines(&run.stderr).len();
    assert!(loads == 2 * rounds || loads == 2 * rounds + 1, "{loads} loads said done:\n{}", run.stderr);
}

// ---------------------------------------------------------------------------
// A LAN on one machine: --netns.

/// Whether this process may make a network namespace and a veth pair (root); if not,
/// says the test skipped.
fn may_make_namespaces() -> bool {
    let root = euid() == 0 && tool_available("ip", "iproute2");
    if !root {
        util::skip("--netns needs root, and this test runs as another user");
    }
    root
}

/// The namespace compare said its servers run in (`percore-PID`), from its stderr.
fn namespace_of(stderr: &str) -> String {
    let said =
        stderr.lines().find_map(|line| line.strip_prefix("compare: the servers run in network namespace "));
    let said = said.unwrap_or_else(|| panic!("no namespace named on stderr:\n{stderr}"));
    said.split(',').next().expect("a name").to_string()
}

/// Asserts that namespace `name` and the veth pair made with it are gone.
fn assert_namespace_gone(name: &str) {
    let listed = run_capturing(std::path::Path::new("ip"), &["netns", "list"]);
    let names: Vec<&str> = listed.stdout.lines().filter_map(|line| line.split_whitespace().next()).collect();
    assert!(!names.contains(&name), "namespace {name} left behind: {names:?}");
    let pid = name.strip_prefix("percore-").expect("percore-PID");
    let links = run_capturing(std::path::Path::new("ip"), &["-o", "link", "show"]);
    assert!(!links.stdout.contains(&format!("pcore{pid}")), "its veth pair left behind:\n{}", links.stdout);
}

/// `--serve NAME=...` for --netns: `percore serve` on compare's {host} and {port},
/// started by a shell that first appends its network namespace to `record`.
fn serve_in_namespace(name: &str, record: &TempFile) -> String {
    let bin = percore_bin();
    let bin = quoted(bin.to_str().expect("a UTF-8 binary path"));
    let record = quoted(record.path());
    format!("{name}=readlink /proc/self/ns/net >> {record}; exec {bin} serve --bind {{host}} --port {{port}} --workers 1")
}

#[test]
fn netns_serves_over_a_veth_pair_at_link_local_addresses_and_leaves_nothing_behind() {
    if !may_make_namespaces() {
        return;
    }
    let record = TempFile::with_contents(b"");
    let (a, b) = (serve_in_namespace("a", &record), serve_in_namespace("b", &record));
    let args = [&short_at("3,5")[..], &["--rounds", "1", "--netns", "--serve", &a, "--serve", &b]].concat();
    let (report, stderr) = grid_json_exiting(&args, 0);
    for point in points(&report) {
        for target in point["targets"].as_array().expect("targets") {
            let url = target["url"].as_str().expect("a URL");
            assert!(url.starts_with("http://169.254."), "not a link-local address: {url}");
        }
        for name in ["a", "b"] {
            let result = results(point, name)[0];
            assert!(result["responses"].as_u64() > Some(0), "{result:#}");
            assert_eq!(result["errors"], 0, "{result:#}");
        }
    }
    // Both servers in one namespace, not this one.
    let ours = std::fs::read_link("/proc/self/ns/net").expect("this process's namespace");
    let theirs = std::fs::read_to_string(record.path()).expect("the recorded namespaces");
    let theirs: Vec<&str> = theirs.lines().collect();
    assert_eq!(theirs.len(), 2, "{theirs:?}");
    assert!(theirs[0] == theirs[1] && theirs[0] != ours.to_string_lossy(), "{theirs:?}, ours {ours:?}");
    assert_namespace_gone(&namespace_of(&stderr));
}

#[test]
fn netns_is_removed_after_a_server_that_does_not_start_and_after_ctrl_c() {
    if !may_make_namespaces() {
        return;
    }
    let record = TempFile::with_contents(b"");
    let a = serve_in_namespace("a", &record);
    // A server that exits at once: the comparison stops (exit 1), naming it.
    let args = [&SHORT[..], &["--netns", "--serve", &a, "--serve", "broken=exit 3 # {port}"]].concat();
    let run = compare(&args);
    assert_eq!(run.status.code(), Some(1), "{}; stderr:\n{}", run.status, run.stderr);
    assert!(run.stderr.contains("broken"), "the error does not name broken:\n{}", run.stderr);
    assert_namespace_gone(&namespace_of(&run.stderr));

    // Ctrl-C in the middle of a load.
    let b = serve_in_namespace("b", &record);
    let args = [
        &["-d", "5s", "--warmup", "100ms", "-c", "3", "-t", "1"][..],
        &["--netns", "--serve", &a, "--serve", &b],
    ];
    let said = TempFile::with_contents(b"");
    let running = compare_started(&args.concat(), &said);
    let stderr = || std::fs::read_to_string(said.path()).unwrap_or_default();
    // Its servers started: their shells recorded their namespace.
    let started = wait_until(WAIT, || {
        std::fs::read_to_string(record.path()).is_ok_and(|text| text.lines().count() >= 3)
    });
    assert!(started, "the servers did not start; stderr:\n{}", stderr());
    signal(running.pid(), "INT");
    let run = running.finish_within(COMPARE_TIMEOUT);
    assert_eq!(run.status.code(), Some(0), "{}; stderr:\n{}", run.status, stderr());
    assert_namespace_gone(&namespace_of(&stderr()));
}

#[test]
fn netns_without_root_says_so_and_makes_nothing() {
    let bin = percore_bin();
    let bin = bin.to_str().expect("a UTF-8 binary path");
    let compare =
        [bin, "bench", "compare", "--netns", "--serve", "a=true {port}", "--serve", "b=true {port}"];
    let run = if euid() == 0 {
        // As root, the same command as nobody.
        if !tool_available("setpriv", "util-linux") {
            return;
        }
        let nobody =
            ["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"];
        run_capturing(std::path::Path::new("setpriv"), &[&nobody[..], &compare].concat())
    } else {
        run_capturing(std::path::Path::new(bin), &compare[1..])
    };
    assert_eq!(run.status.code(), Some(1), "{run:?}");
    assert!(run.stderr.contains("--netns needs root"), "{}", run.stderr);
    assert!(run.stdout.is_empty(), "a report:\n{}", run.stdout);
}

#[test]
fn netns_with_a_target_compare_does_not_start_in_it_is_a_usage_error() {
    let url = "a=http://127.0.0.1:1/";
    let cases = [
        ("a URL", vec!["--netns", url, "--serve", "b=true {port}"], "a is not started by --serve"),
        (
            "a served URL",
            vec!["--netns", url, "--serve", "a=true {port}", "--serve", "b=true {port}"],
            "a is given a URL",
        ),
        ("no {port}", vec!["--netns", "--serve", "a=true", "--serve", "b=true {port}"], "a has no {port}"),
    ];
    for (what, args, says) in cases {
        let stderr = usage_error(what, &[&SHORT[..], &args].concat());
        assert!(stderr.contains(&format!("--netns: {says}")), "{what}: {stderr}");
    }
}
