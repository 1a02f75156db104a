//! The grammar both parses share, requests and responses: byte classes (RFC 9110,
//! 5.6.2 and 5.5; RFC 3986 for targets), lines, header fields, and the framing and
//! keep-alive fields' values.

/// `tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" /
/// "`" / "|" / "~" / DIGIT / ALPHA`: the bytes of a method or a field name.
pub(crate) fn is_tchar(b: u8) -> bool {
    TCHAR[b as usize]
}

/// Whether `bytes` is a token (RFC 9110, 5.6.2): one or more `tchar`, as a method or
/// a header field's name must be.
///
/// ```
/// use percore::http::is_token;
/// assert!(is_token(b"X-Request-Id") && is_token(b"GET"));
/// assert!(!is_token(b"") && !is_token(b"Bad Name") && !is_token(b"a:b"));
/// ```
pub fn is_token(bytes: &[u8]) -> bool {
    !bytes.is_empty() && bytes.iter().all(|&b| is_tchar(b))
}

const TCHAR: [bool; 256] = alphanumeric_and(b"!#$%&'*+-.^_`|~");

/// A byte class as a table: ASCII letters and digits, and the bytes of `extra`.
const fn alphanumeric_and(extra: &[u8]) -> [bool; 256] {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = (b as u8).is_ascii_alphanumeric();
        b += 1;
    }
    let mut i = 0;
    while i < extra.len() {
        table[extra[i] as usize] = true;
        i += 1;
    }
    table
}

/// The position of the first `\n` in `haystack`: the word scan skips what holds
/// none, and the bytes from where it stopped are searched one by one.
pub(crate) fn find_newline(haystack: &[u8]) -> Option<usize> {
    let offset = newline_free_words(haystack);
    haystack[offset..].iter().position(|&b| b == b'\n').map(|i| offset + i)
}

/// How many bytes at the start of `haystack` are whole 8-byte words with no `\n`:
/// where the first `\n` may be, to the byte. Looks at 8 bytes at a time (a word has
/// a zero byte where `word ^ 0x0a0a..` does; the classic bit trick, exact), since
/// every request's head is scanned for its line ends at least once.
fn newline_free_words(haystack: &[u8]) -> usize {
    const LOW: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    const NEWLINES: u64 = u64::from_ne_bytes([b'\n'; 8]);
    let mut offset = 0;
    for chunk in haystack.chunks_exact(8) {
        let word = u64::from_ne_bytes(chunk.try_into().expect("chunks of 8"));
        let zeroed = word ^ NEWLINES;
        if zeroed.wrapping_sub(LOW) & !zeroed & HIGH != 0 {
            break;
        }
        offset += 8;
    }
    offset
}

/// The length of a head, up to and including its empty line, looking for line ends
/// from `from` on; `None` while the empty line has not arrived.
pub(crate) fn find_head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut at = from + find_newline(buf.get(from..)?)?;
    loop {
        match &buf[at + 1..] {
            [b'\n', ..] => return Some(at + 2),
            [b'\r', b'\n', ..] => return Some(at + 3),
            _ => {}
        }
        at += 1 + find_newline(&buf[at + 1..])?;
    }
}

/// The next line without its CRLF or LF, and the bytes up to and including the LF;
/// `None` until the LF has arrived.
pub(crate) fn complete_line(buf: &[u8]) -> Option<(&[u8], usize)> {
    let end = find_newline(buf)?;
    let line = &buf[..end];
    Some((line.strip_suffix(b"\r").unwrap_or(line), end + 1))
}

/// Splits off the next line (without its CRLF or LF) and returns it with the rest;
/// without a line end, the whole buffer is the line.
pub(crate) fn next_line(buf: &[u8]) -> (&[u8], &[u8]) {
    match complete_line(buf) {
        Some((line, len)) => (line, &buf[len..]),
        None => (buf.strip_suffix(b"\r").unwrap_or(buf), &[]),
    }
}

