//! The response framer on arbitrary bytes, read whole and cut in two: the same
//! responses and the same error either way, and never more bytes consumed than given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use percore::http::{Method, ResponseError, ResponseHead, ResponseReader, Stream};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the method answered and where the rest is cut.
    let Some((&choice, input)) = data.split_first() else { return };
    let method = if choice & 1 == 1 { Method::Head } else { Method::Get };
    let cut = usize::from(choice >> 1) * input.len() / 127;
    let whole = frame(method, &[input]);
    let split = frame(method, &[&input[..cut], &input[cut..]]);
    assert_eq!(split, whole, "cut at {cut}");
});

/// Reads `pieces` with one reader as a connection's reads, keeping what it leaves
/// unconsumed for the next, then the end of the stream: every response framed, and
/// the error that ended the framing, if one did.
fn frame(method: Method, pieces: &[&[u8]]) -> (Vec<ResponseHead>, Option<ResponseError>) {
    let (mut reader, mut pending, mut responses) = (ResponseReader::new(method), Vec::new(), Vec::new());
    let reads = pieces.iter().map(|&piece| (piece, Stream::Open));
    for (piece, stream) in reads.chain([(&[][..], Stream::Ended)]) {
        pending.extend_from_slice(piece);
        loop {
            match reader.read(&pending, stream) {
                Ok(framed) => {
                    assert!(framed.consumed <= pending.len(), "consumed more than given");
                    pending.drain(..framed.consumed);
                    match framed.completed {
                        Some(response) => responses.push(response),
                        None => break,
                    }
                }
                Err(error) => return (responses, Some(error)),
            }
        }
    }
    (responses, None)
}
