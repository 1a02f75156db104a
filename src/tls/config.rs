//! What a TLS connection is made with: a server's certificate and key (from PEM
//! files), a client's trust in its servers, and the protocol settings both keep.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::UnbufferedClientConnection;
use rustls::crypto::{aws_lc_rs as provider, CryptoProvider};
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{ClientHello, NoServerSessionStorage, ResolvesServerCert, UnbufferedServerConnection};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::session::Session;
use super::ticket_keys::{NoTickets, TicketKeys};
use super::tickets::Tickets;
use super::validity;

/// Why a certificate, a key or a CA file could not be taken: each names the file.
#[derive(Debug)]
pub enum TlsError {
    /// The file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        error: io::Error,
    },
    /// The file has no certificate (or no private key, for a key file) in PEM.
    Missing {
        /// The file.
        path: PathBuf,
        /// What it lacks: "certificate" or "private key".
        what: &'static str,
    },
    /// The file's PEM does not parse.
    Pem {
        /// The file.
        path: PathBuf,
        /// What the PEM parser said.
        error: String,
    },
    /// rustls refused the certificate or the key: a key that does not match the
    /// certificate, or of a kind it does not sign with.
    Refused {
        /// The key file.
        key: PathBuf,
        /// The certificate file.
        cert: PathBuf,
        /// What rustls said.
        error: rustls::Error,
    },
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::Read { path, error } => write!(f, "{}: {error}", path.display()),
            TlsError::Missing { path, what } => write!(f, "{}: no {what} in PEM", path.display()),
            TlsError::Pem { path, error } => write!(f, "{}: malformed PEM: {error}", path.display()),
            TlsError::Refused { key, cert, error: rustls::Error::InconsistentKeys(_) } => {
                write!(f, "{}: not a key for the certificate of {}", key.display(), cert.display())
            }
            TlsError::Refused { key, cert, error } => {
                write!(f, "{}: refused with the certificate of {}: {error}", key.display(), cert.display())
            }
        }
    }
}

impl std::error::Error for TlsError {}

/// A server's TLS: its certificate chain and key (or several, one for each group of
/// names: [`with_certificate`](ServerTls::with_certificate)), TLS 1.3 and 1.2 (1.0 and 1.1 are
/// refused), the provider's AEAD cipher suites (AES-GCM and ChaCha20-Poly1305, with
/// ECDHE), no 0-RTT, and session tickets for resumption (no session table: a
/// worker's memory does not grow with its clients). Cheap to clone: every
/// connection shares it; a clone is equal to what it was cloned from.
///
/// Its tickets are sealed with keys that step forward every 6 hours from one
/// secret, made when it is loaded: the workers a master forks after loading it
/// seal and open tickets alike, so a client resumes on whichever worker takes its
/// connection, and a reload's workers do too; a binary upgrade hands the secret to
/// the new master ([`worker::run`](crate::worker::run) does). A ticket opens for 6
/// to 12 hours.
#[derive(Clone)]
pub struct ServerTls {
    config: Arc<rustls::ServerConfig>,
    /// Its certificates, in the order of `files`: the config's resolver.
    certified: Arc<ByName>,
    /// The keys its tickets are sealed with; `None` without tickets.
    tickets: Option<Arc<TicketKeys>>,
    /// Where its certificates and keys were read from, to be read again.
    files: Vec<Files>,
}

/// A certificate chain's file and its key's.
#[derive(Clone)]
struct Files {
    cert: PathBuf,
    key: PathBuf,
}

impl Files {
    fn of(cert: &Path, key: &Path) -> Files {
        Files { cert: cert.to_owned(), key: key.to_owned() }
    }

    /// The chain with its key, which must match it.
    fn certified(&self, provider: &CryptoProvider) -> Result<Arc<CertifiedKey>, TlsError> {
        let chain = certificates(&self.cert)?;
        let key = read_pem(&self.key, PrivateKeyDer::from_pem_slice, "private key")?;
        let certified = CertifiedKey::from_der(chain, key, provider).map_err(|error| self.refused(error))?;
        Ok(Arc::new(certified))
    }

    fn refused(&self, error: rustls::Error) -> TlsError {
        TlsError::Refused { key: self.key.clone(), cert: self.cert.clone(), error }
    }
}

/// Every file's certificate, for the names a client asks for.
fn certified(files: &[Files], provider: &CryptoProvider) -> Result<Arc<ByName>, TlsError> {
    let certified = files.iter().map(|file| file.certified(provider)).collect::<Result<Vec<_>, _>>()?;
    Ok(Arc::new(ByName(certified)))
}

/// The certificate for the name a client asks for (SNI): the first whose names
/// (its subjectAltName) include it; the first of all for a name none has, or none.
#[derive(Debug)]
struct ByName(Vec<Arc<CertifiedKey>>);

