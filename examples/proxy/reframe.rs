//! The framing the proxy gives a body it forwards: its own, whatever the sender's.
//!
//! What a proxy reads leniently it must never pass on verbatim, as the next hop
//! may frame the same bytes otherwise (RFC 9112, 6.3 and 7.1; request smuggling).
//! So each body is read by its sender's framing (by the strict chunk grammar, see
//! `percore::http::ChunkGrammar`), and its content is sent on under framing the
//! proxy writes: a body of known length under that length, as counted; a chunked
//! one in chunks of the proxy's own making (its hex sizes, CRLF everywhere, no
//! extension), each run of content that arrived one chunk, then a last chunk with
//! the trailers it lets through; to an HTTP/1.0 client, which knows no chunks, the
//! content alone until the close. nginx and HAProxy do the same (HAProxy's HTX
//! writes every message again).

use std::io::Write;

use percore::http::Trailers;
use percore::reactor::{ConnId, Io};

use crate::heads::{self, Policy};

/// How a forwarded body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outgoing {
    /// No body follows the head, and no framing field says one would.
    None,
    /// `Content-Length: n`: the content as counted. For a head without a body (a
    /// response to `HEAD`, a 304) the length the body would have.
    Length(u64),
    /// `Transfer-Encoding: chunked`: each run of content a chunk, the end a last
    /// chunk with the trailers that may go on.
    Chunked,
    /// The content alone, until the close: a body delimited by the close, or a
    /// chunked answer to an HTTP/1.0 client.
    UntilClose,
}

/// A piece of a body as its reader found it: a run of content, and, on the piece
/// that ends the body, the trailers.
#[derive(Clone, Copy, Debug)]
pub struct Piece<'a> {
    pub content: &'a [u8],
    pub trailers: Trailers<'a>,
    pub ended: bool,
}

impl Outgoing {
    /// Writes the field that frames the body to `out`, a head being written.
    pub fn write_field(self, out: &mut Vec<u8>) {
        // Writing to a Vec cannot fail.
        let _ = match self {
            Outgoing::Length(len) => write!(out, "Content-Length: {len}\r\n"),
            Outgoing::Chunked => write!(out, "Transfer-Encoding: chunked\r\n"),
            Outgoing::None | Outgoing::UntilClose => Ok(()),
        };
    }

    /// Sends `piece` on to connection `to` under this framing; `scratch` is
    /// reused for a size line or the end of a chunked body.
    pub fn forward(
        self,
        piece: &Piece<'_>,
        to: ConnId,
        io: &mut Io<'_>,
        scratch: &mut Vec<u8>,
        policy: &Policy,
    ) {
        if self != Outgoing::Chunked {
            io.write_to(to, piece.content);
            return;
        }
        scratch.clear();
        if !piece.content.is_empty() {
            let _ = write!(scratch, "{:x}\r\n", piece.content.len());
            io.write_to(to, scratch);
            io.write_to(to, piece.content);
            io.write_to(to, b"\r\n");
            scratch.clear();
        }
        if piece.ended {
            scratch.extend_from_slice(b"0\r\n");
            heads::forward_trailers(scratch, &piece.trailers, policy);
            scratch.extend_from_slice(b"\r\n");
            io.write_to(to, scratch);
        }
    }
}
