//! TLS for the loop's connections (the `tls` feature): a server's certificate and
//! key ([`ServerTls`]), a client's trust ([`ClientTls`]), and, inside the crate, each
//! connection's session. rustls runs the handshake; once it is done, percore's own
//! record layer seals and opens the records with the secrets rustls derived, in
//! the loop's buffers: input is decrypted where it was read, output encrypted into
//! the bytes that are sent, and an idle connection keeps its keys and nothing
//! else. A protocol sees plaintext through the same `Io` as without TLS.

mod config;
mod record;
mod session;
mod ticket_keys;
mod tickets;
mod validity;

pub use config::{ClientTls, ClientTlsOptions, ServerTls, TlsError, Trust};
pub(crate) use record::{ContentType, MAX_PLAINTEXT};
/// The types of [`Negotiated`]'s fields, rustls's own (rustls 0.23).
pub use rustls::{CipherSuite, ProtocolVersion};
pub(crate) use session::{Failure, Handshaking, Session};
pub use session::{Negotiated, TlsFailure};
