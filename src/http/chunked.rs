//! The chunked transfer coding: where a chunked body ends.

use super::response::ResponseError;
use super::syntax::{all_bytes, complete_line, is_value_byte, number, split_field, trim_ows};

/// The length of a complete chunked body at the start of `body`, `None` if more is
/// needed (RFC 9112, 7.1):
/// ```text
/// chunked-body   = *chunk last-chunk trailer-section CRLF
/// chunk          = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
/// chunk-size     = 1*HEXDIG
/// last-chunk     = 1*("0") [ chunk-ext ] CRLF
/// trailer-section = *( field-line CRLF )
/// ```
pub(crate) fn chunked_len(body: &[u8]) -> Result<Option<usize>, ResponseError> {
    let mut at = 0;
    loop {
        let Some((line, after)) = complete_line(&body[at..]) else {
            check_partial_size_line(&body[at..])?;
            return Ok(None);
        };
        let size = chunk_size(line)?;
        at += after;
        if size == 0 {
            return Ok(trailers_len(&body[at..])?.map(|len| at + len));
        }
        // Bigger than what is buffered (or than memory): more is needed.
        let Some(size) = usize::try_from(size).ok().filter(|&n| n <= body.len() - at) else {
            return Ok(None);
        };
        at += size;
        match &body[at..] {
            [b'\n', ..] => at += 1,
            [b'\r', b'\n', ..] => at += 2,
            [] | [b'\r'] => return Ok(None),
            _ => return Err(ResponseError::Chunk),
        }
    }
}

/// `chunk-size [ chunk-ext ]`: the size, with overflow refused.
fn chunk_size(line: &[u8]) -> Result<u64, ResponseError> {
    let digits = line.iter().position(|b| !b.is_ascii_hexdigit()).unwrap_or(line.len());
    if digits == 0 {
        return Err(ResponseError::Chunk);
    }
    let size = number(&line[..digits], 16);
    check_chunk_ext(&line[digits..])?;
    size.ok_or(ResponseError::Chunk)
}

/// `chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )`.
/// Extensions are ignored, so only what could hide a line end is checked: control
/// bytes. Trailing white space is let through, as servers send it.
fn check_chunk_ext(ext: &[u8]) -> Result<(), ResponseError> {
    let ext = trim_ows(ext);
    if !ext.is_empty() && (ext[0] != b';' || !all_bytes(ext, is_value_byte)) {
        return Err(ResponseError::Chunk);
    }
    Ok(())
}

/// Refuses a size line still arriving once what is there cannot start a valid one, so
/// a garbage body fails at once rather than when the caller's buffer is full.
fn check_partial_size_line(partial: &[u8]) -> Result<(), ResponseError> {
    let partial = partial.strip_suffix(b"\r").unwrap_or(partial);
    if partial.is_empty() {
        return Ok(());
    }
    chunk_size(partial).map(drop)
}

/// The length of `trailer-section CRLF` at the start of `buf`, `None` if more is needed.
fn trailers_len(buf: &[u8]) -> Result<Option<usize>, ResponseError> {
    let mut at = 0;
    while let Some((line, after)) = complete_line(&buf[at..]) {
        at += after;
        if line.is_empty() {
            return Ok(Some(at));
        }
        split_field(line).ok_or(ResponseError::Header)?;
    }
    Ok(None)
}
