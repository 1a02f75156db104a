use super::*;
use percore::http::{parse, Limits, Parsed, ResponseEvent, ResponseReader, Stream};

/// `request` as it goes to a backend, its body framed as `body`.
fn forwarded_with(request: &[u8], client: Option<IpAddr>, policy: &Policy, body: Outgoing) -> String {
    forwarded_from(request, &Origin { addr: client, scheme: Scheme::Http }, policy, body)
}

/// `request` as it goes to a backend from `origin`.
fn forwarded_from(request: &[u8], origin: &Origin, policy: &Policy, body: Outgoing) -> String {
    let Ok(Parsed::Complete(request)) = parse(request, &Limits::default()) else { panic!("a whole head") };
    let route = Route::of(&request).expect("a route");
    let mut out = Vec::new();
    forward_request(&mut out, &request, &route, origin, policy, body);
    String::from_utf8(out).expect("UTF-8")
}

fn forwarded(request: &[u8], client: Option<IpAddr>) -> String {
    forwarded_with(request, client, &Policy::default(), Outgoing::Length(0))
}

#[test]
fn a_request_loses_its_hop_by_hop_and_framing_fields_and_gains_its_own() {
    let request = b"GET /a?b HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-Secret, Content-Length\r\n\
        Keep-Alive: 5\r\nX-Secret: s\r\nTE: trailers\r\nUpgrade: h2c\r\nProxy-Connection: x\r\n\
        Trailer: X-T\r\nAccept: */*\r\nContent-Length: 0\r\n\r\n";
    let client = Some(IpAddr::from([10, 0, 0, 7]));
    assert_eq!(
        forwarded(request, client),
        "GET /a?b HTTP/1.1\r\nHost: h\r\nAccept: */*\r\nX-Forwarded-For: 10.0.0.7\r\nContent-Length: 0\r\n\r\n"
    );
}

#[test]
fn the_clients_forwarding_fields_go_on_only_when_trusted_and_http_1_0_asks_for_keep_alive() {
    let request = b"POST /p HTTP/1.0\r\nX-Forwarded-For: 1.1.1.1\r\nx-forwarded-for: 2.2.2.2, 3.3.3.3\r\n\
        Forwarded: for=1.1.1.1\r\nX-Real-IP: 1.1.1.1\r\nX-Forwarded-Proto: https\r\nContent-Length: 2\r\n\r\nhi";
    let client = Some("::ffff:127.0.0.1".parse().expect("an address"));
    let trusted = Policy { trust_forwarded_headers: true, ..Policy::default() };
    assert_eq!(
        forwarded_with(request, client, &trusted, Outgoing::Length(2)),
        "POST /p HTTP/1.0\r\nForwarded: for=1.1.1.1\r\nX-Real-IP: 1.1.1.1\r\nX-Forwarded-Proto: https\r\n\
         X-Forwarded-For: 1.1.1.1, 2.2.2.2, 3.3.3.3, 127.0.0.1\r\nContent-Length: 2\r\n\
         Connection: keep-alive\r\n\r\n"
    );
    assert_eq!(
        forwarded_with(request, client, &Policy::default(), Outgoing::Length(2)),
        "POST /p HTTP/1.0\r\nX-Forwarded-For: 127.0.0.1\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\n"
    );
}

#[test]
fn names_with_underscores_go_on_only_when_allowed() {
    let request = b"GET / HTTP/1.1\r\nHost: h\r\nX_Custom: 1\r\nTransfer_Encoding: chunked\r\n\r\n";
    assert_eq!(forwarded_with(request, None, &Policy::default(), Outgoing::None).matches('_').count(), 0);
    let allowed = Policy { underscores_in_headers: true, ..Policy::default() };
    assert_eq!(
        forwarded_with(request, None, &allowed, Outgoing::None),
        "GET / HTTP/1.1\r\nHost: h\r\nX_Custom: 1\r\nTransfer_Encoding: chunked\r\nX-Forwarded-For: unknown\r\n\r\n"
    );
}

