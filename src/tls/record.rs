//! The record layer once the handshake is done: records sealed from plaintext the
//! caller writes into the output, and opened in place in the input, with the
//! traffic secrets rustls derived (it hands them over with the connection's other
//! post-handshake duties, `rustls::kernel`). The same secrets are what kTLS would
//! take: this is that layer in user space.
//!
//! RFC 8446, 5.2 (TLS 1.3):
//! ```text
//! TLSCiphertext = opaque_type(23) legacy_version(0x0303) length(2)
//!                 AEAD(TLSInnerPlaintext = content || type(1) || zeros*)
//! nonce = iv XOR sequence number (left-padded), additional data = the header
//! ```
//! RFC 5246, 6.2.3.3 and RFC 5288, 3 (TLS 1.2 AES-GCM): the payload starts with an
//! 8-byte explicit nonce (the IV's last 8 bytes XOR the sequence number, as rustls
//! and OpenSSL send it), the nonce is the IV's first 4 bytes and that, the
//! additional data `seq(8) || type(1) || version(2) || plaintext length(2)`. RFC 7905
//! (TLS 1.2 ChaCha20-Poly1305): TLS 1.3's nonce, TLS 1.2's additional data.

use std::ops::Range;

use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use rustls::ConnectionTrafficSecrets;

/// A record's header: its content type, the legacy version, its length.
pub(crate) const HEADER_LEN: usize = 5;

/// The most content one record carries (RFC 8446, 5.1).
pub(crate) const MAX_PLAINTEXT: usize = 16 * 1024;

const TAG_LEN: usize = 16;
const EXPLICIT_NONCE_LEN: usize = 8;

/// The largest payload a peer may send: 2^14 + 256 in TLS 1.3 (RFC 8446, 5.2),
/// 2^14 + 2048 in TLS 1.2 (RFC 5246, 6.2.3).
const MAX_PAYLOAD_13: usize = MAX_PLAINTEXT + 256;
const MAX_PAYLOAD_12: usize = MAX_PLAINTEXT + 2048;

/// Records sealed under one key before it must change: AES-GCM's confidentiality
/// limit for full-size records, 2^24.5 (RFC 8446, 5.5), rounded down; ChaCha20-
/// Poly1305 has none that a connection can reach.
const GCM_RECORDS_PER_KEY: u64 = 1 << 24;

/// A record's content type (RFC 8446, 5.1): the ones a connection past its
/// handshake may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ContentType {
    Alert,
    Handshake,
    ApplicationData,
}

impl ContentType {
    fn byte(self) -> u8 {
        match self {
            ContentType::Alert => 21,
            ContentType::Handshake => 22,
            ContentType::ApplicationData => 23,
        }
    }

    fn of(byte: u8) -> Option<ContentType> {
        match byte {
            21 => Some(ContentType::Alert),
            22 => Some(ContentType::Handshake),
            23 => Some(ContentType::ApplicationData),
            _ => None,
        }
    }
}

/// The protocol version the handshake agreed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Version {
    Tls12,
    Tls13,
}

/// Why a record could not be opened: each is a fatal alert (RFC 8446, 6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordError {
    /// Longer than a peer may send: `record_overflow`.
    Overflow,
    /// It does not decrypt (or is too short to): `bad_record_mac`.
    BadMac,
    /// A content type that has no place here: `unexpected_message`.
    Unexpected,
}

impl RecordError {
    /// The alert that tells the peer (its description, RFC 8446, 6).
    pub(crate) fn alert(self) -> u8 {
        match self {
            RecordError::Overflow => 22,
            RecordError::BadMac => 20,
            RecordError::Unexpected => 10,
        }
    }
}

/// One direction's key, the IV its nonces are made from, and the sequence number
/// of its next record.
struct Direction {
    key: LessSafeKey,
    iv: [u8; aead::NONCE_LEN],
    seq: u64,
    records_per_key: u64,
}

