//! HTTP/1.1, without I/O: the request parse, the `Date` value, [`Hello`], the
//! protocol that answers every request with one prebuilt response (its [`Body`] in
//! memory or sealed in a file), and [`ResponseReader`], the client side's response
//! parse, which a load generator and a proxy read their responses with.

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

pub use date::{http_date, DATE_LEN};
pub use hello::{Hello, HelloConfig, HelloConn};
pub use parse::{parse, Error, Limits, Method, Progress, Request, Status, Version};
pub use prebuilt::Body;
pub use response::{Framed, ResponseEvent, ResponseReader, Stream};
pub use response_error::ResponseError;
pub use response_head::{BodyKind, ResponseHead};
pub use syntax::is_token;
