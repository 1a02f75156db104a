//! Parser throughput on a short request (what wrk and ab send) and on a
//! browser-sized one (about 700 bytes of headers), in bytes per second.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use percore::http::{parse, Limits, Parsed};

const SHORT: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n";

/// A request as a browser sends it: about 700 bytes of headers.
const BROWSER: &[u8] = include_bytes!("../tests/data/browser.http");

fn bench(c: &mut Criterion) {
    let limits = Limits::default();
    let mut group = c.benchmark_group("parse");
    for (name, request) in [("short", SHORT), ("browser", BROWSER)] {
        assert!(matches!(parse(request, &limits), Ok(Parsed::Complete(_))), "{name} must parse");
        group.throughput(Throughput::Bytes(request.len() as u64));
        group.bench_function(name, |b| b.iter(|| parse(std::hint::black_box(request), &limits)));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
