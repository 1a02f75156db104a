//! One connection's TLS, sans-IO: bytes from the peer in, plaintext and bytes for
//! the peer out. The handshake is rustls's (its unbuffered API: the caller owns
//! every buffer); once it is done, rustls hands over the traffic secrets and keeps
//! the duties that follow (`rustls::kernel`: key updates, a client's tickets), and
//! the record layer is percore's ([`Records`]).

use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::kernel::KernelConnection;
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{ConnectionState, EncodeError, UnbufferedConnectionCommon, UnbufferedStatus};
use rustls::{ExtractedSecrets, HandshakeKind, ProtocolVersion};

use super::record::{ContentType, RecordError, Records, Version, HEADER_LEN};

/// rustls's two sides of an unbuffered connection, as the handshake drives them.
trait Unbuffered: Sized + std::ops::Deref<Target = UnbufferedConnectionCommon<Self::Data>> {
    type Data;
    fn process<'c, 'i>(&'c mut self, incoming: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data>;
    fn into_kernel(self) -> Result<(ExtractedSecrets, KernelConnection<Self::Data>), rustls::Error>;
}

impl Unbuffered for UnbufferedServerConnection {
    type Data = ServerConnectionData;
    fn process<'c, 'i>(&'c mut self, incoming: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(incoming)
    }
    fn into_kernel(self) -> Result<(ExtractedSecrets, KernelConnection<Self::Data>), rustls::Error> {
        self.dangerous_into_kernel_connection()
    }
}

impl Unbuffered for UnbufferedClientConnection {
    type Data = ClientConnectionData;
    fn process<'c, 'i>(&'c mut self, incoming: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(incoming)
    }
    fn into_kernel(self) -> Result<(ExtractedSecrets, KernelConnection<Self::Data>), rustls::Error> {
        self.dangerous_into_kernel_connection()
    }
}

/// Why a connection's TLS failed: it closes.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The handshake failed (rustls says why; the alert it sent, if any, went out).
    Handshake(rustls::Error),
    /// A record that does not open, or breaks the rules: the alert was sent.
    Record(RecordError),
    /// The peer sent a fatal alert, with this description.
    Alert(u8),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Handshake(error) => write!(f, "TLS handshake: {error}"),
            Failure::Record(error) => write!(f, "TLS record refused: {error:?}"),
            Failure::Alert(description) => write!(f, "TLS alert from the peer: {description}"),
        }
    }
}

/// Why a connection's TLS handshake failed, as rustls said it: a certificate not
/// trusted or not for the name asked, an alert from the peer, no version or cipher
/// suite in common. `Display` says it in a line, e.g. `TLS handshake: invalid peer
/// certificate: certificate not valid for name "localhost"; ...`;
/// [`Io::tls_failure`](crate::reactor::Io::tls_failure) gives it in `on_close`.
#[derive(Debug)]
pub struct TlsFailure(pub(crate) Failure);

impl std::fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for TlsFailure {}

/// What a step of the handshake came to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Handshaking {
    /// It needs more of the peer's bytes.
    Reading,
    /// Done: the connection is established.
    Done,
}

/// A connection's TLS: its handshake, or its record layer.
pub(crate) struct Session(Peer);

/// Which end of the connection this is.
enum Peer {
    Server(Side<UnbufferedServerConnection>),
    Client(Side<UnbufferedClientConnection>),
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let side = if matches!(self.0, Peer::Server(_)) { "server" } else { "client" };
        f.debug_struct("Session").field("side", &side).field("established", &self.is_established()).finish()
    }
}

/// One end's TLS.
enum Side<U: Unbuffered> {
    Handshake(Box<Handshake<U>>),
    Established(Box<Established<U::Data>>),
    /// Failed or closed: nothing more goes in or out.
    Over,
}

/// A handshake under way: rustls's connection and what arrived of the peer's
/// flight that rustls has not taken yet.
struct Handshake<U> {
    conn: U,
    incoming: Vec<u8>,
    /// Application data that arrived with the handshake's last flight (a request
    /// right after the client's Finished), decrypted by rustls.
    early: Vec<u8>,
}

