//! `--netns`: the servers in a network namespace of their own, joined to the load's
//! by a veth pair, so that a comparison does not rest on loopback's shortcuts (a
//! loopback send hands the bytes to the receiver in the sender's own system call,
//! and its CPU is charged to the sender). Set up with iproute2's `ip` when the
//! comparison starts and torn down when it ends, after an error or Ctrl-C too.
//!
//! The pair's addresses are link-local (169.254.0.0/16, RFC 3927), a /30 of their
//! own picked from this process's pid, never a private or public range: nothing
//! outside the machine is ever addressed.

use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

/// The capabilities a namespace and a veth pair need, as bits of /proc's CapEff:
/// CAP_NET_ADMIN (12) and CAP_SYS_ADMIN (21, for `ip netns add`'s mount).
const NEEDED: [(u32, &str); 2] = [(12, "CAP_NET_ADMIN"), (21, "CAP_SYS_ADMIN")];

/// A network namespace with one end of a veth pair in it, the other end here;
/// removed, the pair with it, when dropped (after the servers in it are stopped).
#[derive(Debug)]
pub struct Netns {
    name: String,
    /// The pair's end in this namespace, where the load runs.
    local: String,
    /// This end's address.
    pub local_addr: Ipv4Addr,
    /// The address of the pair's end in the namespace, where the servers listen.
    pub server_addr: Ipv4Addr,
}

impl Netns {
    /// Creates the namespace `percore-PID` and the pair; an error says what is
    /// missing (root, `ip`) or what `ip` said, and leaves nothing behind.
    pub fn create() -> Result<Netns, String> {
        missing_capabilities()?;
        let pid = std::process::id();
        // 169.254.1.0 to 169.254.254.255: the first and last 256 addresses of the
        // range are reserved (RFC 3927, 2.1).
        let (third, fourth) = (1 + (pid / 64) % 254, (pid % 64) * 4);
        let address = |host: u32| Ipv4Addr::new(169, 254, third as u8, (fourth + host) as u8);
        let name = format!("percore-{pid}");
        // One of that name left by a process that was killed is not this one's to delete.
        ip(&["netns", "add", &name])?;
        // From here on, a failure drops `netns`, which removes what was made.
        let netns =
            Netns { name, local: format!("pcore{pid}l"), local_addr: address(1), server_addr: address(2) };
        let (name, local, remote) = (&netns.name, &netns.local, format!("pcore{pid}s"));
        let (local_cidr, server_cidr) =
            (format!("{}/30", netns.local_addr), format!("{}/30", netns.server_addr));
        ip(&["link", "add", local, "type", "veth", "peer", "name", &remote, "netns", name])?;
        ip(&["addr", "add", &local_cidr, "dev", local])?;
        ip(&["link", "set", local, "up"])?;
        ip(&["-n", name, "addr", "add", &server_cidr, "dev", &remote])?;
        ip(&["-n", name, "link", "set", &remote, "up"])?;
        ip(&["-n", name, "link", "set", "lo", "up"])?;
        Ok(netns)
    }

    /// What runs a program in the namespace, put before its command line: `ip netns
    /// exec NAME`, which joins it and execs the program.
    pub fn exec_prefix(&self) -> Vec<&str> {
        vec!["ip", "netns", "exec", &self.name]
    }

    /// The namespace's name, as `ip netns` lists it.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Netns {
    /// Deletes this end of the pair (which takes the other end with it) and the
    /// namespace; a step that finds nothing to delete is no error.
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.local]);
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// Runs `ip ARGS`; an error quotes what it said.
fn ip(args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip").args(args).stdin(Stdio::null()).output().map_err(|e| {
        format!("--netns: cannot run ip (iproute2, which sets up the namespace and its veth pair): {e}")
    })?;
    if output.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&output.stderr);
    Err(format!("--netns: ip {} failed ({}): {}", args.join(" "), output.status, said.trim()))
}

/// An error naming the capabilities this process lacks to create a namespace and a
/// veth pair (root has them).
fn missing_capabilities() -> Result<(), String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("--netns: /proc/self/status: {e}"))?;
    let effective = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    let missing: Vec<&str> =
        NEEDED.iter().filter(|(bit, _)| effective & (1 << bit) == 0).map(|&(_, name)| name).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "--netns needs root (it creates a network namespace and a veth pair); this process lacks {}",
            missing.join(" and ")
        ))
    }
}
