//! HTTP/1.1, without I/O: the request parse, the `Date` value, [`Hello`], the
//! protocol that answers every request with one prebuilt response (its [`Body`] in
//! memory or sealed in a file), [`ResponseReader`], the client side's response
//! parse, which a load generator and a proxy read their responses with, and
//! [`BodyFramer`], which finds where a request's body ends and its content as it
//! arrives (its length, or its chunks), for a proxy that forwards it. Chunked
//! bodies are read by an endpoint's lenient grammar or an intermediary's strict one
//! ([`ChunkGrammar`]).
//!
//! # Reading responses
//!
//! [`ResponseReader::read`] tells one [`ResponseEvent`] per call: a response's head
//! once it is whole ([`ResponseHead`]: its status, its header fields, how its body
//! is delimited), then its body piece by piece, each with its content (a chunked
//! body's without its framing), up to the piece that ends it. A proxy looks at the
//! head, writes its own, then forwards the content as it comes under framing of its
//! own making, holding no more than a head:
//!
//! ```
//! use percore::http::{ChunkGrammar, Method, ResponseEvent, ResponseReader, Stream};
//! // A server's answer as it arrives, cut anywhere: the head over two reads.
//! let arrivals: [&[u8]; 3] = [
//!     b"HTTP/1.1 200 OK\r\nContent-Type: text/pl",
//!     b"ain\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhel",
//!     b"lo\r\n0\r\n\r\n",
//! ];
//! // The strict grammar: what a proxy forwards cannot be framed otherwise downstream.
//! let mut reader = ResponseReader::new(Method::Get).with_grammar(ChunkGrammar::Strict);
//! let (mut pending, mut forwarded, mut ended) = (Vec::new(), Vec::new(), false);
//! for arrival in arrivals {
//!     pending.extend_from_slice(arrival);
//!     loop {
//!         let framed = reader.read(&pending, Stream::Open)?;
//!         match framed.event {
//!             ResponseEvent::Partial => break,
//!             ResponseEvent::Head { head, .. } => {
//!                 let mut fields = head.headers();
//!                 let content_type = fields.find(|(name, _)| name.eq_ignore_ascii_case(b"content-type"));
//!                 assert_eq!(head.status(), 200);
//!                 assert_eq!(content_type.map(|(_, value)| value), Some(&b"text/plain"[..]));
//!                 forwarded.extend_from_slice(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
//!             }
//!             // Content, "hel" and then "lo": each run a chunk of the proxy's own.
//!             ResponseEvent::Body { content, ended: last, .. } => {
//!                 if !content.is_empty() {
//!                     forwarded.extend_from_slice(format!("{:x}\r\n", content.len()).as_bytes());
//!                     forwarded.extend_from_slice(content);
//!                     forwarded.extend_from_slice(b"\r\n");
//!                 }
//!                 if last {
//!                     forwarded.extend_from_slice(b"0\r\n\r\n");
//!                 }
//!                 ended = last;
//!             }
//!         }
//!         pending.drain(..framed.consumed);
//!     }
//! }
//! assert!(ended && pending.is_empty());
//! let body = "3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n";
//! assert_eq!(forwarded, format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{body}").as_bytes());
//! # Ok::<(), percore::http::ResponseError>(())
//! ```

mod body;
mod body_error;
mod chunked;
mod date;
mod hello;
mod memo;
mod parse;
mod prebuilt;
mod response;
mod response_error;
mod response_head;
mod syntax;

pub use body::{BodyFramer, BodyPiece, Trailers};
pub use body_error::BodyError;
pub use chunked::ChunkGrammar;
pub use date::{http_date, DATE_LEN};
pub use hello::{Hello, HelloConfig, HelloConn};
pub use parse::{parse, Error, Limits, Method, Parsed, Progress, Request, Version};
pub use prebuilt::Body;
pub use response::{Framed, ResponseEvent, ResponseReader, Stream};
pub use response_error::ResponseError;
pub use response_head::{BodyKind, ResponseHead};
pub use syntax::is_token;
