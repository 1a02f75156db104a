//! The servers of a comparison as processes: the CPU of a process tree read from
//! /proc, a server started with `sh -c` and stopped at the end, a prepare command.

use std::collections::HashMap;
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::netns::Netns;

/// The kernel's clock ticks per second in /proc's CPU times (USER_HZ): 100 on every
/// architecture Linux runs percore on.
const TICKS_PER_SECOND: f64 = 100.0;
/// How long a started server may take to accept a connection.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server has to stop after TERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// Seconds of CPU (user and system) that process `root` and every process below it
/// used so far, with what their reaped children used; `None` when `root` is gone,
/// or dead and not yet reaped (a zombie, whose workers have left its tree).
pub fn tree_cpu(root: u32) -> Option<f64> {
    let stats = all_stats();
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pid, stat) in &stats {
        children.entry(stat.parent).or_default().push(pid);
    }
    stats.get(&root).filter(|stat| !stat.zombie)?;
    let (mut ticks, mut todo) = (0, vec![root]);
    while let Some(pid) = todo.pop() {
        if let Some(stat) = stats.get(&pid) {
            ticks += stat.ticks;
        }
        todo.extend(children.get(&pid).into_iter().flatten());
    }
    Some(ticks as f64 / TICKS_PER_SECOND)
}

/// Seconds of CPU this process used so far, all its threads, ended ones too.
pub fn own_cpu() -> f64 {
    let ticks = stat_of("self").map_or(0, |stat| stat.ticks);
    ticks as f64 / TICKS_PER_SECOND
}

/// Whether process `pid` exists (and is not a zombie).
pub fn is_alive(pid: u32) -> bool {
    stat_of(&pid.to_string()).is_some_and(|stat| !stat.zombie)
}

struct Stat {
    zombie: bool,
    parent: u32,
    /// utime + stime + cutime + cstime.
    ticks: u64,
}

fn all_stats() -> HashMap<u32, Stat> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return HashMap::new() };
    let pids = entries.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok());
    pids.filter_map(|pid| Some((pid, stat_of(&pid.to_string())?))).collect()
}

/// /proc/PID/stat's state, parent and CPU ticks (proc(5): fields 3, 4, and 14 to 17).
fn stat_of(pid: &str) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command may hold spaces and parentheses: the fields start after the last ')'.
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    let number = |i: usize| fields.get(i)?.parse::<u64>().ok();
    let ticks = (11..15).map(number).sum::<Option<u64>>()?;
    Some(Stat { zombie: fields.first() == Some(&"Z"), parent: u32::try_from(number(1)?).ok()?, ticks })
}

/// A server started for a comparison; stopped when dropped. Its output goes to a
/// file (quoted when it fails to start), not among the report's lines.
#[derive(Debug)]
pub struct Server {
    child: Child,
    log: PathBuf,
}

impl Server {
    /// Starts `command` with `sh -c` in a process group of its own (through
    /// `taskset -c CPUS` when `cpus` is given, in `netns` when given), with `{port}`
    /// replaced by a free port and `{host}` by the address to listen on (127.0.0.1,
    /// or the namespace's end of its veth pair), and waits until it accepts there, or
    /// (a command without `{port}`) at `listens`, the target's own address. The group
    /// is what is measured and stopped: a command of several processes is whole.
    /// Returns the server and the address it accepts on.
    pub fn start(
        name: &str,
        command: &str,
        cpus: Option<&str>,
        listens: Option<SocketAddr>,
        netns: Option<&Netns>,
    ) -> Result<(Server, SocketAddr), String> {
        let host = netns.map_or(Ipv4Addr::LOCALHOST, |netns| netns.server_addr);
        let command_here = command.replace("{host}", &host.to_string());
        let (script, addr) = if command.contains("{port}") {
            let port = free_port().map_err(|e| format!("{name}: no free port to start it on: {e}"))?;
            (command_here.replace("{port}", &port.to_string()), SocketAddr::from((host, port)))
        } else {
            let addr =
                listens.ok_or_else(|| format!("{name}: --serve needs {{port}} in its command, or a URL"))?;
            (command_here, addr)
        };
        // Each of ip netns exec, taskset and sh execs the next: the pid is the server's.
        let mut argv: Vec<&str> = netns.map_or(Vec::new(), Netns::exec_prefix);
        if let Some(list) = cpus {
            argv.extend(["taskset", "-c", list]);
        }
        argv.extend(["sh", "-c", &script]);
        let mut line = Command::new(argv[0]);
        line.args(&argv[1..]);
        let log = std::env::temp_dir().join(format!("percore-compare-{}-{name}.log", std::process::id()));
        let output =
            File::create(&log).map_err(|e| format!("{name}: cannot create {}: {e}", log.display()))?;
        let errors = output.try_clone().map_err(|e| format!("{name}: {e}"))?;
        let child = line
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(output)
            .stderr(errors)
            .spawn()
            .map_err(|e| format!("{name}: cannot start {command:?}: {e}"))?;
        let mut server = Server { child, log };
        server.wait_accepting(name, command, addr).map_err(|e| {
            let said = std::fs::read_to_string(&server.log).unwrap_or_default();
            let tail: Vec<&str> = said.lines().rev().take(10).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            if tail.is_empty() {
                e
            } else {
                format!("{e}; it said:\n{}", tail.join("\n"))
            }
        })?;
        Ok((server, addr))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_accepting(&mut self, name: &str, command: &str, addr: SocketAddr) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("{name}: {command:?} exited ({status}) before it accepted a connection"));
            }
            // A connection to see it accepts; the server sees one that sends nothing.
            if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{name}: {command:?} did not accept connections on {addr} within {} s",
                    START_TIMEOUT.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    /// TERM to its process group, then KILL if it has not exited within 5 s;
    /// reaped either way, and its output file removed.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.log);
        let group = format!("-{}", self.pid());
        let signal =
            |name: &str| Command::new("kill").args([name, "--", &group]).stderr(Stdio::null()).status();
        let _ = signal("-TERM");
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            // The group is gone once no process of it is left (kill -0 fails).
            if !signal("-0").is_ok_and(|status| status.success()) {
                let _ = self.child.wait();
                return;
            }
            let _ = self.child.try_wait();
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = signal("-KILL");
        let _ = self.child.wait();
    }
}

/// Runs `command` with `sh -c`, its output to this process's stderr; an error says
/// how it failed.
pub fn prepare(name: &str, command: &str) -> Result<(), String> {
    let status = Command::new("sh")
        .args(["-c", command])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("{name}: cannot run the prepare command {command:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{name}: the prepare command {command:?} failed ({status})"))
    }
}

/// A port no socket here holds now (in a namespace of its own, none holds any).
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
}
