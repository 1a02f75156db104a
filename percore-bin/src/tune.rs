//! `percore tune`: each setting of sysctl.conf beside its live value, compared in the
//! setting's own order, and, as root, `--apply` to raise those below their
//! recommendation and `--restore FILE` to put back what `--apply` changed. It never
//! lowers a setting: a live value better than the recommendation is kept. Without a
//! flag it changes nothing and exits 1 when a setting is below (a check before a
//! benchmark, for scripts), 0 when all are fine.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

#[derive(Debug, Args)]
#[command(after_help = "Without a flag it changes nothing, and exits 1 when a setting is below its \
recommendation (0 when none is), as a check before a benchmark. --apply and --restore need root.")]
pub struct TuneArgs {
    /// Raise each setting below sysctl.conf's recommendation to it, in the setting's
    /// own order (a live value already better is kept), after saving the values it
    /// changes to a file, which it names.
    #[arg(long)]
    pub apply: bool,

    /// The file --apply saves the values it changes to [default: a new file in the
    /// temporary directory]. An existing one, from an earlier --apply, keeps the value
    /// it holds for each setting: the one from before the first.
    #[arg(long, value_name = "FILE", requires = "apply")]
    pub save: Option<PathBuf>,

    /// Put back the values --apply saved to FILE (and no other file).
    #[arg(long, value_name = "FILE", conflicts_with = "apply")]
    pub restore: Option<PathBuf>,

    /// Where the kernel's settings are read and written: a copy of its layout for a
    /// test or a container.
    #[arg(long, value_name = "DIR", default_value = "/proc/sys")]
    pub proc_sys: PathBuf,
}

/// The repository's sysctl.conf, built in so the binary can report on its own.
const SYSCTL_CONF: &str = include_str!("../sysctl.conf");

/// The first line of a file `--apply` writes: `--restore` takes no other file, so
/// that it can never set sysctl.conf's values (or any others) wholesale.
const SAVED_HEADER: &str = "# percore tune --apply: the values it changed, as they were before it.";

/// How the values of one field of a setting are ordered, worst to best.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Order {
    Higher,
    Lower,
    /// The values named, worst first; any other value is worse than all of them.
    Ranked(Vec<u64>),
}

impl Order {
    /// Whether `a` is better than `b`.
    fn better(&self, a: u64, b: u64) -> bool {
        match self {
            Order::Higher => a > b,
            Order::Lower => a < b,
            Order::Ranked(values) => {
                let rank = |v| values.iter().position(|&x| x == v);
                rank(a) > rank(b)
            }
        }
    }
}

/// A setting's recommendation: its numbers, and the order of each field.
#[derive(Debug, PartialEq, Eq)]
struct Setting {
    name: String,
    recommended: Vec<u64>,
    orders: Vec<Order>,
}

/// How a live value compares with the recommendation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Finding {
    /// The same.
    Ok,
    /// Better in some field, worse in none: kept.
    Better,
    /// Worse in some field: to raise.
    Below,
}

/// `key = value` lines of `conf`, each with the `# tune:` line before it, if any:
/// `lower` or `higher` for each field (higher when not said), or `rank A B C` for a
/// one-field setting whose values are ordered otherwise, worst first.
fn settings(conf: &str) -> Vec<Setting> {
    let mut orders = Vec::new();
    let mut settings = Vec::new();
    for line in conf.lines().map(str::trim) {
        if let Some(words) = line.strip_prefix("# tune:") {
            orders = match words.split_whitespace().collect::<Vec<_>>()[..] {
                ["rank", ref values @ ..] => {
                    vec![Order::Ranked(values.iter().filter_map(|v| v.parse().ok()).collect())]
                }
                ref words => words
                    .iter()
                    .map(|&word| if word == "lower" { Order::Lower } else { Order::Higher })
                    .collect(),
            };
            continue;
        }
        let Some((name, value)) = line.split_once('=').filter(|_| !line.starts_with('#')) else { continue };
        let Some(recommended) = numbers(value) else { continue };
        let mut field_orders = std::mem::take(&mut orders);
        field_orders.resize(recommended.len(), Order::Higher);
        settings.push(Setting { name: name.trim().into(), recommended, orders: field_orders });
    }
    settings
}