impl ResolvesServerCert for ByName {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let [first, others @ ..] = &self.0[..] else { return None };
        let named = match (others.is_empty(), hello.server_name()) {
            (false, Some(name)) => ServerName::try_from(name).ok().and_then(|name| {
                self.0.iter().find(|certified| {
                    let cert = certified
                        .end_entity_cert()
                        .ok()
                        .and_then(|der| webpki::EndEntityCert::try_from(der).ok());
                    cert.is_some_and(|cert| cert.verify_is_valid_for_subject_name(&name).is_ok())
                })
            }),
            _ => None,
        };
        Some(Arc::clone(named.unwrap_or(first)))
    }
}

impl PartialEq for ServerTls {
    /// The same configuration: one load of the same files, or a clone of it.
    fn eq(&self, other: &ServerTls) -> bool {
        Arc::ptr_eq(&self.config, &other.config)
    }
}

impl Eq for ServerTls {}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls").field("alpn", &self.config.alpn_protocols).finish_non_exhaustive()
    }
}

impl ServerTls {
    /// The certificate chain of `cert` (PEM, the server's certificate first) with
    /// the private key of `key` (PEM: PKCS#8, SEC1 or PKCS#1), which must match it.
    pub fn from_pem_files(cert: impl AsRef<Path>, key: impl AsRef<Path>) -> Result<ServerTls, TlsError> {
        let files = vec![Files::of(cert.as_ref(), key.as_ref())];
        let provider = Arc::new(provider::default_provider());
        let certified = certified(&files, &provider)?;
        let refused = |error| files[0].refused(error);
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(rustls::ALL_VERSIONS)
            .map_err(refused)?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(&certified) as _);
        // The record layer is percore's once the handshake is done.
        config.enable_secret_extraction = true;
        config.max_early_data_size = 0;
        // One ticket per connection: a client resumes once with each.
        config.send_tls13_tickets = 1;
        config.session_storage = Arc::new(NoServerSessionStorage {});
        let tickets = Arc::new(TicketKeys::new().map_err(refused)?);
        config.ticketer = Arc::clone(&tickets) as _;
        Ok(ServerTls { config: Arc::new(config), certified, tickets: Some(tickets), files })
    }

    /// The same, with one more certificate chain and key (as
    /// [`from_pem_files`](ServerTls::from_pem_files) reads them), for the names in
    /// its subjectAltName (SNI, as nginx's `server_name` picks a server): a client
    /// is answered with the first certificate whose names include the one it asks
    /// for, and with the first of all when it asks for none or for a name none has.
    pub fn with_certificate(
        &self,
        cert: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<ServerTls, TlsError> {
        let mut files = self.files.clone();
        files.push(Files::of(cert.as_ref(), key.as_ref()));
        self.certified_from(files)
    }

    /// The same, with its certificates and keys read again from their files (a
    /// renewal, at a reload): the ticket keys, ALPN and the rest as they were. A
    /// file that fails is the error that names it, as at the first load.
    pub fn reloaded(&self) -> Result<ServerTls, TlsError> {
        self.certified_from(self.files.clone())
    }

    fn certified_from(&self, files: Vec<Files>) -> Result<ServerTls, TlsError> {
        let certified = certified(&files, self.config.crypto_provider())?;
        let mut config = rustls::ServerConfig::clone(&self.config);
        config.cert_resolver = Arc::clone(&certified) as _;
        Ok(ServerTls { config: Arc::new(config), certified, files, ..self.clone() })
    }

    /// The same, resuming no session: no ticket is sent, none is taken (`percore
    /// serve --tls-tickets off`); every handshake is a full one.
    pub fn without_tickets(&self) -> ServerTls {
        let mut config = rustls::ServerConfig::clone(&self.config);
        config.send_tls13_tickets = 0;
        config.ticketer = Arc::new(NoTickets);
        ServerTls { config: Arc::new(config), tickets: None, ..self.clone() }
    }

    /// Its ticket keys as they are now, for a new master to go on from
    /// ([`with_ticket_keys`](ServerTls::with_ticket_keys)); `None` without tickets.
    pub(crate) fn ticket_keys(&self) -> Option<Vec<u8>> {
        self.tickets.as_ref().map(|keys| keys.export())
    }

    /// The same, sealing its tickets with the keys of `exported` (what an older
    /// master's [`ticket_keys`](ServerTls::ticket_keys) gave), so that the tickets
    /// that master's workers sent resume here; as it is, if it has no tickets or
    /// `exported` is not such keys.
    pub(crate) fn with_ticket_keys(&self, exported: &[u8]) -> ServerTls {
        let Some(keys) = self.tickets.as_ref().and(TicketKeys::import(exported)) else { return self.clone() };
        let keys = Arc::new(keys);
        let mut config = rustls::ServerConfig::clone(&self.config);
        config.ticketer = Arc::clone(&keys) as _;
        ServerTls { config: Arc::new(config), tickets: Some(keys), ..self.clone() }
    }

    /// The same, offering `protocols` by ALPN (RFC 7301), most preferred first: a
    /// client that offers none of them is refused. The loop sets its protocol's
    /// ([`Protocol::ALPN`](crate::reactor::Protocol::ALPN)).
    pub fn with_alpn(&self, protocols: &[&[u8]]) -> ServerTls {
        let mut config = rustls::ServerConfig::clone(&self.config);
        config.alpn_protocols = protocols.iter().map(|name| name.to_vec()).collect();
        ServerTls { config: Arc::new(config), ..self.clone() }
    }

    /// Each certificate's file, and when the certificate stops being valid (its
    /// `notAfter`), if that reads.
    pub fn not_after(&self) -> impl Iterator<Item = (&Path, Option<SystemTime>)> {
        let not_after =
            |c: &Arc<CertifiedKey>| c.end_entity_cert().ok().and_then(|der| validity::not_after(der));
        self.files.iter().map(|files| files.cert.as_path()).zip(self.certified.0.iter().map(not_after))
    }

    /// A new connection's TLS, its handshake to come.
    pub(crate) fn session(&self) -> Session {
        let conn =
            UnbufferedServerConnection::new(Arc::clone(&self.config)).expect("a server config rustls built");
        Session::server(conn)
    }
}

