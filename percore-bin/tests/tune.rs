//! `percore tune` against a fake /proc/sys (`--proc-sys DIR`), each setting's file
//! holding a value chosen on one side or the other of sysctl.conf's: the report names
//! every setting and only those below, `--apply` raises only those and saves what they
//! were, `--restore` puts them back byte for byte, and without root nothing changes.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use util::{euid, percore_bin, run_capturing, tool_available, Finished};

/// A directory laid out as /proc/sys, removed on drop.
struct FakeProcSys(PathBuf);

/// Each setting of sysctl.conf with the value the fake starts from, as /proc/sys
/// shows it, and for one below the recommendation, what `--apply` sets it to (the
/// recommendation, or, in a field where the live value is better, that field kept):
/// in each order (higher, lower, ranked), one below and one better, and a
/// multi-field one better in one field and below in another.
const START: &[(&str, &str, Option<&str>)] = &[
    ("net.core.somaxconn", "4096", Some("65535")),
    ("net.ipv4.tcp_max_syn_backlog", "131072", None),
    // lower, higher: below in the first field.
    ("net.ipv4.ip_local_port_range", "32768\t65535", Some("1024\t65535")),
    // 2 is loopback only: narrower than 1, though the larger number.
    ("net.ipv4.tcp_tw_reuse", "2", Some("1")),
    // Lower is better: 5 is kept.
    ("net.ipv4.tcp_fin_timeout", "5", None),
    ("net.core.netdev_max_backlog", "1000", Some("65535")),
    ("net.core.rmem_max", "33554432", None),
    ("net.core.wmem_max", "4194304", Some("16777216")),
    // Better in the middle field, equal in the others.
    ("net.ipv4.tcp_rmem", "4096\t131072\t16777216", None),
    // Better in the last field, below in the middle one: the last is kept.
    ("net.ipv4.tcp_wmem", "4096\t16384\t33554432", Some("4096\t65536\t33554432")),
    ("fs.file-max", "9223372036854775807", None),
    ("fs.nr_open", "1048576", Some("2097152")),
];

impl FakeProcSys {
    fn new() -> FakeProcSys {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
        let root = std::env::temp_dir().join(format!("percore-test-sys-{}-{nanos}", std::process::id()));
        let fake = FakeProcSys(root);
        for (name, value, _) in START {
            let path = fake.path(name);
            std::fs::create_dir_all(path.parent().unwrap()).expect("creating the fake /proc/sys");
            std::fs::write(&path, format!("{value}\n")).expect("writing a fake setting");
        }
        fake
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name.replace('.', "/"))
    }

    fn root(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temp path")
    }

    /// Each setting's file, as /proc/sys would show it.
    fn values(&self) -> Vec<(String, String)> {
        START
            .iter()
            .map(|(name, _, _)| {
                let value = std::fs::read_to_string(self.path(name)).expect("reading a fake setting");
                (name.to_string(), value)
            })
            .collect()
    }

    /// `percore tune` with `args`, on this fake.
    fn tune(&self, args: &[&str]) -> Finished {
        let mut all = vec!["tune", "--proc-sys", self.root()];
        all.extend(args);
        run_capturing(&percore_bin(), &all)
    }
}

impl Drop for FakeProcSys {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The word at the end of `name`'s row of the report (ok, better, below).
fn finding<'a>(stdout: &'a str, name: &str) -> &'a str {
    let row = stdout.lines().find(|line| line.split_whitespace().next() == Some(name));
    let row = row.unwrap_or_else(|| panic!("no row for {name}:\n{stdout}"));
    row.split_whitespace().last().unwrap()
}

fn sysctl_conf_names() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("sysctl.conf");
    let conf = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    conf.lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .map(|(name, _)| name.trim().to_string())
        .collect()
}

#[test]
fn the_fake_holds_every_setting_of_sysctl_conf() {
    let names: Vec<&str> = START.iter().map(|(name, _, _)| *name).collect();
    assert_eq!(sysctl_conf_names(), names, "sysctl.conf's settings and this test's differ");
}

#[test]
fn the_report_names_each_setting_and_recommends_raising_only_those_below() {
    let fake = FakeProcSys::new();
    let before = fake.values();
    let run = fake.tune(&[]);
    assert_eq!(run.status.code(), Some(1), "settings are below, so it exits 1:\n{}", run.stdout);
    for (name, _, raised) in START {
        let word = finding(&run.stdout, name);
        assert_eq!(word == "below", raised.is_some(), "{name}: {word}:\n{}", run.stdout);
    }
    let listed = run.stdout.lines().find_map(|line| line.strip_prefix("below: ")).expect("a below: line");
    let expected: Vec<&str> =
        START.iter().filter(|(_, _, raised)| raised.is_some()).map(|(name, _, _)| *name).collect();
    assert_eq!(listed.split_whitespace().collect::<Vec<_>>(), expected, "{}", run.stdout);
    assert!(run.stdout.contains("percore tune --apply"), "{}", run.stdout);
    assert!(run.stdout.contains("ulimit -n"), "no ulimit -n row:\n{}", run.stdout);
    assert_eq!(fake.values(), before, "the report changed a setting");
}