/// What a connection's TLS handshake agreed on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// The protocol version.
    pub version: ProtocolVersion,
    /// The cipher suite (its name: `suite.as_str()`, `TLS13_AES_128_GCM_SHA256`).
    pub suite: rustls::CipherSuite,
    /// The protocol ALPN chose, if any.
    pub alpn: Option<Vec<u8>>,
    /// A session was resumed (a ticket taken), not set up by a full handshake.
    pub resumed: bool,
}

/// Past the handshake: rustls's remaining duties, the record layer, and the part
/// of a record that arrived without the rest.
struct Established<Data> {
    negotiated: Negotiated,
    kernel: KernelConnection<Data>,
    records: Records,
    /// A record begun and not yet whole (the next read starts after it).
    partial: Vec<u8>,
    /// Application data decrypted before the record layer took over.
    early: Vec<u8>,
    /// A handshake message spread over records (TLS 1.3 allows it), so far.
    message: Vec<u8>,
    /// Key updates the peer sent since its last application data: each costs a
    /// key derivation, so a peer that sends nothing else is cut off.
    key_updates: u8,
    /// The peer's close_notify came: nothing more will.
    peer_closed: bool,
}

/// What opening the records of an input came to.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Opened {
    /// Plaintext bytes, now at the start of the input.
    pub(crate) plaintext: usize,
    /// The peer's close_notify came: the end of its stream.
    pub(crate) peer_closed: bool,
}

/// What a client does with a TLS 1.3 NewSessionTicket (rustls keeps it for the next
/// connection to the same server); a server refuses one.
type Ticket<Data> = fn(&mut KernelConnection<Data>, &[u8]) -> Result<(), rustls::Error>;

impl Session {
    pub(crate) fn server(conn: UnbufferedServerConnection) -> Session {
        Session(Peer::Server(Side::new(conn)))
    }

    pub(crate) fn client(conn: UnbufferedClientConnection) -> Session {
        Session(Peer::Client(Side::new(conn)))
    }

    pub(crate) fn is_established(&self) -> bool {
        match &self.0 {
            Peer::Server(side) => side.is_established(),
            Peer::Client(side) => side.is_established(),
        }
    }

    /// Takes `received` (bytes of the peer's; none to start a client's handshake)
    /// into the handshake, and appends to `out` what must go to the peer.
    pub(crate) fn handshake(&mut self, received: &[u8], out: &mut Vec<u8>) -> Result<Handshaking, Failure> {
        match &mut self.0 {
            Peer::Server(side) => side.handshake(received, out),
            Peer::Client(side) => side.handshake(received, out),
        }
    }

    /// What the handshake agreed on, once it is done.
    pub(crate) fn negotiated(&self) -> Option<&Negotiated> {
        match &self.0 {
            Peer::Server(Side::Established(established)) => Some(&established.negotiated),
            Peer::Client(Side::Established(established)) => Some(&established.negotiated),
            _ => None,
        }
    }

    /// The record layer, to seal output with: `None` unless established.
    pub(crate) fn records(&mut self) -> Option<&mut Records> {
        match &mut self.0 {
            Peer::Server(Side::Established(established)) => Some(&mut established.records),
            Peer::Client(Side::Established(established)) => Some(&mut established.records),
            _ => None,
        }
    }

    /// Copies to the start of `input` the application data that came with the
    /// handshake (decrypted by rustls), once; returns how many bytes.
    pub(crate) fn take_early(&mut self, input: &mut [u8]) -> usize {
        let early = match &mut self.0 {
            Peer::Server(Side::Established(established)) => &mut established.early,
            Peer::Client(Side::Established(established)) => &mut established.early,
            _ => return 0,
        };
        let len = early.len().min(input.len());
        input[..len].copy_from_slice(&early[..len]);
        early.drain(..len);
        free_if_empty(early);
        len
    }

