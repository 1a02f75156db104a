//! HTTP/1.1, without I/O: the request parse, prebuilt responses, and [`Hello`], the
//! protocol that answers every request with one prebuilt response.

mod client;
mod hello;
mod memo;
mod parse;
mod prebuilt;
mod syntax;

pub use client::{parse_response, BodyKind, ResponseError, ResponseHead, ResponseParser};
pub use hello::{Counts, Hello, HelloConfig, HelloConn};
pub use parse::{parse, Error, Limits, Method, Progress, Request, Status, Version};
pub use prebuilt::{http_date, Persist, Response, Variants, DATE_LEN};
