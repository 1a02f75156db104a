//! What the tests learn about a process from /proc: its state and parent, its
//! children, its CPU affinity, its memory and its pending signals; what
//! /proc/net/tcp says about a socket; how much a TCP socket may buffer; and this
//! process's open-file limit, raised.

use std::net::{IpAddr, SocketAddr};

/// State letter and parent pid of `pid` from /proc/PID/stat, None if there is
/// no such process.
pub fn proc_state(pid: u32) -> Option<(char, u32)> {
    let fields = stat_fields(pid)?;
    Some((fields.first()?.chars().next()?, fields.get(1)?.parse().ok()?))
}

/// Whether `pid` exists and is not a zombie.
pub fn is_running(pid: u32) -> bool {
    proc_state(pid).is_some_and(|(state, _)| state != 'Z')
}

/// Pids of the live (non-zombie) children of `parent`, sorted.
pub fn children_of(parent: u32) -> Vec<u32> {
    let mut children: Vec<u32> = std::fs::read_dir("/proc")
        .expect("reading /proc")
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&pid| proc_state(pid).is_some_and(|(state, ppid)| ppid == parent && state != 'Z'))
        .collect();
    children.sort_unstable();
    children
}

/// The `Cpus_allowed_list` of `pid` (e.g. "1" or "0-1"), None if it is gone.
pub fn cpus_allowed(pid: u32) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| line.strip_prefix("Cpus_allowed_list:")).map(|v| v.trim().to_string())
}

/// The `Cpus_allowed_list` of each thread of `pid`; empty if it is gone.
pub fn thread_cpus_allowed(pid: u32) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks
        .filter_map(|task| {
            let status = std::fs::read_to_string(task.ok()?.path().join("status")).ok()?;
            status
                .lines()
                .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string())
        })
        .collect()
}

/// Signal number of SIGTERM, for [`signal_pending`].
pub const SIGTERM: u32 = 15;

/// Whether signal number `signo` is pending for `pid` (to the process or to
/// its main thread), as /proc/PID/status shows it; false if `pid` is gone.
pub fn signal_pending(pid: u32, signo: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return false };
    status
        .lines()
        .filter_map(|line| line.strip_prefix("ShdPnd:").or_else(|| line.strip_prefix("SigPnd:")))
        .filter_map(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .any(|mask| mask & (1 << (signo - 1)) != 0)
}

/// The fields of `/proc/PID/stat` after the command name (which is in parentheses
/// and may itself hold spaces or ')'): the state, field 3, comes first.
pub fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(stat[stat.rfind(')')? + 1..].split_whitespace().map(str::to_owned).collect())
}

/// CPU time `pid` has used, user and system, in clock ticks (utime and stime,
/// fields 14 and 15 of /proc/PID/stat).
pub fn cpu_ticks(pid: u32) -> u64 {
    let fields = stat_fields(pid).unwrap_or_else(|| panic!("no process {pid}"));
    fields[11..13].iter().map(|field| field.parse::<u64>().expect("a tick count")).sum()
}

/// A field of `/proc/PID/status` in KiB: `VmRSS` (resident now) or `VmHWM` (its peak).
pub fn vm_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("reading /proc/{pid}/status: {e}"));
    let prefix = format!("{field}:");
    let line = status.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or_else(|| panic!("no {field}"));
    line.trim().trim_end_matches("kB").trim().parse().unwrap_or_else(|e| panic!("{field} {line:?}: {e}"))
}

/// The send and receive queues, in bytes, of the IPv4 TCP socket bound to `local`
/// and connected to `remote`, from /proc/net/tcp: `tx` is what the socket was given
/// and the peer has not acknowledged, `rx` what arrived and its owner has not read.
/// None if there is no such socket.
pub fn tcp_queues(local: SocketAddr, remote: SocketAddr) -> Option<(u64, u64)> {
    let (local, remote) = (proc_net_tcp_address(local), proc_net_tcp_address(remote));
    let table = std::fs::read_to_string("/proc/net/tcp").expect("reading /proc/net/tcp");
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(1) != Some(&local.as_str()) || fields.get(2) != Some(&remote.as_str()) {
            return None;
        }
        let (tx, rx) = fields.get(4)?.split_once(':')?;
        Some((u64::from_str_radix(tx, 16).ok()?, u64::from_str_radix(rx, 16).ok()?))
    })
}