    /// How many bytes [`take_partial`](Session::take_partial) would copy: the next
    /// input goes after them.
    pub(crate) fn partial_len(&self) -> usize {
        match &self.0 {
            Peer::Server(Side::Established(established)) => established.partial.len(),
            Peer::Client(Side::Established(established)) => established.partial.len(),
            _ => 0,
        }
    }

    /// Copies to the start of `input` the part of a record the last input ended
    /// in; returns how many bytes. The next [`open`](Session::open) starts there.
    pub(crate) fn take_partial(&mut self, input: &mut [u8]) -> usize {
        let partial = match &mut self.0 {
            Peer::Server(Side::Established(established)) => &mut established.partial,
            Peer::Client(Side::Established(established)) => &mut established.partial,
            _ => return 0,
        };
        let len = partial.len();
        input[..len].copy_from_slice(partial);
        *partial = Vec::new();
        len
    }

    /// Opens the records in `input[..len]` (a record begun last time first, put there
    /// by [`take_partial`](Session::take_partial)) in place: their plaintext moves to
    /// the start of `input`, a record begun and not whole is kept for the next
    /// input, and what the records ask of us (a key update's answer, an alert) is
    /// appended to `out`, sealed.
    pub(crate) fn open(
        &mut self,
        input: &mut [u8],
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<Opened, Failure> {
        match &mut self.0 {
            Peer::Server(side) => side.open(input, len, out, refuse_ticket),
            Peer::Client(side) => side.open(input, len, out, KernelConnection::handle_new_session_ticket),
        }
    }

    /// Before sealing more: a key that came to its limit is updated (a KeyUpdate,
    /// appended to `out`, sealed under the old key); in TLS 1.2, which cannot update
    /// it, the connection must end. Returns whether sealing may go on.
    pub(crate) fn refresh_if_exhausted(&mut self, out: &mut Vec<u8>) -> bool {
        let exhausted = self.records().is_some_and(|records| records.tx_exhausted());
        if !exhausted {
            return true;
        }
        match &mut self.0 {
            Peer::Server(Side::Established(established)) => established.refresh(out),
            Peer::Client(Side::Established(established)) => established.refresh(out),
            _ => false,
        }
    }

    /// Appends a close_notify alert to `out`, sealed: our end of the stream.
    pub(crate) fn close_notify(&mut self, out: &mut Vec<u8>) {
        if let Some(records) = self.records() {
            alert(records, out, CLOSE_NOTIFY, AlertLevel::Warning);
        }
    }
}

/// A server is sent no tickets.
fn refuse_ticket(_: &mut KernelConnection<ServerConnectionData>, _: &[u8]) -> Result<(), rustls::Error> {
    Err(rustls::Error::General("a NewSessionTicket sent to a server".into()))
}

impl<U: Unbuffered> Side<U> {
    fn new(conn: U) -> Side<U> {
        Side::Handshake(Box::new(Handshake { conn, incoming: Vec::new(), early: Vec::new() }))
    }

    fn is_established(&self) -> bool {
        matches!(self, Side::Established(_))
    }

    fn handshake(&mut self, received: &[u8], out: &mut Vec<u8>) -> Result<Handshaking, Failure> {
        let Side::Handshake(handshake) = self else { return Ok(Handshaking::Done) };
        handshake.incoming.extend_from_slice(received);
        let step = handshake.step(out);
        match step {
            Ok(Handshaking::Reading) => Ok(Handshaking::Reading),
            Ok(Handshaking::Done) => {
                let Side::Handshake(handshake) = std::mem::replace(self, Side::Over) else { unreachable!() };
                let established = handshake.into_established().map_err(Failure::Handshake)?;
                *self = Side::Established(Box::new(established));
                Ok(Handshaking::Done)
            }
            Err(e) => {
                *self = Side::Over;
                Err(Failure::Handshake(e))
            }
        }
    }

