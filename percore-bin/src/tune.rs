//! `percore tune`: each setting of sysctl.conf beside its live value, compared as
//! numbers, and the one command that raises those below their recommendation. It
//! changes nothing, never recommends making a setting worse, and exits 1 when one is
//! below (a check before a benchmark, for scripts), 0 when all are fine.

use std::process::ExitCode;

/// The repository's sysctl.conf, built in so the binary can report on its own.
const SYSCTL_CONF: &str = include_str!("../sysctl.conf");

/// A setting's recommendation: its numbers, and for each whether higher is better.
#[derive(Debug, PartialEq, Eq)]
struct Setting {
    name: String,
    recommended: Vec<u64>,
    higher_is_better: Vec<bool>,
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

/// `key = value` lines of `conf`, each with the `# tune:` line before it, if any.
fn settings(conf: &str) -> Vec<Setting> {
    let mut directions = Vec::new();
    let mut settings = Vec::new();
    for line in conf.lines().map(str::trim) {
        if let Some(words) = line.strip_prefix("# tune:") {
            directions = words.split_whitespace().map(|word| word != "lower").collect();
            continue;
        }
        let Some((name, value)) = line.split_once('=').filter(|_| !line.starts_with('#')) else { continue };
        let Some(recommended) = numbers(value) else { continue };
        let mut higher_is_better = std::mem::take(&mut directions);
        higher_is_better.resize(recommended.len(), true);
        settings.push(Setting { name: name.trim().into(), recommended, higher_is_better });
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
        for ((&recommended, &higher), &live) in self.recommended.iter().zip(&self.higher_is_better).zip(live)
        {
            let live_better = if higher { live > recommended } else { live < recommended };
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

/// The `ulimit -n N` that sysctl.conf recommends in a comment.
fn recommended_open_files() -> Option<u64> {
    SYSCTL_CONF
        .lines()
        .find_map(|line| line.trim().strip_prefix("# ulimit -n "))
        .and_then(|n| n.trim().parse().ok())
}

fn live_value(name: &str) -> Option<Vec<u64>> {
    let path = format!("/proc/sys/{}", name.replace('.', "/"));
    std::fs::read_to_string(path).ok().and_then(|text| numbers(&text))
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

pub fn report() -> Result<ExitCode, String> {
    let mut to_apply = Vec::new();
    println!("{:<32} {:<26} {:<26} ", "setting", "live", "recommended");
    for setting in settings(SYSCTL_CONF) {
        let recommended = join(&setting.recommended);
        let Some(live) = live_value(&setting.name) else {
            print_row(&setting.name, "(unreadable)", &recommended, "unknown");
            continue;
        };
        let (finding, target) = setting.compare(&live);
        print_row(&setting.name, &join(&live), &recommended, finding.word());
        if finding == Finding::Below {
            to_apply.push(format!("{}={}", setting.name, join(&target)));
        }
    }
    let ulimit = recommended_open_files().ok_or("sysctl.conf has no `# ulimit -n N` line")?;
    let files = live_open_files();
    let files_below = files.is_none_or(|files| files < ulimit);
    let files_finding = match files {
        Some(files) if files > ulimit => Finding::Better,
        Some(files) if files == ulimit => Finding::Ok,
        _ => Finding::Below,
    };
    let live_files = files.map_or("(unreadable)".to_string(), |n| n.to_string());
    print_row("ulimit -n (open files)", &live_files, &ulimit.to_string(), files_finding.word());
    println!();
    if to_apply.is_empty() {
        println!("no kernel setting is below sysctl.conf's");
    } else {
        let args: Vec<String> =
            to_apply.iter().map(|a| if a.contains(' ') { format!("\"{a}\"") } else { a.clone() }).collect();
        println!("raise them with (as root; settings already better are left as they are):");
        println!("  sysctl -w {}", args.join(" "));
    }
    if files_below {
        println!("and, in the shell that starts the server and the load: ulimit -n {ulimit}");
    }
    let below = !to_apply.is_empty() || files_below;
    Ok(if below { ExitCode::FAILURE } else { ExitCode::SUCCESS })
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
    fn a_tune_line_applies_to_the_next_setting_only() {
        let all = settings("# tune: lower\na = 1\nb = 1\n# a comment\nc = 2 3");
        assert_eq!(
            all.iter().map(|s| s.higher_is_better.clone()).collect::<Vec<_>>(),
            [vec![false], vec![true], vec![true, true]]
        );
    }
}
