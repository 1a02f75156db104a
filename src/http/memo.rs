//! The last request head parsed, remembered with what it says: a head byte for byte
//! the same parses the same, so it is recognised by one comparison instead of parsed
//! again. A load generator sends one head over and over; pipelined, the parse would
//! otherwise be most of the server's own work per request.

use super::parse::{Method, Request, Version};

/// Heads up to this size are remembered: a benchmark's (40 bytes for wrk, 80 for
/// ab), not a browser's, whose parse dwarfs a copy less.
const MAX_REMEMBERED: usize = 256;

/// What a head says, for the server's answer; borrows nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) method: Method,
    pub(crate) version: Version,
    pub(crate) keep_alive: bool,
    pub(crate) content_length: u64,
    pub(crate) chunked: bool,
    pub(crate) len: usize,
}

impl Head {
    pub(crate) fn of(request: &Request<'_>) -> Head {
        Head {
            method: request.method,
            version: request.version,
            keep_alive: request.keep_alive,
            content_length: request.content_length,
            chunked: request.chunked,
            len: request.head_len,
        }
    }
}

/// The last head remembered and its meaning.
#[derive(Debug, Default)]
pub(crate) struct HeadMemo {
    bytes: Vec<u8>,
    head: Option<Head>,
}

impl HeadMemo {
    /// The remembered head's meaning, if `input` starts with it.
    pub(crate) fn recall(&self, input: &[u8]) -> Option<Head> {
        self.head.filter(|_| input.starts_with(&self.bytes))
    }

    /// Remembers `head`, parsed from the start of `input`, if it is small.
    pub(crate) fn remember(&mut self, input: &[u8], head: Head) {
        if head.len <= MAX_REMEMBERED {
            self.bytes.clear();
            self.bytes.extend_from_slice(&input[..head.len]);
            self.head = Some(head);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(len: usize) -> Head {
        Head {
            method: Method::Get,
            version: Version::Http11,
            keep_alive: true,
            content_length: 0,
            chunked: false,
            len,
        }
    }

    #[test]
    fn a_remembered_head_is_recalled_for_input_that_starts_with_it_and_only_then() {
        let mut memo = HeadMemo::default();
        let first = b"GET / HTTP/1.1\r\n\r\nGET /next";
        assert_eq!(memo.recall(first), None);
        memo.remember(first, head(18));
        assert_eq!(memo.recall(first), Some(head(18)));
        assert_eq!(memo.recall(b"GET / HTTP/1.1\r\n\r\n"), Some(head(18)));
        assert_eq!(memo.recall(b"GET / HTTP/1.1\r\n\r"), None, "a head cut short");
        assert_eq!(memo.recall(b"GET /x HTTP/1.1\r\n\r\n"), None);
        // A new head replaces it.
        memo.remember(b"HEAD / HTTP/1.0\r\n\r\n", head(19));
        assert_eq!(memo.recall(first), None);
    }

    #[test]
    fn heads_up_to_the_limit_are_remembered_and_longer_ones_not() {
        let input = vec![b'a'; MAX_REMEMBERED + 1];
        let mut memo = HeadMemo::default();
        memo.remember(&input, head(MAX_REMEMBERED));
        assert_eq!(memo.recall(&input), Some(head(MAX_REMEMBERED)));
        let mut memo = HeadMemo::default();
        memo.remember(&input, head(MAX_REMEMBERED + 1));
        assert_eq!(memo.recall(&input), None);
    }
}
