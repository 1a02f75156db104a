//! [`Service`]: what the workers serve, as the master loads it (at start and at each
//! reload) and as each worker builds its protocol from it.

use std::io;

use crate::reactor::Protocol;

/// What the workers serve. The master loads its [`Config`](Service::Config) at start
/// and again at each reload (SIGHUP), before it forks the workers that build their
/// protocol from it: a reload that cannot load (a body file gone) leaves the
/// running workers as they are.
///
/// A closure that builds a protocol is a service with nothing to load:
/// `worker::run(&options, || Ok(Echo), report)`.
pub trait Service {
    /// The protocol each worker serves.
    type Protocol: Protocol;
    /// What the protocol is built from: read from disk, say, in the master.
    type Config;

    /// Loads the configuration, in the master.
    fn load(&self) -> io::Result<Self::Config>;

    /// Builds a worker's protocol, in the worker.
    fn protocol(&self, config: &Self::Config) -> io::Result<Self::Protocol>;
}

impl<P: Protocol, F: Fn() -> io::Result<P>> Service for F {
    type Protocol = P;
    type Config = ();

    fn load(&self) -> io::Result<()> {
        Ok(())
    }

    fn protocol(&self, _config: &()) -> io::Result<P> {
        self()
    }
}
