//! The workers' listeners: inherited (systemd's socket activation, or the master
//! this one upgrades) or bound, one per worker, `SO_REUSEPORT` on one address; and
//! how the kernel spreads new connections over them.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, OwnedFd};

use super::error::Error;
use super::options::{Options, PortSharing, Steering};
use crate::listen;
use crate::sys;

/// The listeners, and the descriptor on which to say this master is ready (when a
/// master it upgrades passed one).
#[derive(Debug)]
pub(crate) struct Listeners {
    pub(crate) sockets: Vec<TcpListener>,
    pub(crate) ready: Option<OwnedFd>,
}

impl Listeners {
    /// The inherited listeners if any were passed, else one bound per worker.
    pub(crate) fn open(options: &Options) -> Result<Listeners, Error> {
        let listeners = match sys::take_inherited().map_err(Error::Inherited)? {
            Some(inherited) if !inherited.listeners.is_empty() => {
                Listeners { sockets: inherited.listeners, ready: inherited.ready }
            }
            Some(_) => return Err(Error::Inherited(io::Error::other("LISTEN_FDS names no listener"))),
            None => Listeners { sockets: bind_all(options)?, ready: None },
        };
        if options.steering == Steering::Cpu {
            listeners.steer_by_cpu(options)?;
        }
        Ok(listeners)
    }

    /// The listener of worker `index`: its own, or (fewer were inherited than there
    /// are workers) one it shares.
    pub(crate) fn for_worker(&self, index: usize) -> &TcpListener {
        &self.sockets[index % self.sockets.len()]
    }

    /// The address they listen on.
    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sockets[0].local_addr()
    }

    /// Hands each connection to the worker on the CPU that received it: listener i
    /// (in the order they joined the group) is worker i's, on `options.cpus[i]`.
    fn steer_by_cpu(&self, options: &Options) -> Result<(), Error> {
        let one_each = self.sockets.len() == options.cpus.len();
        let mut distinct = options.cpus.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if !one_each || distinct.len() != options.cpus.len() {
            let why = format!(
                "needs one worker per CPU, each on its own: {} workers on CPUs {}",
                options.cpus.len(),
                super::cpus::format_cpu_list(&distinct)
            );
            return Err(Error::Steering(io::Error::other(why)));
        }
        sys::steer_by_cpu(self.sockets[0].as_fd(), &options.cpus).map_err(Error::Steering)
    }
}

/// One listener per worker on the same address; with port 0, the first bind picks
/// the port and the others join it. Unless asked to join, an address another socket
/// holds is refused.
fn bind_all(options: &Options) -> Result<Vec<TcpListener>, Error> {
    let listen_error = |error| Error::Listen { addr: options.addr, error };
    let exclusive = options.port_sharing == PortSharing::Exclusive && options.addr.port() != 0;
    if exclusive && listen::is_taken(options.addr).map_err(listen_error)? {
        return Err(Error::AddressInUse(options.addr));
    }
    let mut addr = options.addr;
    let mut listeners = Vec::with_capacity(options.cpus.len());
    for _ in &options.cpus {
        let listener = listen::bind(addr, &options.listen).map_err(listen_error)?;
        addr = listener.local_addr().map_err(listen_error)?;
        listeners.push(listener);
    }
    Ok(listeners)
}
