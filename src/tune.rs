//! `percore tune`: each setting of sysctl.conf beside its live value, and the one
//! command that applies the ones that differ. It changes nothing.

/// The repository's sysctl.conf, built in so the binary can report on its own.
const SYSCTL_CONF: &str = include_str!("../sysctl.conf");

struct Setting {
    name: String,
    recommended: String,
}

/// `key = value` lines of sysctl.conf, comments skipped.
fn settings() -> Vec<Setting> {
    SYSCTL_CONF
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| Setting { name: name.trim().into(), recommended: normalize(value) })
        .collect()
}

/// The `ulimit -n N` that sysctl.conf recommends in a comment.
fn recommended_open_files() -> Option<String> {
    SYSCTL_CONF
        .lines()
        .find_map(|line| line.trim().strip_prefix("# ulimit -n "))
        .map(|n| n.trim().to_string())
}

/// Values compare with white space folded: /proc/sys separates tcp_rmem with tabs.
fn normalize(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn live_value(name: &str) -> Option<String> {
    let path = format!("/proc/sys/{}", name.replace('.', "/"));
    std::fs::read_to_string(path).ok().map(|text| normalize(&text))
}

/// The soft limit on open files, from /proc/self/limits.
fn live_open_files() -> Option<String> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|line| line.starts_with("Max open files"))?;
    line.split_whitespace().nth(3).map(str::to_string)
}

pub fn report() -> Result<(), String> {
    let mut to_apply = Vec::new();
    println!("{:<32} {:<26} {:<26} ", "setting", "live", "recommended");
    for setting in settings() {
        let live = live_value(&setting.name);
        let differs = live.as_deref() != Some(&setting.recommended);
        print_row(&setting.name, live.as_deref(), &setting.recommended, differs);
        if differs {
            to_apply.push(format!("{}={}", setting.name, setting.recommended));
        }
    }
    let ulimit = recommended_open_files().ok_or("sysctl.conf has no `# ulimit -n N` line")?;
    let live_files = live_open_files();
    let files_differ = live_files.as_deref() != Some(&ulimit);
    print_row("ulimit -n (open files)", live_files.as_deref(), &ulimit, files_differ);
    println!();
    if to_apply.is_empty() {
        println!("every kernel setting matches sysctl.conf");
    } else {
        let args: Vec<String> =
            to_apply.iter().map(|a| if a.contains(' ') { format!("\"{a}\"") } else { a.clone() }).collect();
        println!("apply with (as root; the same as `sysctl -p sysctl.conf`):");
        println!("  sysctl -w {}", args.join(" "));
    }
    if files_differ {
        println!("and, in the shell that starts the server and the load: ulimit -n {ulimit}");
    }
    Ok(())
}

fn print_row(name: &str, live: Option<&str>, recommended: &str, differs: bool) {
    let verdict = if differs { "differs" } else { "ok" };
    println!("{name:<32} {:<26} {recommended:<26} {verdict}", live.unwrap_or("(unreadable)"));
}
