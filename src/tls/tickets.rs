//! What a client keeps to resume with: per server name, up to a number of TLS 1.3
//! tickets the caller chose (each used once, the newest first), one TLS 1.2 session,
//! and the key-exchange group the server chose last. rustls's own store keeps at
//! most 8 tickets a server, so a client that opens more connections than that at
//! once (a load generator replacing a burst of closed ones) would make full
//! handshakes with tickets it was sent and had to drop.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Mutex;

use rustls::client::{ClientSessionStore, Tls12ClientSessionValue, Tls13ClientSessionValue};
use rustls::pki_types::ServerName;
use rustls::NamedGroup;

/// Servers a store keeps sessions for: a client of the loop speaks to a few; past
/// this many, the store starts again empty rather than grow.
const MAX_SERVERS: usize = 64;

/// Sessions to resume with, per server name.
pub(super) struct Tickets {
    per_server: usize,
    servers: Mutex<HashMap<ServerName<'static>, Kept>>,
}

/// What is kept for one server.
#[derive(Default)]
struct Kept {
    kx_hint: Option<NamedGroup>,
    tls12: Option<Tls12ClientSessionValue>,
    /// Oldest first.
    tls13: VecDeque<Tls13ClientSessionValue>,
}

impl Tickets {
    /// A store that keeps up to `per_server` TLS 1.3 tickets for each server.
    pub(super) fn new(per_server: usize) -> Tickets {
        Tickets { per_server, servers: Mutex::new(HashMap::new()) }
    }

    /// Edits what is kept for `server`, kept from now on if it was not.
    fn edit<T>(&self, server: &ServerName<'_>, edit: impl FnOnce(&mut Kept) -> T) -> T {
        let mut servers = self.servers.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !servers.contains_key(server) && servers.len() >= MAX_SERVERS {
            servers.clear();
        }
        edit(servers.entry(server.to_owned()).or_default())
    }
}

impl fmt::Debug for Tickets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The sessions are secrets: only how many may be kept.
        f.debug_struct("Tickets").field("per_server", &self.per_server).finish_non_exhaustive()
    }
}

impl ClientSessionStore for Tickets {
    fn set_kx_hint(&self, server: ServerName<'static>, group: NamedGroup) {
        self.edit(&server, |kept| kept.kx_hint = Some(group));
    }

    fn kx_hint(&self, server: &ServerName<'_>) -> Option<NamedGroup> {
        self.edit(server, |kept| kept.kx_hint)
    }

    fn set_tls12_session(&self, server: ServerName<'static>, session: Tls12ClientSessionValue) {
        self.edit(&server, |kept| kept.tls12 = Some(session));
    }

    fn tls12_session(&self, server: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.edit(server, |kept| kept.tls12.clone())
    }

    fn remove_tls12_session(&self, server: &ServerName<'static>) {
        self.edit(server, |kept| kept.tls12 = None);
    }

    fn insert_tls13_ticket(&self, server: ServerName<'static>, ticket: Tls13ClientSessionValue) {
        let per_server = self.per_server;
        self.edit(&server, |kept| {
            if kept.tls13.len() == per_server {
                kept.tls13.pop_front();
            }
            kept.tls13.push_back(ticket);
        });
    }

    fn take_tls13_ticket(&self, server: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        self.edit(server, |kept| kept.tls13.pop_back())
    }
}
