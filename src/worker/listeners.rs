//! The workers' listeners: inherited (systemd's socket activation, or the master
//! this one upgrades) or bound: on an IP address, one per worker, `SO_REUSEPORT`
//! on one address, and how the kernel spreads new connections over them; on a
//! Unix socket's path, one that every worker accepts from, and its file.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use super::error::Error;
use super::options::{Options, PortSharing, Steering};
use crate::listen::{self, Address, Listener};
use crate::sys;

/// The listeners, the descriptors on which to say this master is ready and to
/// read what it was handed (when a master it upgrades passed them), and the Unix
/// socket's file this master removes when it exits.
#[derive(Debug)]
pub(crate) struct Listeners {
    pub(crate) sockets: Vec<Listener>,
    pub(crate) ready: Option<OwnedFd>,
    pub(crate) handed: Option<OwnedFd>,
    /// The file of the Unix socket, if this master bound it or the master it
    /// upgrades handed it over; one systemd passed is systemd's to remove.
    pub(crate) socket_file: Option<SocketFile>,
}

impl Listeners {
    /// The inherited listeners if any were passed, else bound: one per worker on
    /// an IP address, one for all on a Unix socket.
    pub(crate) fn open(options: &Options) -> Result<Listeners, Error> {
        let listeners = match sys::take_inherited().map_err(Error::Inherited)? {
            Some(inherited) if !inherited.listeners.is_empty() => {
                let sockets = inherited.listeners.into_iter().map(Listener::try_from);
                let sockets = sockets.collect::<io::Result<Vec<_>>>().map_err(Error::Inherited)?;
                // An upgrading master passes a descriptor to say ready on; systemd does not.
                let socket_file = inherited.ready.as_ref().and_then(|_| SocketFile::of(&sockets[0]));
                Listeners { sockets, ready: inherited.ready, handed: inherited.handed, socket_file }
            }
            Some(_) => return Err(Error::Inherited(io::Error::other("LISTEN_FDS names no listener"))),
            None => {
                let sockets = bind_all(options)?;
                let socket_file = SocketFile::of(&sockets[0]);
                Listeners { sockets, ready: None, handed: None, socket_file }
            }
        };
        if options.steering == Steering::Cpu {
            listeners.steer_by_cpu(options)?;
        }
        Ok(listeners)
    }

    /// The listener of worker `index`: its own, or (fewer were inherited than there
    /// are workers, or it is a Unix socket) one it shares.
    pub(crate) fn for_worker(&self, index: usize) -> &Listener {
        &self.sockets[index % self.sockets.len()]
    }

    /// Has the kernel complete no more connections into the TCP listeners, for a
    /// stop of every worker: each worker then accepts what its queue holds and
    /// closes it, and no connection a client saw complete is reset unanswered when
    /// the last descriptor of a listener closes (best effort: a listener the filter
    /// could not be attached to is left as it was). Never for a worker stopped alone:
    /// its successor serves on the same listener.
    pub(crate) fn refuse_new_connections(&self) {
        for socket in &self.sockets {
            if let Listener::Tcp(listener) = socket {
                let _ = sys::refuse_new_connections(listener.as_fd());
            }
        }
    }

    /// The address they listen on.
    pub(crate) fn local_addr(&self) -> io::Result<Address> {
        self.sockets[0].local_addr()
    }

    /// Hands each connection to the worker on the CPU that received it: listener i
    /// (in the order they joined the group) is worker i's, on `options.cpus[i]`.
    fn steer_by_cpu(&self, options: &Options) -> Result<(), Error> {
        if let Listener::Unix(_) = self.sockets[0] {
            let why = "a Unix socket has no SO_REUSEPORT group to steer";
            return Err(Error::Steering(io::Error::other(why)));
        }
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

/// The listeners for `options.addr`: see [`bind_each`] and [`listen::bind_unix`]. A
/// Unix socket is bound once, for every worker: it has no `SO_REUSEPORT` group.
fn bind_all(options: &Options) -> Result<Vec<Listener>, Error> {
    let listen_error = |error| Error::Listen { addr: options.addr.clone(), error };
    match &options.addr {
        Address::Ip(addr) => bind_each(*addr, options),
        Address::Unix(path) => {
            Ok(vec![listen::bind_unix(path, &options.listen).map_err(listen_error)?.into()])
        }
    }
}

/// One listener per worker on the same address; with port 0, the first bind picks
/// the port and the others join it. Unless asked to join, an address another socket
/// holds is refused.
fn bind_each(mut addr: std::net::SocketAddr, options: &Options) -> Result<Vec<Listener>, Error> {
    let listen_error = |error| Error::Listen { addr: options.addr.clone(), error };
    let exclusive = options.port_sharing == PortSharing::Exclusive && addr.port() != 0;
    if exclusive && listen::is_taken(addr).map_err(listen_error)? {
        return Err(Error::AddressInUse(options.addr.clone()));
    }
    let mut listeners = Vec::with_capacity(options.cpus.len());
    for _ in &options.cpus {
        let listener = listen::bind(addr, &options.listen).map_err(listen_error)?;
        addr = listener.local_addr().map_err(listen_error)?;
        listeners.push(listener.into());
    }
    Ok(listeners)
}

/// A Unix socket's file as it was once listened on: its path, and the device and
/// inode that tell it from a file put there later (by a server started on the path
/// once this one stopped listening).
#[derive(Debug)]
pub(crate) struct SocketFile {
    path: PathBuf,
    identity: (u64, u64),
}

impl SocketFile {
    /// The file of `listener`, if it is a Unix socket's and is there.
    fn of(listener: &Listener) -> Option<SocketFile> {
        let Ok(Address::Unix(path)) = listener.local_addr() else { return None };
        let identity = identity(&path)?;
        Some(SocketFile { path, identity })
    }

    /// Removes the file, if it is still the one listened on; a file that is gone or
    /// was replaced is left as it is.
    pub(crate) fn remove(self) {
        if identity(&self.path) == Some(self.identity) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The device and inode of the file at `path` (not following a symbolic link).
fn identity(path: &std::path::Path) -> Option<(u64, u64)> {
    let metadata = std::fs::symlink_metadata(path).ok()?;
    Some((metadata.dev(), metadata.ino()))
}
