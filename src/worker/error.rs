//! Why the workers could not run, in the master ([`Error`]) or in a worker
//! ([`WorkerError`]).

use std::io;

use crate::listen::Address;

/// Why [`run`](super::run) could not run the workers.
#[derive(Debug)]
pub enum Error {
    /// [`Options::cpus`](super::Options::cpus) is empty: there is no worker to run.
    NoWorkers,
    /// The calling process runs more than one thread, so it must not fork.
    Threaded {
        /// How many it runs.
        threads: usize,
    },
    /// A listener could not be bound.
    Listen {
        /// The address asked for (a Unix socket's path: in use, or a file that
        /// is not a socket, is this error).
        addr: Address,
        /// Why.
        error: io::Error,
    },
    /// Another socket holds the IP address, and sharing it was not asked for.
    AddressInUse(Address),
    /// The descriptors passed by `LISTEN_FDS` (systemd, or an upgrading master) are
    /// not listeners.
    Inherited(io::Error),
    /// The reuseport program that steers connections by CPU could not be attached.
    Steering(io::Error),
    /// The service's configuration could not be loaded (see [`Service::load`](super::Service::load)).
    Load(io::Error),
    /// The master's own set-up failed (its signalfd, its epoll instance).
    Setup(io::Error),
    /// The master failed while supervising (waiting, reaping).
    Master(io::Error),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::NoWorkers => f.write_str("no worker to run: the options give no CPU"),
            Error::Threaded { threads } => {
                write!(f, "cannot fork workers from a process running {threads} threads (it must run one)")
            }
            Error::Listen { addr, error } => write!(f, "cannot listen on {addr}: {error}"),
            Error::AddressInUse(addr) => {
                write!(f, "cannot listen on {addr}: address in use by another socket")
            }
            Error::Inherited(error) => write!(f, "inherited listeners (LISTEN_FDS): {error}"),
            Error::Steering(error) => write!(f, "cannot steer connections by CPU: {error}"),
            Error::Load(error) => write!(f, "{error}"),
            Error::Setup(error) => write!(f, "master: {error}"),
            Error::Master(error) => write!(f, "master: {error}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::NoWorkers | Error::Threaded { .. } | Error::AddressInUse(_) => None,
            Error::Listen { error, .. }
            | Error::Inherited(error)
            | Error::Steering(error)
            | Error::Load(error)
            | Error::Setup(error)
            | Error::Master(error) => Some(error),
        }
    }
}

/// Why a worker could not run; it exits with status 1 and the master restarts it.
#[derive(Debug)]
pub enum WorkerError {
    /// The master died before the worker could arrange to follow it.
    MasterGone,
    /// `prctl(PR_SET_PDEATHSIG)` failed.
    DeathSignal(io::Error),
    /// The worker could not be pinned to its CPU.
    Pin(usize),
    /// `SCHED_BATCH` could not be set.
    Scheduling(io::Error),
    /// The protocol could not be built.
    Protocol(io::Error),
    /// The event loop failed.
    Loop(io::Error),
    /// Reading the signalfd failed.
    Signals(io::Error),
}

impl std::fmt::Display for WorkerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkerError::MasterGone => f.write_str("the master is gone"),
            WorkerError::DeathSignal(e) => write!(f, "prctl: {e}"),
            WorkerError::Pin(cpu) => write!(f, "cannot pin to CPU {cpu}"),
            WorkerError::Scheduling(e) => write!(f, "cannot set SCHED_BATCH: {e}"),
            WorkerError::Protocol(e) => write!(f, "{e}"),
            WorkerError::Loop(e) => write!(f, "event loop: {e}"),
            WorkerError::Signals(e) => write!(f, "signalfd: {e}"),
        }
    }
}

impl std::error::Error for WorkerError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_from_a_system_call_gives_it_as_its_source() {
        let addr = Address::from(([127, 0, 0, 1], 80));
        let error = Error::Listen { addr, error: io::Error::from(io::ErrorKind::PermissionDenied) };
        assert_eq!(error.to_string(), "cannot listen on 127.0.0.1:80: permission denied");
        let source = std::error::Error::source(&error).expect("the system call's error");
        assert_eq!(source.to_string(), "permission denied");
        assert!(std::error::Error::source(&Error::NoWorkers).is_none());
    }

    #[test]
    fn an_error_says_what_is_wrong_in_the_options_terms() {
        let addr = Address::from(([127, 0, 0, 1], 80));
        let in_use = Error::AddressInUse(addr);
        assert_eq!(in_use.to_string(), "cannot listen on 127.0.0.1:80: address in use by another socket");
        let path = Address::Unix("/run/p.sock".into());
        let live = io::Error::new(io::ErrorKind::AddrInUse, "a server listens on it");
        let unix = Error::Listen { addr: path, error: live };
        assert_eq!(unix.to_string(), "cannot listen on unix:/run/p.sock: a server listens on it");
        let steering = Error::Steering(io::Error::other("needs one worker per CPU"));
        assert_eq!(steering.to_string(), "cannot steer connections by CPU: needs one worker per CPU");
    }

    #[test]
    fn a_workers_error_says_what_failed() {
        assert_eq!(WorkerError::Pin(3).to_string(), "cannot pin to CPU 3");
        assert_eq!(WorkerError::MasterGone.to_string(), "the master is gone");
        let loop_error = WorkerError::Loop(io::Error::from(io::ErrorKind::OutOfMemory));
        assert_eq!(loop_error.to_string(), "event loop: out of memory");
    }
}
