//! `percore bench`: a load generator on percore's own loop, built on the library's
//! public API alone (this is the binary's code): the command line's meaning, then
//! the run, the load protocol, the collection of its seconds, and the report.
//!
//! Exit status: 0 when every request succeeded, 1 when any failed (as `--fail-on`
//! says) or the run could not start, 2 for a usage error (clap's own status).

pub mod args;
mod collect;
mod compare;
mod load;
mod merge;
mod report;
mod run;
mod target;
mod tls;

use std::io::{IsTerminal, Write};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use percore::tls::Trust;
use percore::worker;
use signal_hook::consts::SIGINT;

use args::{BenchArgs, BenchCommand, LoadArgs, ReportArgs};
use report::hdrlog::LogWriter;
use report::{json, plot, Mode, Report, Stop};
use run::{BenchOptions, Outputs};
use target::{names, RequestSpec, Target};
use tls::TlsPlan;

use crate::units::as_usize;

pub fn run(args: BenchArgs) -> Result<(), String> {
    match &args.command {
        Some(BenchCommand::Merge(merge)) => {
            let report = merge::merge(&merge.logs)?;
            return output(&report, &merge.report);
        }
        Some(BenchCommand::Compare(compare)) => return compare::run(compare),
        None => {}
    }
    // First: a --body-file (a FIFO) may keep `options` waiting.
    let interrupted = on_ctrl_c().map_err(|e| format!("cannot handle Ctrl-C: {e}"))?;
    let Some(target) = args.url.clone() else { usage("a URL to load is required") };
    let options = options(&args.load, args.connections, target, args.start_at)?;
    let mut log = args.hdr_log.as_deref().map(LogWriter::create).transpose()?;
    let progress = std::io::stdout().is_terminal().then(|| Box::new(std::io::stdout()) as Box<dyn Write>);
    let report = run::run(&options, &interrupted, Outputs { log: log.as_mut(), progress })?;
    if let Some(log) = log {
        log.finish(&report)?;
    }
    output(&report, &args.report)
}

/// A flag the first Ctrl-C sets, for the run to end and report; a second one
/// while it is set ends the process at once, as SIGINT's default does.
fn on_ctrl_c() -> std::io::Result<Arc<AtomicBool>> {
    let interrupted = Arc::new(AtomicBool::new(false));
    // Registered first, so that it acts only once the flag is already set: the
    // second time (signal-hook's own double Ctrl-C recipe).
    signal_hook::flag::register_conditional_default(SIGINT, Arc::clone(&interrupted))?;
    signal_hook::flag::register(SIGINT, Arc::clone(&interrupted))?;
    Ok(interrupted)
}

/// Prints the report (and draws it), then says by `--fail-on` whether it failed.
fn output(report: &Report, args: &ReportArgs) -> Result<(), String> {
    let text = if args.json {
        let json = serde_json::to_string_pretty(&json::to_json(report)).map_err(|e| e.to_string())?;
        json + "\n"
    } else {
        report.to_string()
    };
    print(&text)?;
    if let Some(path) = &args.plot {
        plot::draw(report, path)?;
    }
    args.fail_on.check(report)
}

/// Prints a report on standard output; a reader that stopped reading (`| head`) is
/// no error of the run's.
fn print(text: &str) -> Result<(), String> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("cannot print the report: {e}")),
        _ => Ok(()),
    }
}

/// The run of `target` with `connections` that the load's flags ask for; exits with status 2 for what
/// clap cannot check alone. An error (status 1, as `percore serve`'s) for a
/// `--body-file` or a `--cacert` that cannot be read: the command line was right.
fn options(
    args: &LoadArgs,
    connections: u64,
    target: Target,
    start_at: Option<SystemTime>,
) -> Result<BenchOptions, String> {
    let body: Option<Arc<[u8]>> = match (&args.body, &args.body_file) {
        (Some(text), _) => Some(Arc::from(text.as_bytes())),
        (None, Some(path)) => match std::fs::read(path) {
            Ok(bytes) => Some(Arc::from(bytes)),
            Err(e) => return Err(format!("cannot read --body-file {}: {e}", path.display())),
        },
        (None, None) => None,
    };
    let framing = ["content-length", "transfer-encoding"];
    if body.is_some() && args.headers.iter().any(|h| framing.iter().any(|name| names(h, name))) {
        usage("-H Content-Length or Transfer-Encoding with a body: percore bench frames the body itself");
    }
    if args.content_type.is_some() && args.headers.iter().any(|h| names(h, "content-type")) {
        usage("both -T and -H Content-Type: give one");
    }
    // POST when a body is given, as oha and hey do.
    let method =
        args.method.clone().unwrap_or_else(|| if body.is_some() { "POST" } else { "GET" }.to_string());
    let mode = match (args.close, args.pipeline) {
        (true, _) => Mode::Close,
        (false, 1) => Mode::KeepAlive,
        (false, depth) => Mode::Pipeline(as_usize(depth)),
    };
    let tls = target.is_https().then(|| tls_plan(args, connections, &target)).transpose()?;
    let spec = RequestSpec {
        method: &method,
        headers: &args.headers,
        body: body.as_ref(),
        content_type: args.content_type.as_deref(),
        close: args.close,
    };
    Ok(BenchOptions {
        request: target.request(&spec),
        target,
        connections: as_usize(connections),
        stop: match (args.requests, args.duration) {
            (Some(n), _) => Stop::Requests(n),
            (None, duration) => Stop::After(duration.unwrap_or(Duration::from_secs(10))),
        },
        cpus: threads_cpus(args),
        pin: !args.no_pin,
        mode,
        rate: args.rate,
        method,
        timeout: args.timeout,
        max_response: args.max_response_size,
        start_at,
        tls,
    })
}

/// How an https:// `target` is spoken to: a usage error without whom to trust, an
/// error for a CA file that cannot be used (found now, before any load is sent).
fn tls_plan(args: &LoadArgs, connections: u64, target: &Target) -> Result<TlsPlan, String> {
    let trust = match (&args.cacert, args.insecure) {
        (Some(path), _) => Trust::CaFile(path.clone()),
        (None, true) => Trust::InsecureAnyCertificate,
        (None, false) => usage(&format!(
            "{}: give --cacert FILE (the CA that signed the server's certificate) or --insecure; \
             the system's certificate authorities are not read",
            target.as_str()
        )),
    };
    let plan = TlsPlan {
        trust,
        resume: args.tls_resume,
        connections: as_usize(connections),
        server_name: target.server_name(),
    };
    plan.client()?;
    Ok(plan)
}

/// The CPU of each load thread (see [`worker::plan`]): `-t` of them, or one per CPU,
/// of `--cpus` or the allowed set; a CPU outside the allowed set is a usage error.
fn threads_cpus(args: &LoadArgs) -> Vec<usize> {
    let listed = args.cpus.as_ref().map(|list| &list.0[..]);
    worker::plan(&worker::allowed_cpus(), listed, args.threads).unwrap_or_else(|message| usage(&message))
}

/// A usage error: clap's message and its exit status, 2.
fn usage(message: &str) -> ! {
    clap::Error::raw(clap::error::ErrorKind::ArgumentConflict, format!("{message}\n")).exit()
}
