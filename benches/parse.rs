//! Parser throughput on a short request (what wrk and ab send) and on a
//! browser-sized one (about 700 bytes of headers), in bytes per second.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use percore::http::{parse, Limits, Status};

const SHORT: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n";

const BROWSER: &[u8] = b"GET /index.html?q=percore HTTP/1.1\r\n\
Host: www.example.com\r\n\
User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n\
Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8\r\n\
Accept-Language: en-US,en;q=0.5\r\n\
Accept-Encoding: gzip, deflate, br, zstd\r\n\
Referer: https://www.example.com/start\r\n\
Connection: keep-alive\r\n\
Cookie: session=0123456789abcdef0123456789abcdef; theme=dark; lang=en; consent=yes; tz=UTC\r\n\
Upgrade-Insecure-Requests: 1\r\n\
Sec-Fetch-Dest: document\r\n\
Sec-Fetch-Mode: navigate\r\n\
Sec-Fetch-Site: same-origin\r\n\
Sec-Fetch-User: ?1\r\n\
Priority: u=0, i\r\n\
Cache-Control: max-age=0\r\n\
If-None-Match: \"5f3c-1a2b3c4d5e6f\"\r\n\
If-Modified-Since: Sun, 29 Nov 2026 10:00:00 GMT\r\n\
\r\n";

fn bench(c: &mut Criterion) {
    let limits = Limits::default();
    let mut group = c.benchmark_group("parse");
    for (name, request) in [("short", SHORT), ("browser", BROWSER)] {
        assert!(matches!(parse(request, &limits), Ok(Status::Complete(_))), "{name} must parse");
        group.throughput(Throughput::Bytes(request.len() as u64));
        group.bench_function(name, |b| b.iter(|| parse(std::hint::black_box(request), &limits)));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
