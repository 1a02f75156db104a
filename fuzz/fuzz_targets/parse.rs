//! The request parse and the hello protocol on arbitrary bytes, against two oracles:
//! the resumable parse, fed the input in pieces, says at every piece what a fresh
//! parse of the same bytes says; and `Hello`, given the input in two reads cut
//! anywhere, answers exactly as it does given it whole. A complete head's fields are
//! tokens and trimmed values from its own bytes, its Host the one they name.
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use libfuzzer_sys::fuzz_target;
use percore::http::{is_token, parse, Hello, HelloConfig, Limits, Parsed, Progress, Request};
use percore::reactor::Harness;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the limits (small ones are reached) and where to cut.
    let Some((&choice, input)) = data.split_first() else { return };
    let limits = if choice & 1 == 1 { Limits { request_line: 64, head: 256 } } else { Limits::default() };
    let cut = usize::from(choice >> 1) * input.len() / 127;
    resumable_agrees_with_fresh(input, &[cut, cut + (input.len() - cut) / 2, input.len()], &limits);
    if let Ok(Parsed::Complete(request)) = parse(input, &limits) {
        fields_are_the_heads(input, &request);
    }
    let config = HelloConfig { limits, ..HelloConfig::default() };
    let whole = serve(&config, &[input]);
    let split = serve(&config, &[&input[..cut], &input[cut..]]);
    assert_eq!(split, whole, "cut at {cut}");
});

/// One `Progress` given `input` up to each of `ends` in turn, until it is no longer
/// partial, against a fresh parse of the same bytes.
fn resumable_agrees_with_fresh(input: &[u8], ends: &[usize], limits: &Limits) {
    let mut progress = Progress::default();
    for &end in ends {
        let resumed = progress.parse(&input[..end], limits);
        assert_eq!(resumed, parse(&input[..end], limits), "at {end}");
        if resumed != Ok(Parsed::Partial) {
            return;
        }
    }
}

/// The head a parse found ends where it says, and its fields are read from it.
fn fields_are_the_heads(input: &[u8], request: &Request<'_>) {
    let head = request.as_bytes();
    assert_eq!(&input[request.head_len - head.len()..request.head_len], head);
    for (name, value) in request.headers() {
        assert!(is_token(name), "{name:?}");
        let ows = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
        assert!(!ows(value.first()) && !ows(value.last()), "{value:?}");
    }
    let host = request.headers().find(|(name, _)| name.eq_ignore_ascii_case(b"host"));
    assert_eq!(request.host, host.map(|(_, value)| value));
}

/// Every byte `Hello` writes given `reads` as a connection's reads, handed in as the
/// loop hands them, at a fixed Date, so that runs compare.
fn serve(config: &HelloConfig, reads: &[&[u8]]) -> Vec<u8> {
    let mut harness = Harness::new(Hello::new(config));
    harness.tick(UNIX_EPOCH + Duration::from_secs(1_800_000_000));
    let mut out = Vec::new();
    for read in reads {
        harness.receive(read);
        out.extend(harness.take_output());
    }
    out
}