/// `field-line = field-name ":" OWS field-value OWS`: the name and the trimmed value,
/// or `None` when the line breaks the grammar. The name is the token before the
/// colon, so a leading space (obs-fold), a space before the colon, or no colon at all
/// leave something else there.
pub(crate) fn split_field(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = line.iter().position(|&b| !is_tchar(b))?;
    if colon == 0 || line[colon] != b':' {
        return None;
    }
    let value = trim_ows(&line[colon + 1..]);
    all_bytes(value, is_value_byte).then_some((&line[..colon], value))
}

/// The header fields of a whole head that a parse has checked (its start line, then
/// its field lines): each line is known good, so it is split at its colon and its
/// value trimmed, its bytes not checked again (a proxy walks a head's fields more
/// than once). What `Request::headers` and `ResponseHead::headers` give.
pub(crate) fn checked_fields(head: &[u8]) -> CheckedFields<'_> {
    checked_block(next_line(head).1)
}

/// The header fields of a checked block with no start line (a trailer section).
pub(crate) fn checked_block(block: &[u8]) -> CheckedFields<'_> {
    CheckedFields { rest: block }
}

/// The iterator [`checked_fields`] returns.
#[derive(Clone, Debug)]
pub(crate) struct CheckedFields<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for CheckedFields<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let (line, rest) = next_line(self.rest);
        // The empty line that ends the head has no colon.
        let colon = line.iter().position(|&b| b == b':')?;
        self.rest = rest;
        Some((&line[..colon], trim_ows(&line[colon + 1..])))
    }
}

/// The field lines of a header block, `*( field-line CRLF ) CRLF` (RFC 9112, 2.1), each
/// split into name and trimmed value, up to the empty line that ends the block: the
/// one walk over headers that both parses make, and the response parse makes over
/// trailers too. A line that breaks the grammar yields `Err` and ends the walk, since
/// nothing after it can be trusted.
pub(crate) fn field_lines(block: &[u8]) -> FieldLines<'_> {
    FieldLines { rest: block }
}

/// The iterator [`field_lines`] returns.
#[derive(Clone, Debug)]
pub(crate) struct FieldLines<'a> {
    rest: &'a [u8],
}

/// A field line that breaks `field-line = field-name ":" OWS field-value OWS`; each
/// parse reports it as its own error kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InvalidField;

impl<'a> Iterator for FieldLines<'a> {
    type Item = Result<(&'a [u8], &'a [u8]), InvalidField>;

    // Inlined, as the loop it replaces was: with three callers LLVM keeps it out of
    // line, and a call per header line is a cost the request parse's bench shows.
    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let (line, rest) = next_line(self.rest);
        if line.is_empty() {
            return None;
        }
        let field = split_field(line);
        self.rest = if field.is_some() { rest } else { &[] };
        Some(field.ok_or(InvalidField))
    }
}

/// A `Content-Length` value added to what earlier ones said: the length, `None` when
/// the value is invalid or disagrees with an earlier one (RFC 9110, 8.6), which both
/// parses refuse, as a sign of request or response splitting.
pub(crate) fn agreed_length(earlier: Option<u64>, value: &[u8]) -> Option<u64> {
    parse_length(value).filter(|&length| earlier.is_none_or(|earlier| earlier == length))
}

/// `Content-Length = 1*DIGIT`, refusing signs, spaces, lists and overflow.
fn parse_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    number(value, 10)
}

/// The value of `digits` in `radix` (a decimal length, a hex chunk size); `None` if a
/// byte is no digit of it or the value overflows.
pub(crate) fn number(digits: &[u8], radix: u32) -> Option<u64> {
    digits.iter().try_fold(0u64, |n, &b| {
        let digit = char::from(b).to_digit(radix)?;
        n.checked_mul(u64::from(radix))?.checked_add(u64::from(digit))
    })
}

/// The `close` and `keep-alive` options of a `Connection` value (a comma list).
pub(crate) fn connection_options(value: &[u8]) -> (bool, bool) {
    value.split(|&b| b == b',').map(trim_ows).fold((false, false), |(close, keep_alive), option| {
        (
            close || option.eq_ignore_ascii_case(b"close"),
            keep_alive || option.eq_ignore_ascii_case(b"keep-alive"),
        )
    })
}