/// The numbers of a value (`/proc/sys` separates fields with tabs).
fn numbers(value: &str) -> Option<Vec<u64>> {
    value.split_whitespace().map(|n| n.parse().ok()).collect()
}

impl Setting {
    /// How `live` compares with the recommendation, and the value to set: each field
    /// the better of the live one and the recommended one.
    fn compare(&self, live: &[u64]) -> (Finding, Vec<u64>) {
        let (mut worse, mut better) = (false, false);
        let mut target = Vec::with_capacity(self.recommended.len());
        for ((&recommended, order), &live) in self.recommended.iter().zip(&self.orders).zip(live) {
            let live_better = order.better(live, recommended);
            worse |= live != recommended && !live_better;
            better |= live_better;
            target.push(if live_better { live } else { recommended });
        }
        let finding = match (worse, better) {
            (true, _) => Finding::Below,
            (false, true) => Finding::Better,
            (false, false) => Finding::Ok,
        };
        (finding, target)
    }
}

/// The kernel's settings, as files under a directory: /proc/sys, or a copy of its
/// layout for a test.
struct Sysctls<'a> {
    root: &'a Path,
}

impl Sysctls<'_> {
    fn path(&self, name: &str) -> PathBuf {
        self.root.join(name.replace('.', "/"))
    }

    fn read(&self, name: &str) -> Option<Vec<u64>> {
        std::fs::read_to_string(self.path(name)).ok().and_then(|text| numbers(&text))
    }

    /// Opens each setting of `names` for writing, writing nothing: an error names the
    /// first that cannot be written, before any is changed.
    fn check_writable<'n>(&self, names: impl IntoIterator<Item = &'n str>) -> Result<(), String> {
        for name in names {
            let path = self.path(name);
            OpenOptions::new().write(true).open(&path).map_err(|e| {
                let root = if e.kind() == ErrorKind::PermissionDenied { " (it needs root)" } else { "" };
                format!("cannot write {}: {e}{root}; nothing was changed", path.display())
            })?;
        }
        Ok(())
    }

    /// Sets `name` to `values`, written as /proc/sys shows them.
    fn write(&self, name: &str, values: &[u64]) -> Result<(), String> {
        let text: Vec<String> = values.iter().map(u64::to_string).collect();
        let path = self.path(name);
        std::fs::write(&path, text.join("\t") + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

/// The `ulimit -n N` that sysctl.conf recommends in a comment.
fn recommended_open_files() -> Result<u64, String> {
    SYSCTL_CONF
        .lines()
        .find_map(|line| line.trim().strip_prefix("# ulimit -n "))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| "sysctl.conf has no `# ulimit -n N` line".into())
}

/// The soft limit on open files, from /proc/self/limits.
fn live_open_files() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|line| line.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

fn join(values: &[u64]) -> String {
    values.iter().map(u64::to_string).collect::<Vec<_>>().join(" ")
}

pub fn run(args: TuneArgs) -> Result<ExitCode, String> {
    let sysctls = Sysctls { root: &args.proc_sys };
    match (args.apply, args.restore) {
        (_, Some(file)) => restore(&sysctls, &file),
        (true, None) => apply(&sysctls, args.save),
        (false, None) => report(&sysctls),
    }
}

/// A setting below its recommendation: its live value and the one to set.
struct Below {
    name: String,
    live: Vec<u64>,
    target: Vec<u64>,
}

/// Prints each setting beside its live value; returns those below.
fn compare_all(sysctls: &Sysctls) -> Vec<Below> {
    let mut below = Vec::new();
    println!("{:<32} {:<26} {:<26} ", "setting", "live", "recommended");
    for setting in settings(SYSCTL_CONF) {
        let recommended = join(&setting.recommended);
        let Some(live) = sysctls.read(&setting.name) else {
            print_row(&setting.name, "(unreadable)", &recommended, "unknown");
            continue;
        };
        let (finding, target) = setting.compare(&live);
        print_row(&setting.name, &join(&live), &recommended, finding.word());
        if finding == Finding::Below {
            below.push(Below { name: setting.name, live, target });
        }
    }
    below
}

/// The open-file limit's row; the recommended limit when the live one is below it.
fn compare_open_files() -> Result<Option<u64>, String> {
    let ulimit = recommended_open_files()?;
    let files = live_open_files();
    let files_finding = match files {
        Some(files) if files > ulimit => Finding::Better,
        Some(files) if files == ulimit => Finding::Ok,
        _ => Finding::Below,
    };
    let live_files = files.map_or("(unreadable)".to_string(), |n| n.to_string());
    print_row("ulimit -n (open files)", &live_files, &ulimit.to_string(), files_finding.word());
    Ok((files_finding == Finding::Below).then_some(ulimit))
}

/// Prints every row, then a blank line; returns the settings below, and the
/// recommended open-file limit when the live one is below it.
fn compare_everything(sysctls: &Sysctls) -> Result<(Vec<Below>, Option<u64>), String> {
    let below = compare_all(sysctls);
    let files_below = compare_open_files()?;
    println!();
    Ok((below, files_below))
}

/// The line that says how to raise the open-file limit (no sysctl sets it), if it
/// is below `ulimit`.
fn print_ulimit_advice(files_below: Option<u64>) {
    if let Some(ulimit) = files_below {
        println!("and, in the shell that starts the server and the load (not a sysctl): ulimit -n {ulimit}");
    }
}

fn report(sysctls: &Sysctls) -> Result<ExitCode, String> {
    let (below, files_below) = compare_everything(sysctls)?;
    if below.is_empty() {
        println!("no kernel setting is below sysctl.conf's");
    } else {
        let names: Vec<&str> = below.iter().map(|b| b.name.as_str()).collect();
        println!("below: {}", names.join(" "));
        println!("raise them with (as root; settings already better are kept, and the values");
        println!("changed are saved to a file to restore them from):");
        println!("  percore tune --apply");
    }
    print_ulimit_advice(files_below);
    let any_below = !below.is_empty() || files_below.is_some();
    Ok(if any_below { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Raises each setting below its recommendation, after saving its live value to
/// `save` (or a new file in the temporary directory). A setting `save` already holds
/// keeps the value saved there: it is the one from before the first `--apply`. A
/// `save` named is written even when nothing changes, for a `--restore` to find.
fn apply(sysctls: &Sysctls, save: Option<PathBuf>) -> Result<ExitCode, String> {
    let (below, files_below) = compare_everything(sysctls)?;
    if below.is_empty() {
        println!("no kernel setting is below sysctl.conf's: nothing changed");
    }
    // Without --save and with nothing to change, there is nothing to save: no file.
    if !below.is_empty() || save.is_some() {
        sysctls.check_writable(below.iter().map(|b| b.name.as_str()))?;
        let file = save.unwrap_or_else(default_save_file);
        save_values(&file, &below)?;
        for change in &below {
            sysctls.write(&change.name, &change.target).map_err(|e| {
                format!(
                    "{e}; the settings changed before it are put back by: percore tune --restore {}",
                    file.display()
                )
            })?;
            println!("set {} = {} (was {})", change.name, join(&change.target), join(&change.live));
        }
        println!("saved the values it changed to {}; put them back with:", file.display());
        println!("  percore tune --restore {}", file.display());
    }
    print_ulimit_advice(files_below);
    Ok(ExitCode::SUCCESS)
}

fn default_save_file() -> PathBuf {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    std::env::temp_dir().join(format!("percore-tune-{}.conf", now.as_secs()))
}

/// Adds the live values of `below` to `file` (created if it is not there), each
/// setting once: one it already holds keeps its earlier value.
fn save_values(file: &Path, below: &[Below]) -> Result<(), String> {
    let earlier = match std::fs::read_to_string(file) {
        Ok(text) => saved_settings(file, &text)?,
        Err(e) if e.kind() == ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
    };
    let known: BTreeSet<&str> = earlier.iter().map(|s| s.name.as_str()).collect();
    let mut text =
        format!("{SAVED_HEADER}\n# Put them back with: percore tune --restore {}\n", file.display());
    for setting in &earlier {
        text += &format!("{} = {}\n", setting.name, join(&setting.recommended));
    }
    for change in below.iter().filter(|b| !known.contains(b.name.as_str())) {
        text += &format!("{} = {}\n", change.name, join(&change.live));
    }
    let written =
        File::create(file).and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()));
    written.map_err(|e| {
        format!("cannot save the values it would change to {}: {e}; nothing was changed", file.display())
    })
}

/// The settings of a file `--apply` wrote; an error for any other file.
fn saved_settings(file: &Path, text: &str) -> Result<Vec<Setting>, String> {
    if text.lines().next() != Some(SAVED_HEADER) {
        return Err(format!(
            "{} was not written by percore tune --apply: it restores only the values that wrote",
            file.display()
        ));
    }
    Ok(settings(text))
}

/// Sets each setting `file` holds back to its value there.
fn restore(sysctls: &Sysctls, file: &Path) -> Result<ExitCode, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let saved = saved_settings(file, &text)?;
    sysctls.check_writable(saved.iter().map(|s| s.name.as_str()))?;
    for setting in &saved {
        let now = sysctls.read(&setting.name).map_or("(unreadable)".into(), |v| join(&v));
        sysctls.write(&setting.name, &setting.recommended)?;
        println!("set {} = {} (was {now})", setting.name, join(&setting.recommended));
    }
    println!("restored {} setting(s) from {}", saved.len(), file.display());
    Ok(ExitCode::SUCCESS)
}

impl Finding {
    fn word(self) -> &'static str {
        match self {
            Finding::Ok => "ok",
            Finding::Better => "better",
            Finding::Below => "below",
        }
    }
}