/// Whom a client trusts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trust {
    /// The certificate authorities in this PEM file.
    CaFile(PathBuf),
    /// Any certificate at all, unverified (as `curl --insecure`): for a benchmark
    /// against a server with a self-signed certificate, never for data that matters.
    InsecureAnyCertificate,
}

/// How a client speaks TLS, besides whom it trusts. The default offers no ALPN
/// protocol and resumes nothing (`resume: 0`: a full handshake every time).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientTlsOptions {
    /// The protocols it offers by ALPN.
    pub alpn: Vec<Vec<u8>>,
    /// Tickets kept to resume with, per server name: each the server sent resumes
    /// one later connection, the newest first, so a client that opens N
    /// connections at once resumes them all with N kept; 0 for a full handshake on
    /// every connection. (With it, one TLS 1.2 session is kept too.)
    pub resume: usize,
}

/// A client's TLS: whom it trusts, TLS 1.3 and 1.2, the same cipher suites as a
/// server's. Cheap to clone; clones share the sessions kept to resume with.
#[derive(Clone)]
pub struct ClientTls {
    config: Arc<rustls::ClientConfig>,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls").field("alpn", &self.config.alpn_protocols).finish_non_exhaustive()
    }
}

impl ClientTls {
    /// A client that trusts as `trust` says, with `options`; a CA file that cannot
    /// be read, or holds no usable certificate, is an error naming it.
    pub fn new(trust: &Trust, options: &ClientTlsOptions) -> Result<ClientTls, TlsError> {
        let provider = Arc::new(provider::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(rustls::ALL_VERSIONS)
            .expect("the provider speaks both versions");
        let mut config = match trust {
            Trust::CaFile(path) => {
                let mut roots = rustls::RootCertStore::empty();
                let (_, refused) = roots.add_parsable_certificates(certificates(path)?);
                if roots.is_empty() {
                    let error = format!("{refused} certificates, none a usable CA");
                    return Err(TlsError::Pem { path: path.clone(), error });
                }
                builder.with_root_certificates(roots).with_no_client_auth()
            }
            Trust::InsecureAnyCertificate => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth(),
        };
        config.alpn_protocols = options.alpn.clone();
        config.enable_secret_extraction = true;
        config.resumption = if options.resume == 0 {
            rustls::client::Resumption::disabled()
        } else {
            rustls::client::Resumption::store(Arc::new(Tickets::new(options.resume)))
        };
        Ok(ClientTls { config: Arc::new(config) })
    }

    /// A new connection's TLS to `server` (the name its certificate must have, sent
    /// by SNI; an IP address is checked, not sent). A name that is neither is
    /// `InvalidInput`.
    pub(crate) fn session(&self, server: &str) -> io::Result<Session> {
        let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidInput, e);
        let name = ServerName::try_from(server.to_owned()).map_err(|e| invalid(format!("{server}: {e}")))?;
        let conn = UnbufferedClientConnection::new(Arc::clone(&self.config), name)
            .map_err(|e| invalid(e.to_string()))?;
        Ok(Session::client(conn))
    }
}

/// `--insecure`: every certificate is taken; handshake signatures are still
/// checked, so the peer holds the key of the certificate it sent.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The certificates of the PEM file `path`, at least one.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    read_pem(
        path,
        |bytes| CertificateDer::pem_slice_iter(bytes).collect::<Result<Vec<_>, _>>(),
        "certificate",
    )
    .and_then(|chain| {
        if chain.is_empty() {
            Err(TlsError::Missing { path: path.to_owned(), what: "certificate" })
        } else {
            Ok(chain)
        }
    })
}

/// Reads `path` and parses it with `parse`; a file without the item is `what`
/// missing.
fn read_pem<T>(
    path: &Path,
    parse: impl FnOnce(&[u8]) -> Result<T, pem::Error>,
    what: &'static str,
) -> Result<T, TlsError> {
    let bytes = std::fs::read(path).map_err(|error| TlsError::Read { path: path.to_owned(), error })?;
    parse(&bytes).map_err(|error| match error {
        pem::Error::NoItemsFound => TlsError::Missing { path: path.to_owned(), what },
        error => TlsError::Pem { path: path.to_owned(), error: error.to_string() },
    })
}