/// [`tcp_queues`] of each (local, remote) pair of `sockets`, in order, from one reading
/// of /proc/net/tcp: for many sockets at once.
pub fn tcp_queues_of(sockets: &[(SocketAddr, SocketAddr)]) -> Vec<Option<(u64, u64)>> {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("reading /proc/net/tcp");
    let mut queues = std::collections::HashMap::new();
    for line in table.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(&local), Some(&remote), Some(queue)) = (fields.get(1), fields.get(2), fields.get(4)) else {
            continue;
        };
        let Some((tx, rx)) = queue.split_once(':') else { continue };
        if let (Ok(tx), Ok(rx)) = (u64::from_str_radix(tx, 16), u64::from_str_radix(rx, 16)) {
            // The first of the same pair, as `tcp_queues` finds it.
            queues.entry((local, remote)).or_insert((tx, rx));
        }
    }
    sockets
        .iter()
        .map(|&(local, remote)| {
            let (local, remote) = (proc_net_tcp_address(local), proc_net_tcp_address(remote));
            queues.get(&(local.as_str(), remote.as_str())).copied()
        })
        .collect()
}

/// An IPv4 address as /proc/net/tcp writes it: the address in host byte order
/// (little-endian here), then the port, both in hex.
fn proc_net_tcp_address(addr: SocketAddr) -> String {
    match addr.ip() {
        IpAddr::V4(ip) => format!("{:08X}:{:04X}", u32::from_le_bytes(ip.octets()), addr.port()),
        IpAddr::V6(_) => panic!("tcp_queues reads IPv4 sockets only, not {addr}"),
    }
}

/// A body length the sockets cannot take whole, so that a server's sends stop
/// part-way and the rest waits in the server until the client reads: at least `min`,
/// and more than twice the largest send buffer the kernel grows a TCP socket's to
/// (the third field of net.ipv4.tcp_wmem: 4 MiB by default, 16 MiB as sysctl.conf
/// tunes it). A 1 MiB answer fits whole in a loopback socket's grown buffer.
pub fn beyond_socket_buffers(min: usize) -> usize {
    let wmem = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem").expect("reading tcp_wmem");
    let max: usize = wmem.split_whitespace().nth(2).and_then(|max| max.parse().ok()).expect("tcp_wmem's max");
    min.max(2 * max + 1024 * 1024)
}

/// Raises this process's soft open-file limit to its hard limit, which must
/// allow `needed` descriptors. util-linux's `prlimit` does it from outside, so the
/// test needs no unsafe code of its own.
pub fn raise_fd_limit(needed: u64) {
    let limits = std::fs::read_to_string("/proc/self/limits").expect("reading /proc/self/limits");
    let line = limits.lines().find(|l| l.starts_with("Max open files")).expect("an open-files line");
    let hard: u64 =
        line.split_whitespace().nth(4).and_then(|v| v.parse().ok()).expect("a numeric hard limit");
    assert!(hard >= needed, "this test needs an open-file limit of {needed}, the hard limit is {hard}");
    let pid = std::process::id().to_string();
    let status = std::process::Command::new("prlimit")
        .args(["--pid", &pid, &format!("--nofile={hard}:{hard}")])
        .status()
        .expect("running prlimit");
    assert!(status.success(), "prlimit failed: {status}");
}

/// This process's effective user id, from /proc/self/status.
pub fn euid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").expect("reading /proc/self/status");
    let uids = status.lines().find_map(|line| line.strip_prefix("Uid:")).expect("a Uid: line");
    uids.split_whitespace().nth(1).and_then(|id| id.parse().ok()).expect("an effective uid")
}