fn print_row(name: &str, live: &str, recommended: &str, finding: &str) {
    println!("{name:<32} {live:<26} {recommended:<26} {finding}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(conf: &str) -> Setting {
        settings(conf).remove(0)
    }

    #[test]
    fn higher_is_better_unless_a_tune_line_says_otherwise() {
        let memory = setting("net.ipv4.tcp_rmem = 4096 87380 16777216");
        assert_eq!(
            memory.compare(&[4096, 131072, 33554432]),
            (Finding::Better, vec![4096, 131072, 33554432])
        );
        assert_eq!(memory.compare(&[4096, 87380, 16777216]).0, Finding::Ok);
        // Worse in one field, better in another: raise the one, keep the other.
        assert_eq!(memory.compare(&[4096, 16384, 33554432]), (Finding::Below, vec![4096, 87380, 33554432]));
        let ports = setting("# tune: lower higher\nnet.ipv4.ip_local_port_range = 1024 65535");
        assert_eq!(ports.compare(&[32768, 60999]), (Finding::Below, vec![1024, 65535]));
        assert_eq!(ports.compare(&[1024, 65535]).0, Finding::Ok);
        let fin = setting("# tune: lower\nnet.ipv4.tcp_fin_timeout = 10");
        assert_eq!(fin.compare(&[60]), (Finding::Below, vec![10]));
        assert_eq!(fin.compare(&[5]), (Finding::Better, vec![5]));
    }

    #[test]
    fn a_ranked_setting_follows_its_rank_not_its_number() {
        // tcp_tw_reuse: 2 reuses on loopback only, narrower than 1 (everywhere).
        let reuse = setting("# tune: rank 0 2 1\nnet.ipv4.tcp_tw_reuse = 1");
        assert_eq!(reuse.compare(&[2]), (Finding::Below, vec![1]));
        assert_eq!(reuse.compare(&[0]), (Finding::Below, vec![1]));
        assert_eq!(reuse.compare(&[1]).0, Finding::Ok);
        // A value the rank does not know is worse than every one it does.
        assert_eq!(reuse.compare(&[7]), (Finding::Below, vec![1]));
        let low = setting("# tune: rank 0 2 1\nnet.ipv4.tcp_tw_reuse = 2");
        assert_eq!(low.compare(&[1]), (Finding::Better, vec![1]));
    }

    #[test]
    fn a_tune_line_applies_to_the_next_setting_only() {
        let all = settings("# tune: lower\na = 1\nb = 1\n# a comment\nc = 2 3");
        assert_eq!(
            all.iter().map(|s| s.orders.clone()).collect::<Vec<_>>(),
            [vec![Order::Lower], vec![Order::Higher], vec![Order::Higher, Order::Higher]]
        );
    }

    #[test]
    fn the_built_in_conf_ranks_tcp_tw_reuse() {
        let all = settings(SYSCTL_CONF);
        let reuse =
            all.iter().find(|s| s.name == "net.ipv4.tcp_tw_reuse").expect("tcp_tw_reuse in sysctl.conf");
        assert_eq!(reuse.compare(&[2]).0, Finding::Below);
    }
}