#[test]
fn apply_raises_only_what_is_below_and_restore_puts_back_exactly_what_it_changed() {
    let fake = FakeProcSys::new();
    let before = fake.values();
    let saved = fake.0.join("saved.conf");
    let saved_arg = saved.to_str().unwrap();
    let run = fake.tune(&["--apply", "--save", saved_arg]);
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    for (name, start, raised) in START {
        let now = std::fs::read_to_string(fake.path(name)).unwrap();
        assert_eq!(now, format!("{}\n", raised.unwrap_or(start)), "{name} after --apply:\n{}", run.stdout);
    }
    assert!(run.stdout.contains(&format!("percore tune --restore {saved_arg}")), "{}", run.stdout);

    // The saved file holds exactly the values it changed, as they were.
    let text = std::fs::read_to_string(&saved).expect("the saved file");
    let lines: Vec<&str> = text.lines().filter(|line| !line.starts_with('#')).collect();
    let expected: Vec<String> = START
        .iter()
        .filter(|(_, _, raised)| raised.is_some())
        .map(|(name, start, _)| format!("{name} = {}", start.replace('\t', " ")))
        .collect();
    assert_eq!(lines, expected, "{text}");

    // Again: nothing is below, nothing changes, and the saved values stay those from
    // before the first --apply.
    let again = fake.tune(&["--apply", "--save", saved_arg]);
    assert_eq!(again.status.code(), Some(0), "{again:?}");
    assert!(again.stdout.contains("nothing changed"), "{}", again.stdout);
    assert_eq!(std::fs::read_to_string(&saved).unwrap(), text);

    let restored = fake.tune(&["--restore", saved_arg]);
    assert_eq!(restored.status.code(), Some(0), "{restored:?}");
    assert_eq!(fake.values(), before, "--restore did not put every value back:\n{}", restored.stdout);

    // Applied and restored once more, through the same file: the same round trip.
    assert_eq!(fake.tune(&["--apply", "--save", saved_arg]).status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&saved).unwrap(), text);
    assert_eq!(fake.tune(&["--restore", saved_arg]).status.code(), Some(0));
    assert_eq!(fake.values(), before);
}

#[test]
fn restore_takes_only_a_file_apply_wrote() {
    let fake = FakeProcSys::new();
    let before = fake.values();
    let conf = concat!(env!("CARGO_MANIFEST_DIR"), "/sysctl.conf");
    let run = fake.tune(&["--restore", conf]);
    assert_eq!(run.status.code(), Some(1), "{run:?}");
    assert!(run.stderr.contains("was not written by percore tune --apply"), "{}", run.stderr);
    assert_eq!(fake.values(), before, "a setting changed");
}

#[test]
fn apply_without_root_says_so_and_changes_nothing() {
    let fake = FakeProcSys::new();
    let before = fake.values();
    let saved = fake.0.join("saved.conf");
    let bin = percore_bin();
    let bin = bin.to_str().unwrap();
    let tune = ["tune", "--proc-sys", fake.root(), "--apply", "--save", saved.to_str().unwrap()];
    let run = if euid() == 0 {
        // As root, the same command as nobody: the fake's files are root's, 0644.
        if !tool_available("setpriv", "util-linux") {
            return;
        }
        let mut args = vec!["--reuid=65534", "--regid=65534", "--clear-groups", bin];
        args.extend(tune);
        run_capturing(Path::new("setpriv"), &args)
    } else {
        run_capturing(Path::new(bin), &tune)
    };
    assert_eq!(run.status.code(), Some(1), "{run:?}");
    assert!(
        run.stderr.contains("needs root") && run.stderr.contains("nothing was changed"),
        "{}",
        run.stderr
    );
    assert_eq!(fake.values(), before, "a setting changed");
    assert!(!saved.exists(), "it saved values it did not change");
}

#[test]
fn restore_and_save_need_their_flags() {
    let fake = FakeProcSys::new();
    for args in [&["--save", "x"][..], &["--apply", "--restore", "x"]] {
        let run = fake.tune(args);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {run:?}");
    }
}
