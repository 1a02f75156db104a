use super::*;

/// Reads `body` handed in `piece` bytes at a time, as a caller does: what is left
/// unconsumed comes again with the next piece, and each piece is read until nothing
/// more of it is consumed. Returns the bytes consumed when the body ended (`None`
/// if it did not), the content, and the most bytes ever handed in.
fn read_in_pieces(
    body: &[u8],
    piece: usize,
    grammar: ChunkGrammar,
) -> Result<(Option<usize>, Vec<u8>, usize), BodyError> {
    let (mut chunked, mut consumed, mut most_handed) = (ChunkedBody::new(grammar), 0, 0);
    let (mut received, mut content) = (0, Vec::new());
    while received < body.len() {
        received = (received + piece).min(body.len());
        loop {
            let handed = &body[consumed..received];
            most_handed = most_handed.max(handed.len());
            let read = chunked.read(handed)?;
            assert!(read.consumed <= handed.len() && read.content <= read.consumed);
            content.extend_from_slice(&handed[read.consumed - read.content..read.consumed]);
            consumed += read.consumed;
            if read.trailers.is_some() {
                return Ok((Some(consumed), content, most_handed));
            }
            if read.consumed == 0 || consumed == received {
                break;
            }
        }
    }
    Ok((None, content, most_handed))
}

fn strict(body: &[u8]) -> Result<(Option<usize>, Vec<u8>, usize), BodyError> {
    read_in_pieces(body, body.len(), ChunkGrammar::Strict)
}

#[test]
fn a_body_fed_one_byte_at_a_time_is_consumed_as_it_comes() {
    let (mut body, mut content) = (Vec::new(), Vec::new());
    for size in 1..200 {
        body.extend_from_slice(format!("{size:x};ext=\"v\"\r\n").as_bytes());
        body.extend(std::iter::repeat_n(b'x', size));
        content.extend(std::iter::repeat_n(b'x', size));
        body.extend_from_slice(b"\r\n");
    }
    let trailers = "0\r\nX-Trailer: 1\r\n\r\n";
    body.extend_from_slice(trailers.as_bytes());
    // Every byte is consumed as it comes, but for the trailer section, held back
    // until it is whole: a caller hands each byte in once, and the reader steps
    // through it once, so the work is linear in the body's length.
    for grammar in [ChunkGrammar::Lenient, ChunkGrammar::Strict] {
        let whole = Ok((Some(body.len()), content.clone(), body.len()));
        assert_eq!(
            read_in_pieces(&body, 1, grammar),
            Ok((Some(body.len()), content.clone(), trailers.len() - 3))
        );
        assert_eq!(read_in_pieces(&body, body.len(), grammar), whole);
    }
}

#[test]
fn each_read_ends_at_the_end_of_a_run_of_content_and_the_last_finds_the_trailers() {
    let body = b"3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nX-T: 1\r\n\r\nnext";
    let mut chunked = ChunkedBody::new(ChunkGrammar::Strict);
    assert_eq!(chunked.read(body), Ok(Chunked { consumed: 6, content: 3, trailers: None }));
    assert_eq!(chunked.read(&body[6..]), Ok(Chunked { consumed: 11, content: 2, trailers: None }));
    // The line end after the data, the last chunk and the trailer section.
    let rest = &body[17..];
    assert_eq!(chunked.read(rest), Ok(Chunked { consumed: 15, content: 0, trailers: Some((5, 10)) }));
    assert_eq!(&rest[5..15], b"X-T: 1\r\n\r\n");
}

#[test]
fn the_strict_grammar_takes_what_rfc_9112_allows() {
    let taken: [&[u8]; 7] = [
        b"2\r\nxx\r\n0\r\n\r\n",
        b"000A ; x = y\r\n0123456789\r\n0\r\n\r\n",
        b"2;a;b=c;d=\"q \\\" \\\\ \"\r\nxx\r\n0;last\r\n\r\n",
        b"2\t;\ta\t=\t\"\"\r\nxx\r\n0\r\n\r\n",
        b"2;a=\"\x80\xff\"\r\nxx\r\n0\r\nX: 1\r\nY: 2\r\n\r\n",
        b"7fffffffffffffff\r\n",
        b"0000000000000002\r\nxx\r\n0\r\n\r\n",
    ];
    for body in taken {
        let read = strict(body);
        assert!(read.is_ok(), "{:?}: {read:?}", String::from_utf8_lossy(body));
    }
}

