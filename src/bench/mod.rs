//! `percore bench`: a load generator on percore's own loop, built on the library's
//! public API alone (this is the binary's code): the run, the load protocol, the
//! report.

mod load;
mod report;
mod run;
mod target;

use std::io::{IsTerminal, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use run::{BenchOptions, Live, Stop};
use target::Target;

use crate::commands::BenchArgs;

pub fn run(args: BenchArgs) -> Result<(), String> {
    let stop = match (args.requests, args.duration) {
        (Some(n), _) => Stop::Requests(n),
        (None, duration) => Stop::After(duration.unwrap_or(Duration::from_secs(10))),
    };
    let options = BenchOptions {
        target: Target::parse(&args.url)?,
        connections: crate::size(args.connections),
        stop,
        cpus: percore::cli::plan_or_exit(args.cpus.as_ref(), args.threads),
        pin: !args.no_pin,
        pipeline: crate::size(args.pipeline),
        close: args.close,
        rate: args.rate,
        method: args.method,
        headers: args.headers,
        timeout: Duration::from_secs(args.timeout),
    };
    let live = Live::default();
    let report = std::thread::scope(|scope| {
        let run = scope.spawn(|| run::run(&options, &live));
        if std::io::stdout().is_terminal() {
            show_progress(&live, || run.is_finished());
        }
        run.join().unwrap_or_else(|_| Err("the load generator panicked".into()))
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.to_json()).map_err(|e| e.to_string())?);
    } else {
        print!("{}", report.to_text());
    }
    Ok(())
}

/// Rewrites one line once a second with the rate and errors so far; clears it at
/// the end so the report starts on a clean line.
fn show_progress(live: &Live, finished: impl Fn() -> bool) {
    let start = Instant::now();
    let mut stdout = std::io::stdout();
    let mut next = Duration::from_secs(1);
    while !finished() {
        std::thread::sleep(Duration::from_millis(50));
        let elapsed = start.elapsed();
        if elapsed < next {
            continue;
        }
        next += Duration::from_secs(1);
        let requests = live.requests.load(Ordering::Relaxed);
        let errors = live.errors.load(Ordering::Relaxed);
        let rate = requests as f64 / elapsed.as_secs_f64();
        let _ =
            write!(stdout, "\r{:>4.0} s  {rate:>12.0} requests/s  {errors} errors", elapsed.as_secs_f64());
        let _ = stdout.flush();
    }
    let _ = write!(stdout, "\r\x1b[2K");
}