#[test]
fn a_route_is_the_origin_form_and_the_host_an_absolute_target_names() {
    let route = |request: &[u8]| {
        let Ok(Parsed::Complete(request)) = parse(request, &Limits::default()) else {
            panic!("a whole head")
        };
        Route::of(&request)
            .map(|route| (String::from_utf8_lossy(route.target).into_owned(), route.host.map(<[u8]>::to_vec)))
    };
    assert_eq!(route(b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n"), Ok(("/x".into(), None)));
    assert_eq!(route(b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n"), Ok(("*".into(), None)));
    assert_eq!(
        route(b"GET https://H:1/a HTTP/1.1\r\nHost: h:1\r\n\r\n"),
        Ok(("/a".into(), Some(b"H:1".to_vec())))
    );
    assert_eq!(route(b"GET http://h HTTP/1.0\r\n\r\n"), Ok(("/".into(), Some(b"h".to_vec()))));
    for refused in [
        &b"GET http://h?q HTTP/1.1\r\nHost: h\r\n\r\n"[..],
        b"GET http:///a HTTP/1.1\r\nHost: h\r\n\r\n",
        b"GET h:80 HTTP/1.1\r\nHost: h\r\n\r\n",
    ] {
        assert_eq!(route(refused), Err(Refusal::Target), "{}", String::from_utf8_lossy(refused));
    }
    assert_eq!(route(b"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n"), Err(Refusal::Connect));
}

#[test]
fn a_response_loses_its_hop_by_hop_and_framing_fields_and_says_what_the_client_connection_does() {
    let input = b"HTTP/1.0 200 Fine\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: 3\r\n\
        Transfer-Encoding: chunked\r\nX-End: 2\r\n\r\n";
    let framed = ResponseReader::default().read(input, Stream::Open).expect("a head");
    let ResponseEvent::Head { head, .. } = framed.event else { panic!("a head") };
    let rewritten = |framing, persist| {
        let mut out = Vec::new();
        forward_response(&mut out, &head, framing, persist);
        String::from_utf8(out).expect("UTF-8")
    };
    assert_eq!(
        rewritten(Outgoing::Chunked, Persist::Keep),
        "HTTP/1.1 200 Fine\r\nX-End: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    assert_eq!(
        rewritten(Outgoing::Length(5), Persist::KeepAlive10),
        "HTTP/1.1 200 Fine\r\nX-End: 2\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\n"
    );
    assert_eq!(
        rewritten(Outgoing::UntilClose, Persist::Close),
        "HTTP/1.1 200 Fine\r\nX-End: 2\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(Declared::of(&head), Declared { length: None, transfer_encoding: true, chunked_alone: true });
}

#[test]
fn what_a_response_declares_of_its_framing() {
    let declared = |text: &str| {
        let framed = ResponseReader::default().read(text.as_bytes(), Stream::Open).expect("a head");
        let ResponseEvent::Head { head, .. } = framed.event else { panic!("a head") };
        let declared = Declared::of(&head);
        (declared.length, declared.transfer_encoding, declared.chunked_alone, declared.is_ambiguous())
    };
    assert_eq!(declared("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n"), (Some(3), false, false, false));
    assert_eq!(
        declared("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"),
        (Some(3), true, true, true)
    );
    assert_eq!(
        declared("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
        (None, true, false, false)
    );
    assert_eq!(
        declared("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"),
        (None, true, false, false)
    );
    assert_eq!(
        declared("HTTP/1.1 200 OK\r\nTransfer-Encoding: ,Chunked,\r\n\r\n"),
        (None, true, true, false)
    );
}

#[test]
fn trailers_go_on_without_the_fields_that_frame_route_or_control() {
    let body = b"0\r\nX-Sum: 1\r\nContent-Length: 5\r\nHost: evil\r\nSet-Cookie: a\r\nX_Under: 1\r\ngrpc-status: 0\r\n\r\n";
    let piece = percore::http::BodyFramer::chunked().read(body).expect("a body");
    let mut out = Vec::new();
    forward_trailers(&mut out, &piece.trailers, &Policy::default());
    assert_eq!(String::from_utf8_lossy(&out), "X-Sum: 1\r\ngrpc-status: 0\r\n");
}

#[test]
fn the_proxys_own_answers_have_a_short_body_but_to_head() {
    let mut out = Vec::new();
    answer(&mut out, 502, Method::Get, Persist::Close);
    assert_eq!(
        String::from_utf8_lossy(&out),
        "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: 16\r\n\
         Connection: close\r\n\r\n502 Bad Gateway\n"
    );
    out.clear();
    answer(&mut out, 504, Method::Head, Persist::Keep);
    assert!(out.ends_with(b"Content-Length: 20\r\n\r\n"), "{}", String::from_utf8_lossy(&out));
    out.clear();
    answer(&mut out, Refusal::Connect.status(), Method::Connect, Persist::Close);
    assert!(out.starts_with(b"HTTP/1.1 405 Method Not Allowed\r\n"), "{}", String::from_utf8_lossy(&out));
}

#[test]
fn a_client_over_tls_is_said_to_be_https_unless_a_trusted_proxy_said_so_first() {
    let request = b"GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-Proto: http\r\n\r\n";
    let origin = Origin { addr: Some(IpAddr::from([10, 0, 0, 7])), scheme: Scheme::Https };
    assert_eq!(
        forwarded_from(request, &origin, &Policy::default(), Outgoing::Length(0)),
        "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-Proto: https\r\nX-Forwarded-For: 10.0.0.7\r\nContent-Length: 0\r\n\r\n"
    );
    let trusting = Policy { trust_forwarded_headers: true, ..Policy::default() };
    assert_eq!(
        forwarded_from(request, &origin, &trusting, Outgoing::Length(0)),
        "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-Proto: http\r\nX-Forwarded-For: 10.0.0.7\r\nContent-Length: 0\r\n\r\n"
    );
}
