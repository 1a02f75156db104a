//! The `echo` example returns every byte it receives, in order.

#[path = "../../tests/util/mod.rs"]
mod util;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::thread;

use util::{connect, read_to_eof, Server};

/// Reads exactly `len` bytes (bounded by the socket's read timeout).
fn read_exactly(stream: &mut TcpStream, len: usize) -> Vec<u8> {
    let mut buf = vec![0; len];
    stream.read_exact(&mut buf).unwrap_or_else(|e| panic!("reading {len} echoed bytes: {e}"));
    buf
}

/// Deterministic bytes with no short period, so a dropped, duplicated or
/// reordered chunk shows up as a mismatch.
fn payload(len: usize) -> Vec<u8> {
    let mut state: u32 = 0x9e37_79b9;
    (0..len)
        .map(|_| {
            // xorshift32
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as u8
        })
        .collect()
}

/// Index of the first differing byte, for a readable failure on 1 MiB.
fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y).or((a.len() != b.len()).then(|| a.len().min(b.len())))
}

fn assert_same_bytes(got: &[u8], want: &[u8]) {
    if let Some(at) = first_difference(got, want) {
        panic!("echo differs at byte {at} (got {} bytes, sent {})", got.len(), want.len());
    }
}

/// Uneven piece sizes, so the server sees reads that split and join writes
/// at arbitrary points.
const PIECE_SIZES: [usize; 7] = [1, 7, 100, 1500, 4096, 65536, 12345];

fn write_in_pieces(stream: &mut TcpStream, data: &[u8]) {
    let mut rest = data;
    for size in PIECE_SIZES.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (piece, tail) = rest.split_at((*size).min(rest.len()));
        stream.write_all(piece).unwrap_or_else(|e| panic!("writing to the echo server: {e}"));
        rest = tail;
    }
}

#[test]
fn echoes_messages_one_at_a_time() {
    let server = Server::echo();
    let mut stream = connect(server.addr());
    for message in [&b"hello"[..], b"\r\n", b"GET / HTTP/1.1\r\n\r\n", &[0u8, 255, 10, 13]] {
        stream.write_all(message).unwrap();
        assert_eq!(read_exactly(&mut stream, message.len()), message);
    }
}

#[test]
fn echoes_one_mib_while_still_writing_then_closes() {
    let server = Server::echo();
    let mut reader = connect(server.addr());
    let mut writer = reader.try_clone().unwrap();
    let data = payload(1 << 20);

    // Reading concurrently with writing: 1 MiB exceeds the socket buffers, so
    // a client that wrote everything first would deadlock against the echo.
    let echoed = thread::scope(|scope| {
        scope.spawn(|| {
            write_in_pieces(&mut writer, &data);
            writer.shutdown(Shutdown::Write).unwrap();
        });
        read_exactly(&mut reader, data.len())
    });
    assert_same_bytes(&echoed, &data);
    read_to_eof(&mut reader);
}

#[test]
fn closes_after_client_half_close_once_all_is_echoed() {
    let server = Server::echo();
    let mut stream = connect(server.addr());
    // Small enough to sit in socket buffers while nothing is read yet.
    let data = payload(16 * 1024);
    write_in_pieces(&mut stream, &data);
    stream.shutdown(Shutdown::Write).unwrap();
    // Everything sent before the half-close still comes back, then EOF.
    assert_same_bytes(&read_exactly(&mut stream, data.len()), &data);
    read_to_eof(&mut stream);
}