    fn open(
        &mut self,
        input: &mut [u8],
        len: usize,
        out: &mut Vec<u8>,
        ticket: Ticket<U::Data>,
    ) -> Result<Opened, Failure> {
        let Side::Established(established) = self else { return Ok(Opened::default()) };
        let opened = established.open(input, len, out, ticket);
        if opened.is_err() {
            *self = Side::Over;
        }
        opened
    }
}

impl<U: Unbuffered> Handshake<U> {
    /// Runs the handshake on what arrived: what rustls has to send is appended to
    /// `out`, until it needs more input or is done. A handshake that fails appends
    /// the alert that tells the peer why.
    fn step(&mut self, out: &mut Vec<u8>) -> Result<Handshaking, rustls::Error> {
        let stepped = self.steps(out);
        if stepped.is_err() {
            self.alert(out);
        }
        stepped
    }

    /// [`step`](Handshake::step) up to an error.
    fn steps(&mut self, out: &mut Vec<u8>) -> Result<Handshaking, rustls::Error> {
        loop {
            let UnbufferedStatus { discard, state } = self.conn.process(&mut self.incoming);
            let done = match state? {
                ConnectionState::EncodeTlsData(mut encode) => {
                    encode_into(out, |room| encode.encode(room));
                    None
                }
                // What was encoded goes out with `out`, which the caller sends whole.
                ConnectionState::TransmitTlsData(transmit) => {
                    transmit.done();
                    None
                }
                ConnectionState::ReadTraffic(mut read) => {
                    while let Some(record) = read.next_record() {
                        self.early.extend_from_slice(record?.payload);
                    }
                    None
                }
                ConnectionState::BlockedHandshake => Some(Handshaking::Reading),
                // Every complete record it was given is taken: the rest is ours.
                ConnectionState::WriteTraffic(_) => Some(Handshaking::Done),
                ConnectionState::PeerClosed | ConnectionState::Closed => {
                    return Err(rustls::Error::General("closed during the handshake".into()))
                }
                // 0-RTT is off (`max_early_data_size` 0), and no other state is known.
                _ => return Err(rustls::Error::General("an unexpected handshake state".into())),
            };
            self.incoming.drain(..discard);
            if let Some(done) = done {
                return Ok(done);
            }
        }
    }

    /// Appends to `out` the alert rustls queued with the error it returned, and what
    /// it queued before it while taking the same message (a ServerHello, when the
    /// error came later in the ClientHello's processing). A call hands over what is
    /// queued before it reads any input, and is made only while something is: the
    /// input that failed is never read again.
    fn alert(&mut self, out: &mut Vec<u8>) {
        while self.conn.wants_write() {
            let Ok(ConnectionState::EncodeTlsData(mut encode)) = self.conn.process(&mut self.incoming).state
            else {
                return;
            };
            encode_into(out, |room| encode.encode(room));
        }
    }