impl Direction {
    fn new(secrets: ConnectionTrafficSecrets, seq: u64) -> Direction {
        let (algorithm, key, iv, records_per_key) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => {
                (&aead::AES_128_GCM, key, iv, GCM_RECORDS_PER_KEY)
            }
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => {
                (&aead::AES_256_GCM, key, iv, GCM_RECORDS_PER_KEY)
            }
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (&aead::CHACHA20_POLY1305, key, iv, u64::MAX)
            }
            // The provider offers these three alone (`Tls::config` keeps its suites).
            _ => unreachable!("a cipher the provider does not offer"),
        };
        let key =
            UnboundKey::new(algorithm, key.as_ref()).expect("rustls derives a key of the cipher's length");
        let iv = iv.as_ref().try_into().expect("rustls derives a 12-byte IV");
        Direction { key: LessSafeKey::new(key), iv, seq, records_per_key }
    }

    /// The IV XOR the sequence number, right-aligned (RFC 8446, 5.3).
    fn nonce_bytes(&self) -> [u8; aead::NONCE_LEN] {
        let mut nonce = self.iv;
        for (byte, seq) in nonce[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *byte ^= seq;
        }
        nonce
    }

    /// Whether this is TLS 1.2 with AES-GCM, whose payloads start with an explicit nonce.
    fn explicit_nonce(&self, version: Version) -> bool {
        version == Version::Tls12 && self.key.algorithm() != &aead::CHACHA20_POLY1305
    }
}

/// TLS 1.2's additional data: `seq || type || version || plaintext length`.
fn aad_12(seq: u64, content_type: u8, len: usize) -> [u8; 13] {
    let mut aad = [0; 13];
    aad[..8].copy_from_slice(&seq.to_be_bytes());
    aad[8..11].copy_from_slice(&[content_type, 3, 3]);
    aad[11..].copy_from_slice(&(len as u16).to_be_bytes());
    aad
}

/// The record layer of one connection past its handshake.
pub(crate) struct Records {
    version: Version,
    tx: Direction,
    rx: Direction,
}

impl std::fmt::Debug for Records {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Records").field("version", &self.version).finish_non_exhaustive()
    }
}

impl Records {
    /// The record layer of a connection of `version` whose handshake gave these
    /// secrets, each with its direction's next sequence number.
    pub(crate) fn new(
        version: Version,
        tx: (u64, ConnectionTrafficSecrets),
        rx: (u64, ConnectionTrafficSecrets),
    ) -> Records {
        Records { version, tx: Direction::new(tx.1, tx.0), rx: Direction::new(rx.1, rx.0) }
    }

    /// Sealing goes on under new secrets (a TLS 1.3 key update).
    pub(crate) fn rekey_tx(&mut self, (seq, secrets): (u64, ConnectionTrafficSecrets)) {
        self.tx = Direction::new(secrets, seq);
    }

    /// Opening goes on under new secrets (the peer's key update).
    pub(crate) fn rekey_rx(&mut self, (seq, secrets): (u64, ConnectionTrafficSecrets)) {
        self.rx = Direction::new(secrets, seq);
    }

    /// Whether the sealing key came to its limit: a TLS 1.3 connection updates it,
    /// a TLS 1.2 one closes.
    pub(crate) fn tx_exhausted(&self) -> bool {
        self.tx.seq >= self.tx.records_per_key
    }

    /// Lowers the sealing key's limit, for a test to reach it.
    #[cfg(test)]
    pub(crate) fn limit_tx(&mut self, records: u64) {
        self.tx.records_per_key = records;
    }

    pub(crate) fn version(&self) -> Version {
        self.version
    }

    /// Begins a record at the end of `out`: its header, to be filled in by
    /// [`seal`](Records::seal), and TLS 1.2 AES-GCM's explicit nonce. Its content,
    /// at most [`MAX_PLAINTEXT`] bytes, is what the caller appends next. Returns where
    /// it starts.
    pub(crate) fn begin(&self, out: &mut Vec<u8>) -> usize {
        let start = out.len();
        out.extend_from_slice(&[0; HEADER_LEN]);
        if self.tx.explicit_nonce(self.version) {
            out.extend_from_slice(&self.tx.nonce_bytes()[4..]);
        }
        start
    }

