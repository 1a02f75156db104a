//! The run's seconds, gathered from the load threads as they pass: each thread sends
//! the latencies of every second it ran ([`Tick`]); once every thread is past a
//! second, the second is complete and goes to the interval log, the progress line,
//! the total histogram and the per-second counts of the plot.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use hdrhistogram::Histogram;

use super::report::hdrlog::LogWriter;
use super::report::text::Micros;
use super::report::{add_histogram, new_histogram};

/// One thread's second of the run: `[start + index s, start + index s + 1 s)`.
#[derive(Debug)]
pub struct Tick {
    pub thread: usize,
    pub index: u64,
    pub latency: Histogram<u64>,
    /// Errors counted in that second.
    pub errors: u64,
    /// The thread's last second: it has stopped.
    pub last: bool,
}

/// A second some threads reported and others not yet.
struct Second {
    latency: Histogram<u64>,
    errors: u64,
}

/// What the collection gives at the end.
#[derive(Debug)]
pub struct Collected {
    pub latency: Histogram<u64>,
    /// Responses in each second, from the start.
    pub per_second: Vec<u64>,
}

pub struct Collector<'a> {
    /// Per thread: the first second it has not reported yet (`u64::MAX` once it
    /// stopped).
    next: Vec<u64>,
    pending: BTreeMap<u64, Second>,
    /// The first second not complete yet.
    next_out: u64,
    total: Histogram<u64>,
    per_second: Vec<u64>,
    log: Option<&'a mut LogWriter>,
    /// Where the progress line goes, if anywhere.
    progress: Option<Box<dyn Write + 'a>>,
}

impl<'a> Collector<'a> {
    pub fn new(
        threads: usize,
        log: Option<&'a mut LogWriter>,
        progress: Option<Box<dyn Write + 'a>>,
    ) -> Collector<'a> {
        Collector {
            next: vec![0; threads],
            pending: BTreeMap::new(),
            next_out: 0,
            total: new_histogram(),
            per_second: Vec::new(),
            log,
            progress,
        }
    }

    /// Takes one thread's second, and hands on the seconds now complete.
    pub fn receive(&mut self, tick: Tick) -> Result<(), String> {
        let second =
            self.pending.entry(tick.index).or_insert_with(|| Second { latency: new_histogram(), errors: 0 });
        add_histogram(&mut second.latency, &tick.latency);
        second.errors = second.errors.saturating_add(tick.errors);
        if let Some(next) = self.next.get_mut(tick.thread) {
            *next = if tick.last { u64::MAX } else { tick.index + 1 };
        }
        // Complete: every thread running has reported past it. The last seconds wait
        // for `finish`, which knows how long the run took.
        let complete_below = self.next.iter().copied().min().unwrap_or(u64::MAX);
        while self.next_out < complete_below && complete_below != u64::MAX {
            self.complete(Duration::from_secs(1))?;
        }
        Ok(())
    }

    /// Hands on every second left, the last one `duration` long at most, and
    /// clears the progress line.
    pub fn finish(mut self, duration: Duration) -> Result<Collected, String> {
        let seconds = duration.as_secs() + u64::from(duration.subsec_nanos() > 0);
        let last = self.pending.keys().next_back().map_or(0, |&index| index + 1);
        while self.next_out < last.max(seconds) {
            let from = Duration::from_secs(self.next_out);
            let length = duration.saturating_sub(from).min(Duration::from_secs(1));
            // A thread that stopped late may report a second past the run's measure.
            self.complete(length.max(Duration::from_millis(1)))?;
        }
        if let Some(progress) = &mut self.progress {
            let _ = write!(progress, "\r\x1b[2K");
            let _ = progress.flush();
        }
        Ok(Collected { latency: self.total, per_second: self.per_second })
    }

    /// Second `next_out` is complete: adds it up, logs it and shows it.
    fn complete(&mut self, length: Duration) -> Result<(), String> {
        let index = self.next_out;
        self.next_out += 1;
        let Second { latency, errors } =
            self.pending.remove(&index).unwrap_or_else(|| Second { latency: new_histogram(), errors: 0 });
        add_histogram(&mut self.total, &latency);
        self.per_second.push(latency.len());
        if let Some(log) = &mut self.log {
            log.interval(Duration::from_secs(index), length, &latency)?;
        }
        if let Some(progress) = &mut self.progress {
            let line = progress_line(index + 1, &latency, errors, length);
            let _ = write!(progress, "\r\x1b[2K{line}");
            let _ = progress.flush();
        }
        Ok(())
    }
}