/// Whether every byte of `bytes` satisfies `class`; without an early exit, so the
/// loop vectorizes (the common case is that all do).
pub(crate) fn all_bytes(bytes: &[u8], class: fn(u8) -> bool) -> bool {
    bytes.iter().fold(true, |ok, &b| ok & class(b))
}

/// A byte of a request target: visible ASCII, or (as nginx allows) bytes above 0x7F;
/// never a space or a control byte.
pub(crate) fn is_target_byte(b: u8) -> bool {
    b > b' ' && b != 0x7f
}

/// A byte of a `Host` value, `uri-host [ ":" port ]` (RFC 3986, 3.2.2): unreserved,
/// percent-encoded, sub-delims, and the colon and brackets of a port or an IPv6
/// literal. Anything else makes the value invalid, which RFC 9112, 3.2, refuses.
pub(crate) fn is_host_byte(b: u8) -> bool {
    HOST[b as usize]
}

const HOST: [bool; 256] = alphanumeric_and(b"-._~%!$&'()*+,;=:[]");

/// `field-value` bytes: visible ASCII, SP, HTAB and obs-text; no other control byte
/// (so no NUL and no CR inside a value).
pub(crate) fn is_value_byte(b: u8) -> bool {
    b >= b' ' && b != 0x7f || b == b'\t'
}

/// Strips optional white space (`OWS = *( SP / HTAB )`) from both ends.
pub(crate) fn trim_ows(mut value: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = value {
        value = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = value {
        value = rest;
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_newline_agrees_with_a_plain_search() {
        let mut text = vec![b'a'; 40];
        assert_eq!(find_newline(&text), None);
        for at in 0..text.len() {
            text[at] = b'\n';
            for start in 0..=at {
                assert_eq!(find_newline(&text[start..]), Some(at - start), "newline at {at}, from {start}");
            }
            text[at] = 0x8a; // a byte that differs from \n only in its high bit
        }
        assert_eq!(find_newline(&text), None);
    }

    #[test]
    fn the_word_scan_stops_at_the_word_that_holds_the_first_newline() {
        // Bytes that differ from \n in one bit each, and no \n: every whole word is
        // skipped, the last partial one left to the byte search.
        let mut text: Vec<u8> = (0..8).flat_map(|bit| [b'\n' ^ (1 << bit); 5]).collect();
        assert_eq!(newline_free_words(&text), 40);
        text.push(b'\n');
        for at in 0..text.len() {
            let mut with_newline = text.clone();
            with_newline[at] = b'\n';
            assert_eq!(newline_free_words(&with_newline), at / 8 * 8, "newline at {at}");
        }
    }

    #[test]
    fn field_lines_stop_at_the_empty_line_and_after_a_bad_line() {
        let block = b"A: 1\r\nB:\t two \nC:\r\n\r\nD: after";
        let fields: Vec<_> = field_lines(block).collect();
        let expected: [(&[u8], &[u8]); 3] = [(b"A", b"1"), (b"B", b"two"), (b"C", b"")];
        assert_eq!(fields, expected.map(Ok));
        let fields: Vec<_> = field_lines(b"A: 1\r\n b\r\nC: 3\r\n\r\n").collect();
        assert_eq!(fields, [Ok((&b"A"[..], &b"1"[..])), Err(InvalidField)]);
        assert_eq!(field_lines(b"\r\n").count(), 0);
    }

    #[test]
    fn byte_classes_hold_exactly_their_bytes() {
        let members =
            |class: fn(u8) -> bool| (0..=255u8).filter(move |&b| class(b) && !b.is_ascii_alphanumeric());
        assert_eq!(members(is_tchar).collect::<Vec<_>>(), b"!#$%&'*+-.^_`|~");
        assert_eq!(members(is_host_byte).collect::<Vec<_>>(), b"!$%&'()*+,-.:;=[]_~");
        assert!((0..=255u8).filter(u8::is_ascii_alphanumeric).all(|b| is_tchar(b) && is_host_byte(b)));
    }
}