    /// Seals the record begun at `start` in `out`, whose content is all that follows
    /// its beginning, as `content_type`: the content is encrypted in place, and the
    /// header and the tag written.
    pub(crate) fn seal(&mut self, out: &mut Vec<u8>, start: usize, content_type: ContentType) {
        let explicit = if self.tx.explicit_nonce(self.version) { EXPLICIT_NONCE_LEN } else { 0 };
        let content_at = start + HEADER_LEN + explicit;
        let content_len = out.len() - content_at;
        debug_assert!(content_len <= MAX_PLAINTEXT);
        let nonce = self.tx.nonce_bytes();
        let outer_type = match self.version {
            Version::Tls13 => {
                // TLSInnerPlaintext: the real type after the content, no padding.
                out.push(content_type.byte());
                ContentType::ApplicationData.byte()
            }
            Version::Tls12 => content_type.byte(),
        };
        let payload_len = out.len() - start - HEADER_LEN + TAG_LEN;
        let header = [outer_type, 3, 3, (payload_len >> 8) as u8, payload_len as u8];
        out[start..start + HEADER_LEN].copy_from_slice(&header);
        let nonce = match self.version {
            Version::Tls12 if explicit > 0 => {
                let mut gcm = [0; aead::NONCE_LEN];
                gcm[..4].copy_from_slice(&self.tx.iv[..4]);
                gcm[4..].copy_from_slice(&out[start + HEADER_LEN..content_at]);
                gcm
            }
            _ => nonce,
        };
        let tag = match self.version {
            Version::Tls13 => self.tx.key.seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(header),
                &mut out[content_at..],
            ),
            Version::Tls12 => self.tx.key.seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad_12(self.tx.seq, outer_type, content_len)),
                &mut out[content_at..],
            ),
        };
        out.extend_from_slice(tag.expect("sealing fails only for content past the AEAD's limit").as_ref());
        self.tx.seq += 1;
    }

    /// The length of the record at the start of `input`, once its header has come;
    /// `None` before. An error for a header no peer may send: one longer than the
    /// version allows, or of a content type that has no place here.
    pub(crate) fn next_len(&self, input: &[u8]) -> Result<Option<usize>, RecordError> {
        let Some(header) = input.get(..HEADER_LEN) else { return Ok(None) };
        let payload = usize::from(u16::from_be_bytes([header[3], header[4]]));
        let (max, types_ok) = match self.version {
            // Past the handshake every TLS 1.3 record is sealed as application data.
            Version::Tls13 => (MAX_PAYLOAD_13, header[0] == ContentType::ApplicationData.byte()),
            Version::Tls12 => (MAX_PAYLOAD_12, ContentType::of(header[0]).is_some()),
        };
        if !types_ok {
            return Err(RecordError::Unexpected);
        }
        if payload > max {
            return Err(RecordError::Overflow);
        }
        Ok(Some(HEADER_LEN + payload))
    }

    /// Opens `record` (exactly one, as [`next_len`](Records::next_len) framed it) in
    /// place: its content type, and where in `record` its content now is.
    pub(crate) fn open(&mut self, record: &mut [u8]) -> Result<(ContentType, Range<usize>), RecordError> {
        let header: [u8; HEADER_LEN] = record[..HEADER_LEN].try_into().expect("a whole record");
        let explicit = if self.rx.explicit_nonce(self.version) { EXPLICIT_NONCE_LEN } else { 0 };
        let sealed_at = HEADER_LEN + explicit;
        let Some(content_len) = record.len().checked_sub(sealed_at + TAG_LEN) else {
            return Err(RecordError::BadMac);
        };
        let nonce = if explicit > 0 {
            let mut gcm = [0; aead::NONCE_LEN];
            gcm[..4].copy_from_slice(&self.rx.iv[..4]);
            gcm[4..].copy_from_slice(&record[HEADER_LEN..sealed_at]);
            gcm
        } else {
            self.rx.nonce_bytes()
        };
        let nonce = Nonce::assume_unique_for_key(nonce);
        let opened = match self.version {
            Version::Tls13 => self.rx.key.open_in_place(nonce, Aad::from(header), &mut record[sealed_at..]),
            Version::Tls12 => {
                let aad = aad_12(self.rx.seq, header[0], content_len);
                self.rx.key.open_in_place(nonce, Aad::from(aad), &mut record[sealed_at..])
            }
        };
        let content_end = sealed_at + opened.map_err(|_| RecordError::BadMac)?.len();
        self.rx.seq += 1;
        match self.version {
            Version::Tls12 => {
                Ok((ContentType::of(header[0]).ok_or(RecordError::Unexpected)?, sealed_at..content_end))
            }
            Version::Tls13 => {
                // The real type is the last byte that is not padding (RFC 8446, 5.4).
                let inner = &record[sealed_at..content_end];
                let type_at = inner.iter().rposition(|&b| b != 0).ok_or(RecordError::Unexpected)?;
                let content_type = ContentType::of(inner[type_at]).ok_or(RecordError::Unexpected)?;
                Ok((content_type, sealed_at..sealed_at + type_at))
            }
        }
    }
}
