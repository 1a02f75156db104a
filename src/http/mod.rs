//! HTTP/1.1, without I/O: the request parse, prebuilt responses, [`Hello`], the
//! protocol that answers every request with one prebuilt response, and
//! [`ResponseReader`], which frames the responses a load generator receives.

mod chunked;
mod date;
mod hello;
mod memo;
mod parse;
mod prebuilt;
mod response;
mod syntax;

pub use hello::{Hello, HelloConfig, HelloConn};
pub use parse::{parse, Error, Limits, Method, Progress, Request, Status, Version};
pub use prebuilt::{http_date, Body, Persist, Response, Variants, DATE_LEN};
pub use response::{BodyKind, Framed, ResponseError, ResponseHead, ResponseReader, Stream};