    /// The record layer, once rustls is done: the secrets and its remaining duties.
    fn into_established(self) -> Result<Established<U::Data>, rustls::Error> {
        let negotiated = Negotiated {
            version: self.conn.protocol_version().unwrap_or(ProtocolVersion::TLSv1_3),
            suite: self.conn.negotiated_cipher_suite().map_or(rustls::CipherSuite::Unknown(0), |s| s.suite()),
            alpn: self.conn.alpn_protocol().map(<[u8]>::to_vec),
            resumed: self.conn.handshake_kind() == Some(HandshakeKind::Resumed),
        };
        let (secrets, kernel) = self.conn.into_kernel()?;
        // What arrived after the last handshake record, still sealed.
        let (mut partial, mut early) = (self.incoming, self.early);
        free_if_empty(&mut partial);
        free_if_empty(&mut early);
        let version = match kernel.protocol_version() {
            ProtocolVersion::TLSv1_3 => Version::Tls13,
            _ => Version::Tls12,
        };
        Ok(Established {
            negotiated,
            kernel,
            records: Records::new(version, secrets.tx, secrets.rx),
            partial,
            early,
            message: Vec::new(),
            key_updates: 0,
            peer_closed: false,
        })
    }
}

/// A buffer emptied gives its memory back: an idle connection holds none.
fn free_if_empty(buffer: &mut Vec<u8>) {
    if buffer.is_empty() {
        *buffer = Vec::new();
    }
}

/// Lets `encode` write into room at the end of `out`, grown to what it needs.
fn encode_into(out: &mut Vec<u8>, mut encode: impl FnMut(&mut [u8]) -> Result<usize, EncodeError>) {
    let start = out.len();
    let mut room = 4096;
    loop {
        out.resize(start + room, 0);
        match encode(&mut out[start..]) {
            Ok(written) => return out.truncate(start + written),
            Err(EncodeError::InsufficientSize(needed)) => room = needed.required_size,
            Err(EncodeError::AlreadyEncoded) => return out.truncate(start),
        }
    }
}

/// An alert's level (RFC 5246, 7.2).
#[derive(Clone, Copy, PartialEq, Eq)]
enum AlertLevel {
    Warning = 1,
    Fatal = 2,
}

const CLOSE_NOTIFY: u8 = 0;
const USER_CANCELED: u8 = 90;
const NO_RENEGOTIATION: u8 = 100;
const UNEXPECTED_MESSAGE: u8 = 10;
const DECODE_ERROR: u8 = 50;

/// Handshake message types past the handshake (RFC 8446, 4; RFC 5246, 7.4).
const HELLO_REQUEST: u8 = 0;
const CLIENT_HELLO: u8 = 1;
const NEW_SESSION_TICKET: u8 = 4;
const KEY_UPDATE: u8 = 24;

/// Key updates a peer may send in a row with no application data between: rustls
/// and OpenSSL refuse a flood of them too (each costs a key derivation).
const KEY_UPDATES_IN_A_ROW: u8 = 16;

/// Appends the alert `description` to `out`, sealed.
fn alert(records: &mut Records, out: &mut Vec<u8>, description: u8, level: AlertLevel) {
    let start = records.begin(out);
    out.extend_from_slice(&[level as u8, description]);
    records.seal(out, start, ContentType::Alert);
}

impl<Data> Established<Data> {
    fn open(
        &mut self,
        input: &mut [u8],
        len: usize,
        out: &mut Vec<u8>,
        ticket: Ticket<Data>,
    ) -> Result<Opened, Failure> {
        let (mut at, mut plaintext) = (0, 0);
        loop {
            let rest = &input[at..len];
            let record_len = match self.records.next_len(rest) {
                Ok(Some(record_len)) if record_len <= rest.len() => record_len,
                Ok(_) => break,
                Err(e) => return Err(self.fatal(out, Failure::Record(e), e.alert())),
            };
            let record = &mut input[at..at + record_len];
            let (content_type, content) = match self.records.open(record) {
                Ok(opened) => opened,
                Err(e) => return Err(self.fatal(out, Failure::Record(e), e.alert())),
            };
            let content = at + content.start..at + content.end;
            at += record_len;
            match content_type {
                // After close_notify nothing the peer sends counts.
                ContentType::ApplicationData if self.peer_closed => {}
                ContentType::ApplicationData => {
                    self.key_updates = 0;
                    let content_len = content.len();
                    input.copy_within(content, plaintext);
                    plaintext += content_len;
                }
                ContentType::Alert => self.alert_received(&input[content], out)?,
                ContentType::Handshake => {
                    self.message.extend_from_slice(&input[content]);
                    self.handshake_messages(out, ticket)?;
                }
            }
        }
        self.partial.extend_from_slice(&input[at..len]);
        Ok(Opened { plaintext, peer_closed: self.peer_closed })
    }

    /// An alert from the peer: close_notify ends its stream; a fatal one (in TLS 1.3
    /// any but close_notify and user_canceled) fails the connection.
    fn alert_received(&mut self, alert: &[u8], out: &mut Vec<u8>) -> Result<(), Failure> {
        let &[level, description] = alert else {
            return Err(self.fatal(out, Failure::Record(RecordError::Unexpected), DECODE_ERROR));
        };
        match description {
            CLOSE_NOTIFY => self.peer_closed = true,
            USER_CANCELED => {}
            _ if level == AlertLevel::Warning as u8 && self.records.version() == Version::Tls12 => {}
            _ => return Err(Failure::Alert(description)),
        }
        Ok(())
    }