#[test]
fn the_strict_grammar_refuses_what_a_next_hop_could_read_otherwise() {
    let refused: [(&[u8], BodyError); 16] = [
        (b"2;\nxx\r\n0\r\n\r\n", BodyError::Chunk),
        (b"2\nxx\r\n0\r\n\r\n", BodyError::Chunk),
        (b"2 \r\nxx\r\n0\r\n\r\n", BodyError::Chunk),
        (b"2\r\nxx\n0\r\n\r\n", BodyError::Chunk),
        (b"2\r\nxx\r\n0\n\n", BodyError::Chunk),
        (b"2\r\nxx\r\n0\r\n\n", BodyError::Trailer),
        (b"2\r\nxx\r\n0\r\nX: 1\n\r\n", BodyError::Trailer),
        (b"00000000000000002\r\n", BodyError::Chunk),
        (b"8000000000000000\r\n", BodyError::Chunk),
        (b"2;a b\r\n", BodyError::Chunk),
        (b"2;a=\"x\r\n", BodyError::Chunk),
        (b"2;\r\n", BodyError::Chunk),
        (b"2;a \r\n", BodyError::Chunk),
        (b"2;a=b c\r\n", BodyError::Chunk),
        (b"2\r\r\n", BodyError::Chunk),
        (b"2\r\nxx\rX", BodyError::Chunk),
    ];
    for (body, error) in refused {
        assert_eq!(strict(body), Err(error), "{:?}", String::from_utf8_lossy(body));
    }
    // The same bytes, as an endpoint reads them, but for what no grammar allows.
    for (body, _) in &refused[..8] {
        let lenient = read_in_pieces(body, body.len(), ChunkGrammar::Lenient);
        assert!(lenient.is_ok(), "{:?}: {lenient:?}", String::from_utf8_lossy(body));
    }
}

#[test]
fn a_size_line_is_limited() {
    assert_eq!(MAX_SIZE_LINE, 4096, "4 KiB, as documented");
    let padding = " ".repeat(MAX_SIZE_LINE - 3);
    let longest = format!("5{padding}\r\nhello\r\n0\r\n\r\n");
    let lenient = |body: &str| read_in_pieces(body.as_bytes(), 7, ChunkGrammar::Lenient).map(|r| (r.0, r.2));
    assert_eq!(lenient(&longest), Ok((Some(longest.len()), 7)));
    let too_long = format!("5{padding} \r\nhello\r\n0\r\n\r\n");
    assert_eq!(lenient(&too_long), Err(BodyError::SizeLineTooLong));
    let endless = format!("5;{}", "x".repeat(MAX_SIZE_LINE));
    assert_eq!(
        read_in_pieces(endless.as_bytes(), 1000, ChunkGrammar::Lenient),
        Err(BodyError::SizeLineTooLong)
    );
    let endless = format!("5;{}", "x".repeat(MAX_SIZE_LINE));
    assert_eq!(
        read_in_pieces(endless.as_bytes(), 1000, ChunkGrammar::Strict),
        Err(BodyError::SizeLineTooLong)
    );
}

#[test]
fn a_trailer_section_is_limited() {
    let field = |len: usize| format!("X: {}\r\n", "t".repeat(len - 5));
    let read = |body: &str| read_in_pieces(body.as_bytes(), 4096, ChunkGrammar::Lenient).map(|r| (r.0, r.2));
    let largest = format!("0\r\n{}\r\n", field(MAX_TRAILERS - 2));
    assert_eq!(read(&largest), Ok((Some(largest.len()), MAX_TRAILERS)));
    let too_large = format!("0\r\n{}\r\n", field(MAX_TRAILERS - 1));
    assert_eq!(read(&too_large), Err(BodyError::TrailersTooLarge));
    let endless = format!("0\r\n{}", "X: t\r\n".repeat(MAX_TRAILERS));
    assert_eq!(read(&endless), Err(BodyError::TrailersTooLarge));
}

#[test]
fn a_chunk_larger_than_memory_is_counted_down() {
    let mut chunked = ChunkedBody::new(ChunkGrammar::Lenient);
    assert_eq!(
        chunked.read(b"fffffffffffffff0\r\nabc"),
        Ok(Chunked { consumed: 21, content: 3, trailers: None })
    );
    assert_eq!(chunked.part, Part::Data { left: 0xffff_ffff_ffff_fff0 - 3 });
}