/// The progress line for the `second`-th second of the run: that second's rate,
/// errors and 99th percentile, not running averages (which hide a stall).
fn progress_line(second: u64, latency: &Histogram<u64>, errors: u64, length: Duration) -> String {
    let rate = latency.len() as f64 / length.as_secs_f64();
    let p99 = if latency.is_empty() {
        "-".to_string()
    } else {
        Micros(latency.value_at_quantile(0.99) as f64).to_string()
    };
    format!("{second:>4} s  {rate:>10.0} requests/s  {errors:>6} errors  p99 {p99:>8}")
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;

    /// A progress output the test can read after the collector took it.
    #[derive(Clone, Default)]
    struct Screen(Rc<RefCell<Vec<u8>>>);

    impl Write for Screen {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn tick(thread: usize, index: u64, latencies: &[u64], errors: u64, last: bool) -> Tick {
        let mut latency = new_histogram();
        for &micros in latencies {
            latency.saturating_record(micros);
        }
        Tick { thread, index, latency, errors, last }
    }

    #[test]
    fn a_second_is_shown_once_every_thread_is_past_it_and_with_its_own_figures() {
        let screen = Screen::default();
        let mut collector = Collector::new(2, None, Some(Box::new(screen.clone())));
        // Second 1: fast; second 2: slow. A running average would hide the stall.
        collector.receive(tick(0, 0, &[100; 99], 0, false)).expect("received");
        assert!(screen.0.borrow().is_empty(), "thread 1 has not reported second 1 yet");
        collector.receive(tick(1, 0, &[100], 0, false)).expect("received");
        assert!(
            screen.0.borrow().ends_with(b"100 requests/s       0 errors  p99    100\xc2\xb5s"),
            "second 1 is shown"
        );
        collector.receive(tick(0, 1, &[1500, 1500], 3, false)).expect("received");
        collector.receive(tick(1, 1, &[], 0, true)).expect("received");
        collector.receive(tick(0, 2, &[100], 0, true)).expect("received");
        let collected = collector.finish(Duration::from_millis(2500)).expect("finished");
        let text = String::from_utf8(screen.0.borrow().clone()).expect("text");
        let lines: Vec<&str> = text.split("\r\x1b[2K").filter(|l| !l.is_empty()).collect();
        assert_eq!(
            lines,
            [
                "   1 s         100 requests/s       0 errors  p99    100µs",
                "   2 s           2 requests/s       3 errors  p99   1.50ms",
                "   3 s           2 requests/s       0 errors  p99    100µs",
            ]
        );
        assert_eq!(collected.per_second, [100, 2, 1]);
        assert_eq!(collected.latency.len(), 103);
    }

    #[test]
    fn a_thread_that_skipped_seconds_leaves_them_empty() {
        let mut collector = Collector::new(1, None, None);
        collector.receive(tick(0, 0, &[10], 0, false)).expect("received");
        collector.receive(tick(0, 3, &[10, 10], 0, true)).expect("received");
        let collected = collector.finish(Duration::from_secs(4)).expect("finished");
        assert_eq!(collected.per_second, [1, 0, 0, 2]);
    }

    #[test]
    fn the_last_seconds_run_to_the_end_of_the_run_or_of_the_last_thread() {
        // Nobody reported the seconds after the first: a run of 3.5 s has four.
        let mut collector = Collector::new(1, None, None);
        collector.receive(tick(0, 0, &[10], 0, true)).expect("received");
        assert_eq!(collector.finish(Duration::from_millis(3500)).expect("finished").per_second, [1, 0, 0, 0]);
        // A thread that stopped late reported a second past a run of 1.5 s.
        let mut collector = Collector::new(1, None, None);
        collector.receive(tick(0, 0, &[10], 0, false)).expect("received");
        collector.receive(tick(0, 3, &[10, 10], 0, true)).expect("received");
        let collected = collector.finish(Duration::from_millis(1500)).expect("finished");
        assert_eq!((collected.per_second, collected.latency.len()), (vec![1, 0, 0, 2], 3));
    }
}
