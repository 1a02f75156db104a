//! HTTP/1.1, without I/O: the request parse, the `Date` value, [`Hello`], the
//! protocol that answers every request with one prebuilt response (its [`Body`] in
//! memory or sealed in a file), and [`ResponseReader`], which frames the responses a
//! load generator receives.

mod chunked;
mod date;
mod hello;
mod memo;
mod parse;
mod prebuilt;
mod response;
mod response_error;
mod syntax;

pub use date::{http_date, DATE_LEN};
pub use hello::{Hello, HelloConfig, HelloConn};
pub use parse::{parse, Error, Limits, Method, Parsed, Progress, Request, Version};
pub use prebuilt::Body;
pub use response::{BodyKind, Framed, ResponseHead, ResponseReader, Stream};
pub use response_error::ResponseError;
pub use syntax::is_token;