    /// The handshake messages whole in `message`: a client's ticket, a key update
    /// (answered with ours if asked), a request to renegotiate (refused).
    fn handshake_messages(&mut self, out: &mut Vec<u8>, ticket: Ticket<Data>) -> Result<(), Failure> {
        let mut taken = 0;
        while let [kind, a, b, c, ..] = self.message[taken..] {
            let body_len = u32::from_be_bytes([0, a, b, c]) as usize;
            let body_at = taken + 4;
            let Some(body) = self.message.get(body_at..body_at + body_len) else { break };
            let version = self.records.version();
            let result = match (kind, version) {
                (NEW_SESSION_TICKET, Version::Tls13) => {
                    ticket(&mut self.kernel, body).map_err(|_| UNEXPECTED_MESSAGE)
                }
                (KEY_UPDATE, Version::Tls13) => match body {
                    &[asked] if asked <= 1 => self.key_update(out, asked == 1),
                    _ => Err(DECODE_ERROR),
                },
                // A server asking a TLS 1.2 client to renegotiate: ignored.
                (HELLO_REQUEST, Version::Tls12) => Ok(()),
                // A TLS 1.2 client asking to renegotiate: refused, the connection goes on
                // (RFC 5746, 4.4: what OpenSSL and rustls answer).
                (CLIENT_HELLO, Version::Tls12) => {
                    alert(&mut self.records, out, NO_RENEGOTIATION, AlertLevel::Warning);
                    Ok(())
                }
                _ => Err(UNEXPECTED_MESSAGE),
            };
            if let Err(description) = result {
                return Err(self.fatal(out, Failure::Record(RecordError::Unexpected), description));
            }
            taken = body_at + body_len;
        }
        self.message.drain(..taken);
        free_if_empty(&mut self.message);
        // A message longer than any a peer sends past the handshake is no message.
        if self.message.len() > HEADER_LEN + super::record::MAX_PLAINTEXT {
            return Err(self.fatal(out, Failure::Record(RecordError::Overflow), DECODE_ERROR));
        }
        Ok(())
    }

    /// The peer's keys changed (a TLS 1.3 KeyUpdate): ours too, if it asked. More
    /// than [`KEY_UPDATES_IN_A_ROW`] with no data between is a flood, refused.
    fn key_update(&mut self, out: &mut Vec<u8>, asked: bool) -> Result<(), u8> {
        self.key_updates += 1;
        if self.key_updates > KEY_UPDATES_IN_A_ROW {
            return Err(UNEXPECTED_MESSAGE);
        }
        let rx = self.kernel.update_rx_secret().map_err(|_| UNEXPECTED_MESSAGE)?;
        self.records.rekey_rx(rx);
        if asked {
            self.update_tx(out).map_err(|_| UNEXPECTED_MESSAGE)?;
        }
        Ok(())
    }

    /// Our key came to its limit: in TLS 1.3 a KeyUpdate, and a new key; TLS 1.2
    /// has no way (false).
    fn refresh(&mut self, out: &mut Vec<u8>) -> bool {
        self.records.version() == Version::Tls13 && self.update_tx(out).is_ok()
    }

    /// Sends a KeyUpdate under the old key, and seals under the new one from then on.
    fn update_tx(&mut self, out: &mut Vec<u8>) -> Result<(), rustls::Error> {
        let start = self.records.begin(out);
        // update_not_requested: the peer need not answer.
        out.extend_from_slice(&[KEY_UPDATE, 0, 0, 1, 0]);
        self.records.seal(out, start, ContentType::Handshake);
        let tx = self.kernel.update_tx_secret()?;
        self.records.rekey_tx(tx);
        Ok(())
    }

    /// Appends the fatal alert `description` to `out`: the connection ends with
    /// `failure`.
    fn fatal(&mut self, out: &mut Vec<u8>, failure: Failure, description: u8) -> Failure {
        alert(&mut self.records, out, description, AlertLevel::Fatal);
        failure
    }
}

#[cfg(test)]
mod tests;
