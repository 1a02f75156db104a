//! HTTP/1.1, without I/O: the request parse, the `Date` value, [`Hello`], the
//! protocol that answers every request with one prebuilt response (its [`Body`] in
//! memory or sealed in a file), [`ResponseReader`], the client side's response
//! parse, which a load generator and a proxy read their responses with, and
//! [`BodyFramer`], which finds where a request's body ends as it arrives (its
//! length, or its chunks), for a proxy that forwards it.
//!
//! # Reading responses
//!
//! [`ResponseReader::read`] tells one [`ResponseEvent`] per call: a response's head
//! once it is whole ([`ResponseHead`]: its status, its header fields, how its body
//! is delimited), then its body piece by piece, up to the piece that ends it. A proxy
//! looks at the head, then forwards the bytes as they come, chunk framing and all,
//! holding no more than a head:
//!
//! ```
//! use percore::http::{Method, ResponseEvent, ResponseReader, Stream};
//! // A server's answer as it arrives, cut anywhere: the head over two reads.
//! let arrivals: [&[u8]; 3] = [
//!     b"HTTP/1.1 200 OK\r\nContent-Type: text/pl",
//!     b"ain\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
//!     b"lo\r\n0\r\n\r\n",
//! ];
//! let mut reader = ResponseReader::new(Method::Get);
//! let (mut pending, mut forwarded, mut ended) = (Vec::new(), Vec::new(), false);
//! for arrival in arrivals {
//!     pending.extend_from_slice(arrival);
//!     loop {
//!         let framed = reader.read(&pending, Stream::Open)?;
//!         match framed.event {
//!             ResponseEvent::Partial => break,
//!             ResponseEvent::Head { head, ended: whole } => {
//!                 let mut fields = head.headers();
//!                 let content_type = fields.find(|(name, _)| name.eq_ignore_ascii_case(b"content-type"));
//!                 assert_eq!(head.status(), 200);
//!                 assert_eq!(content_type.map(|(_, value)| value), Some(&b"text/plain"[..]));
//!                 ended = whole;
//!             }
//!             // Body bytes, "5\r\nhel" and then the rest: the chunks as they came.
//!             ResponseEvent::Body { ended: last } => ended = last,
//!         }
//!         // The head, then each piece of the body, go on as they came.
//!         let consumed = framed.consumed;
//!         forwarded.extend_from_slice(&pending[..consumed]);
//!         pending.drain(..consumed);
//!     }
//! }
//! assert!(ended && pending.is_empty());
//! assert_eq!(forwarded, arrivals.concat());
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

pub use body::{BodyFramer, BodyPiece};
pub use body_error::BodyError;
pub use date::{http_date, DATE_LEN};
pub use hello::{Hello, HelloConfig, HelloConn};
pub use parse::{parse, Error, Limits, Method, Parsed, Progress, Request, Version};
pub use prebuilt::Body;
pub use response::{Framed, ResponseEvent, ResponseReader, Stream};
pub use response_error::ResponseError;
pub use response_head::{BodyKind, ResponseHead};
pub use syntax::is_token;
