//! The request parse and the hello protocol on arbitrary bytes: no panic, and a
//! parse that completes never claims more bytes than it was given.
#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use percore::http::{parse, Hello, HelloConfig, HelloConn, Limits, Status};
use percore::reactor::Protocol;

thread_local! {
    // Built once: building the prebuilt responses per input would dwarf the parse.
    static HELLO: RefCell<Hello> = RefCell::new(Hello::new(&HelloConfig::default()));
}

fuzz_target!(|data: &[u8]| {
    let limits = Limits { request_line: 256, head: 1024 };
    if let Ok(Status::Complete(request)) = parse(data, &limits) {
        assert!(request.head_len <= data.len());
    }
    HELLO.with_borrow_mut(|hello| serve_in_two_reads(hello, data));
});

/// The first byte picks where the input is cut in two, as two reads would.
fn serve_in_two_reads(hello: &mut Hello, data: &[u8]) {
    let cut = data.first().map_or(0, |&b| b as usize).min(data.len());
    let (mut conn, mut out) = (HelloConn::default(), Vec::new());
    let verdict = hello.on_data(&mut conn, &data[..cut], &mut out);
    assert!(verdict.consumed <= cut);
    if verdict.keep_open {
        let mut rest = data[verdict.consumed..cut].to_vec();
        rest.extend_from_slice(&data[cut..]);
        assert!(hello.on_data(&mut conn, &rest, &mut out).consumed <= rest.len());
    }
}
