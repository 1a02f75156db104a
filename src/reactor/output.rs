//! Output: what a protocol writes in one call ([`Output`]), and what a connection
//! has yet to send ([`SendQueue`]). Shared bytes, such as a large prebuilt body, are
//! referenced, never copied: the worker holds them once, and each connection that
//! has not sent them yet holds a reference. A range of a file is referenced the same
//! way and sent with sendfile(2): its bytes never reach user memory.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, IoSlice};
use std::iter::Peekable;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use crate::sys::{self, More};

/// Bytes up to which a body is better copied into each answer ([`Io::write`]) than
/// referenced ([`Io::write_shared`]): copied, an answer and a pipeline of them stay
/// one contiguous `send`; larger, a reference saves the copy. The hello server's
/// prebuilt answers draw the line here.
///
/// [`Io::write`]: super::Io::write
/// [`Io::write_shared`]: super::Io::write_shared
pub(crate) const COPY_MAX: usize = 1024;

/// Slices handed to one `sendmsg`: a head and a body each, for 32 answers.
const SLICES_PER_SEND: usize = 64;

/// The most one `sendmsg` or `sendfile` hands the socket of shared bytes or a file
/// range (a long one goes in several calls, until the socket is full). Larger calls
/// cost far more per byte: with 1 MiB bodies, CPU per response fell to 0.27x
/// nginx-sendfile's over loopback and 0.68–0.82x over a veth pair at 48 KiB a call,
/// from 1.13–1.20x and 1.04–1.05x uncapped (sendfile moves a file 64 KiB a step,
/// in one call); 16, 32, 64 and 128 KiB a call did worse than 48
/// (docs/performance.md, "Bodies by the call"). Each call then fits one 64 KiB
/// packet (loopback's, or a GSO one), where a 64 KiB step leaves a short packet
/// behind it.
const MOST_PER_CALL: usize = 48 << 10;

/// What a protocol wrote in one call: bytes it copied, and shared bytes and file
/// ranges it referenced, in the order written. The loop sends it in one system call
/// when it can: `send` when all of it was copied, `sendmsg` with one slice per piece
/// when it references shared bytes; a file range with `sendfile`, after the bytes
/// before it (sent with `MSG_MORE`, so that they share packets). Shared bytes and
/// file ranges go [`MOST_PER_CALL`] at a time.
#[derive(Debug, Default)]
pub(crate) struct Output {
    copied: Vec<u8>,
    /// Each shared piece, with how many of `copied` come before it.
    shared: Vec<(usize, Shared)>,
    len: usize,
}

/// A file in memory holding what `from` reads (bytes, `&body[..]`, or a file, copied
/// in the kernel through no buffer of ours), sealed so that it can never change
/// (memfd_create(2) with `F_SEAL_WRITE`, `F_SEAL_SHRINK` and `F_SEAL_GROW`): a body
/// to send with [`Io::write_file`](super::Io::write_file) from many connections,
/// each send reading the same pages, which no write can touch while the kernel
/// sends them. Held once however many connections send it; it holds no user
/// memory, and it is closed when the last `Arc` of it goes.
pub fn sealed_file(from: impl io::Read) -> io::Result<File> {
    sys::sealed_memfd(c"percore", from)
}

/// A piece of output held by reference.
#[derive(Clone, Debug)]
enum Shared {
    Bytes(Arc<[u8]>),
    /// `len` bytes of `file` from byte `offset` on.
    File {
        file: Arc<File>,
        offset: u64,
        len: usize,
    },
}

impl Shared {
    fn len(&self) -> usize {
        match self {
            Shared::Bytes(bytes) => bytes.len(),
            Shared::File { len, .. } => *len,
        }
    }
}

impl Output {
    /// An empty output.
    pub(crate) fn new() -> Output {
        Output::default()
    }

    /// Bytes written, copied and shared.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was written.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every byte written, in order, as one vector (file ranges read as they are
    /// now, up to the file's end): for tests and tools.
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        let mut all = Vec::with_capacity(self.len);
        append(self.pieces(0), &mut all);
        all
    }

    /// Forgets what was written; keeps the memory for the next call.
    pub(crate) fn clear(&mut self) {
        self.copied.clear();
        self.shared.clear();
        self.len = 0;
    }

    pub(crate) fn write(&mut self, bytes: &[u8]) {
        self.copied.extend_from_slice(bytes);
        self.len += bytes.len();
    }

    pub(crate) fn write_shared(&mut self, bytes: &Arc<[u8]>) {
        self.reference(Shared::Bytes(Arc::clone(bytes)));
    }

    pub(crate) fn write_file(&mut self, file: Arc<File>, offset: u64, len: usize) {
        self.reference(Shared::File { file, offset, len });
    }

    fn reference(&mut self, shared: Shared) {
        if shared.len() > 0 {
            self.len += shared.len();
            self.shared.push((self.copied.len(), shared));
        }
    }

    /// The pieces from byte `skip` on, in order, none empty.
    fn pieces(&self, skip: usize) -> impl Iterator<Item = Piece<'_>> {
        let mut copied_from = 0;
        let shared = self.shared.iter().map(|(at, shared)| (*at, Some(shared)));
        let all = shared.chain([(self.copied.len(), None)]).flat_map(move |(at, shared)| {
            let copied = Piece::Copied(&self.copied[copied_from..at]);
            copied_from = at;
            [Some(copied), shared.map(|shared| Piece::Shared(shared, 0))]
        });
        let mut skip = skip;
        all.flatten().filter_map(move |piece| {
            let len = piece.len();
            let cut = skip.min(len);
            skip -= cut;
            (cut < len).then(|| piece.skip(cut))
        })
    }

    /// Appends to `out` up to `max` bytes of the output from byte `skip` on; returns
    /// how many.
    #[cfg(feature = "tls")]
    pub(crate) fn gather(&self, skip: usize, out: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        gather(self.pieces(skip), out, max)
    }

    /// Sends what the socket takes; returns the bytes sent.
    pub(crate) fn send(&self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        if self.shared.is_empty() {
            // The common case: one answer or a pipeline of copied ones, one send.
            return send_bytes(fd, &self.copied);
        }
        let mut sent = 0;
        while sent < self.len {
            let (n, offered) = send_some(fd, self.pieces(sent))?;
            sent += n;
            if n < offered {
                break;
            }
        }
        Ok(sent)
    }
}

/// Appends to `out` up to `max` bytes of `pieces`, in order, file ranges read with
/// `pread`; returns how many. For a TLS wire, which seals what it gathers into a
/// record: the bytes are copied once, into the record. A file shorter than its
/// range is an error, as for sendfile.
#[cfg(feature = "tls")]
fn gather<'a>(pieces: impl Iterator<Item = Piece<'a>>, out: &mut Vec<u8>, max: usize) -> io::Result<usize> {
    let mut gathered = 0;
    for piece in pieces {
        let take = piece.len().min(max - gathered);
        match piece.memory() {
            Some(bytes) => out.extend_from_slice(&bytes[..take]),
            None => {
                let start = out.len();
                piece.read_file_into(out, take);
                if out.len() - start < take {
                    out.truncate(start);
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "a file range past the file's end",
                    ));
                }
            }
        }
        gathered += take;
        if gathered == max {
            break;
        }
    }
    Ok(gathered)
}

/// Appends the bytes of `pieces` to `all`, file ranges read as they are now (up to
/// the file's end).
fn append<'a>(pieces: impl Iterator<Item = Piece<'a>>, all: &mut Vec<u8>) {
    for piece in pieces {
        match piece.memory() {
            Some(bytes) => all.extend_from_slice(bytes),
            None => piece.read_file_into(all, usize::MAX),
        }
    }
}

/// A piece of output: copied bytes, or a shared piece from an offset on.
enum Piece<'a> {
    Copied(&'a [u8]),
    Shared(&'a Shared, usize),
}

impl<'a> Piece<'a> {
    fn len(&self) -> usize {
        match *self {
            Piece::Copied(bytes) => bytes.len(),
            Piece::Shared(shared, from) => shared.len() - from,
        }
    }

    /// Its bytes, when they are in memory.
    fn memory(&self) -> Option<&'a [u8]> {
        match *self {
            Piece::Copied(bytes) => Some(bytes),
            Piece::Shared(Shared::Bytes(bytes), from) => Some(&bytes[from..]),
            Piece::Shared(Shared::File { .. }, _) => None,
        }
    }

    /// Appends up to `max` bytes of a file piece, as far as the file has them.
    fn read_file_into(&self, all: &mut Vec<u8>, max: usize) {
        if let Piece::Shared(Shared::File { file, offset, .. }, from) = *self {
            let (start, want) = (all.len(), self.len().min(max));
            all.resize(start + want, 0);
            let mut read = 0;
            while read < want {
                match file.read_at(&mut all[start + read..], offset + (from + read) as u64) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => read += n,
                }
            }
            all.truncate(start + read);
        }
    }

    /// The piece without its first `n` bytes.
    fn skip(self, n: usize) -> Piece<'a> {
        match self {
            Piece::Copied(bytes) => Piece::Copied(&bytes[n..]),
            Piece::Shared(shared, from) => Piece::Shared(shared, from + n),
        }
    }
}

/// Sends the first of `pieces` with one system call: up to 64 pieces in memory, or
/// [`MOST_PER_CALL`] bytes of them, with one `send` or `sendmsg` (with `MSG_MORE`
/// when more comes next), or up to [`MOST_PER_CALL`] bytes of a file range with
/// `sendfile`. Returns the bytes sent and the bytes offered: fewer sent means the
/// socket is full.
fn send_some<'a>(fd: BorrowedFd<'_>, pieces: impl Iterator<Item = Piece<'a>>) -> io::Result<(usize, usize)> {
    let mut pieces = pieces.peekable();
    let mut slices = [IoSlice::new(&[]); SLICES_PER_SEND];
    let (count, offered) = fill(&mut slices, &mut pieces);
    if count > 0 {
        // More follows at once, unless this call was cut at its most: held back by
        // MSG_MORE, the last packet of each such call costs more than it saves.
        let cut = offered == MOST_PER_CALL;
        let more = if pieces.peek().is_some() && !cut { More::Follows } else { More::Nothing };
        return Ok((send_slices(fd, &slices[..count], more)?, offered));
    }
    match pieces.next() {
        Some(Piece::Shared(Shared::File { file, offset, len }, from)) => {
            let offered = (len - from).min(MOST_PER_CALL);
            Ok((send_file(fd, file, offset + from as u64, offered)?, offered))
        }
        _ => Ok((0, 0)),
    }
}

/// Sends `len` bytes of `file` from `offset` on until they are sent or the socket
/// is full; returns the bytes sent. A short sendfile is called again: it may have
/// stopped at the file's end, which only the next call tells apart from a full
/// socket (and a full socket, unlike an end, brings an `EPOLLOUT`).
fn send_file(fd: BorrowedFd<'_>, file: &File, offset: u64, len: usize) -> io::Result<usize> {
    let mut sent = 0;
    while sent < len {
        match sys::sendfile(fd, file.as_fd(), offset + sent as u64, len - sent) {
            // The file is shorter than the range: what was promised cannot be sent.
            Ok(0) => {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a file range past the file's end"))
            }
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}

/// Fills `slices` from the pieces in memory at the front of `pieces`, up to
/// [`MOST_PER_CALL`] bytes (a piece cut there stays at the front); returns how many
/// slices it filled, and their bytes.
fn fill<'a, I: Iterator<Item = Piece<'a>>>(
    slices: &mut [IoSlice<'a>],
    pieces: &mut Peekable<I>,
) -> (usize, usize) {
    let (mut count, mut offered) = (0, 0);
    while count < slices.len() {
        let Some(bytes) = pieces.peek().and_then(Piece::memory) else { break };
        let room = MOST_PER_CALL - offered;
        if bytes.len() >= room {
            slices[count] = IoSlice::new(&bytes[..room]);
            return (count + 1, MOST_PER_CALL);
        }
        slices[count] = IoSlice::new(bytes);
        count += 1;
        offered += bytes.len();
        pieces.next();
    }
    (count, offered)
}

/// Sends what the socket takes of `bytes`, with one `send`; 0 when the socket is full.
pub(crate) fn send_bytes(fd: BorrowedFd<'_>, bytes: &[u8]) -> io::Result<usize> {
    send_slices(fd, &[IoSlice::new(bytes)], More::Nothing)
}

/// One `send` or `sendmsg`; 0 when the socket is full.
fn send_slices(fd: BorrowedFd<'_>, slices: &[IoSlice<'_>], more: More) -> io::Result<usize> {
    let result = match (slices, more) {
        ([one], More::Nothing) => sys::send(fd, one),
        _ => sys::send_vectored(fd, slices, more),
    };
    match result {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
        result => result,
    }
}

/// What a connection has not sent yet, and nothing else: a byte is dropped (a
/// shared piece released) as soon as the socket took it, so a connection that
/// streams for ever holds only what is unsent.
#[derive(Debug, Default)]
pub(crate) struct SendQueue {
    /// Copied bytes, in a ring: sending from the front costs no move.
    copied: VecDeque<u8>,
    /// Shared pieces in order, each after `copied_before` more copied bytes.
    shared: VecDeque<QueuedShared>,
    /// Copied bytes after the last shared piece.
    copied_after: usize,
    len: usize,
}

#[derive(Debug)]
struct QueuedShared {
    copied_before: usize,
    shared: Shared,
    sent: usize,
}

impl SendQueue {
    /// Bytes queued.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Queues `output` from byte `skip` on.
    pub(crate) fn push(&mut self, output: &Output, skip: usize) {
        for piece in output.pieces(skip) {
            self.len += piece.len();
            match piece {
                Piece::Copied(bytes) => self.push_copied(bytes),
                Piece::Shared(shared, sent) => {
                    let copied_before = std::mem::take(&mut self.copied_after);
                    self.shared.push_back(QueuedShared { copied_before, shared: shared.clone(), sent });
                }
            }
        }
    }

    /// Queues `bytes` as they are, copied.
    pub(crate) fn push_bytes(&mut self, bytes: &[u8]) {
        self.len += bytes.len();
        self.push_copied(bytes);
    }

    fn push_copied(&mut self, bytes: &[u8]) {
        self.copied.extend(bytes);
        self.copied_after += bytes.len();
    }

    /// Appends to `out` up to `max` queued bytes from byte `skip` on, leaving them
    /// queued ([`consume`](SendQueue::consume) drops them once sent); returns how
    /// many.
    #[cfg(feature = "tls")]
    pub(crate) fn gather(&self, skip: usize, out: &mut Vec<u8>, max: usize) -> io::Result<usize> {
        let mut skip = skip;
        let pieces = self.pieces().filter_map(|piece| {
            let cut = skip.min(piece.len());
            skip -= cut;
            (cut < piece.len()).then(|| piece.skip(cut))
        });
        gather(pieces, out, max)
    }

    /// Sends until the queue is empty or the socket is full; returns the bytes sent.
    pub(crate) fn flush(&mut self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        let mut sent = 0;
        while self.len > 0 {
            let (n, offered) = send_some(fd, self.pieces())?;
            self.consume(n);
            sent += n;
            if n < offered {
                break;
            }
        }
        Ok(sent)
    }

    /// Appends up to `max` queued bytes to `taken` (file ranges read as they are
    /// now), as a peer that reads them would, and drops them from the queue; returns
    /// how many: for tests and tools.
    pub(crate) fn take_into(&mut self, taken: &mut Vec<u8>, max: usize) -> usize {
        let mut all = Vec::new();
        append(self.pieces(), &mut all);
        all.truncate(max);
        self.consume(all.len());
        taken.extend_from_slice(&all);
        all.len()
    }

    /// The queued pieces, in order, none empty.
    fn pieces(&self) -> impl Iterator<Item = Piece<'_>> {
        let (front, back) = self.copied.as_slices();
        // `len` copied bytes from `start` on: up to two slices of the ring.
        let copied = |start: usize, len: usize| {
            let in_front = front.len().saturating_sub(start).min(len);
            let back_start = (start + in_front).saturating_sub(front.len());
            [&front[start.min(front.len())..][..in_front], &back[back_start..][..len - in_front]]
        };
        let mut at = 0;
        let shared =
            self.shared.iter().map(|queued| (queued.copied_before, Some((&queued.shared, queued.sent))));
        let all = shared.chain([(self.copied_after, None)]).flat_map(move |(copied_before, shared)| {
            let [first, second] = copied(at, copied_before);
            at += copied_before;
            [
                Some(Piece::Copied(first)),
                Some(Piece::Copied(second)),
                shared.map(|(s, sent)| Piece::Shared(s, sent)),
            ]
        });
        all.flatten().filter(|piece| piece.len() > 0)
    }

    /// Drops the first `n` bytes, which the socket took.
    pub(crate) fn consume(&mut self, mut n: usize) {
        self.len -= n;
        while n > 0 {
            let Some(front) = self.shared.front_mut() else {
                self.copied.drain(..n);
                self.copied_after -= n;
                return;
            };
            let copied = n.min(front.copied_before);
            self.copied.drain(..copied);
            front.copied_before -= copied;
            n -= copied;
            let shared = n.min(front.shared.len() - front.sent);
            front.sent += shared;
            n -= shared;
            if front.copied_before == 0 && front.sent == front.shared.len() {
                self.shared.pop_front();
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    /// A non-blocking socket with a small send buffer, so that a few kilobytes fill
    /// it, and its blocking peer.
    pub(in crate::reactor) fn small_send_buffer_pair() -> (UnixStream, UnixStream) {
        let (ours, peer) = UnixStream::pair().expect("a socket pair");
        ours.set_nonblocking(true).expect("non-blocking");
        socket2::SockRef::from(&ours).set_send_buffer_size(4096).expect("a small send buffer");
        (ours, peer)
    }

    /// What a peer reads of `output` sent `times` over to a socket whose buffer it
    /// fills: the first send, before the peer reads, takes part (asserted); the rest
    /// is queued, the later copies behind it, and the queue is flushed until empty
    /// while the peer reads.
    fn sent_through_a_full_socket(output: &Output, times: usize) -> Vec<u8> {
        let (writer, mut reader) = small_send_buffer_pair();
        let fd = writer.as_fd();
        // Nothing reads yet: the first send stops where the socket's buffer is full.
        let sent = output.send(fd).expect("the first send");
        assert!(sent < output.len(), "the socket took everything at once; the test needs it full");
        let reading = std::thread::spawn(move || {
            let mut all = Vec::new();
            reader.read_to_end(&mut all).map(|_| all)
        });
        let mut queue = SendQueue::default();
        queue.push(output, sent);
        assert_eq!(queue.len(), output.len() - sent);
        for _ in 1..times {
            queue.push(output, 0);
        }
        while queue.len() > 0 {
            queue.flush(fd).expect("a flush");
            std::thread::yield_now();
        }
        drop(writer);
        reading.join().expect("the reader").expect("reading")
    }

    /// Copied and shared pieces, in an order that puts shared pieces side by side and
    /// at both ends: 64 answers of a head and a body, between two shared ones.
    fn mixed_output(body: &Arc<[u8]>) -> Output {
        let mut output = Output::new();
        output.write_shared(body);
        for i in 0..64u8 {
            output.write(&[b'h', i, b'\n']);
            output.write_shared(body);
            if i % 8 == 0 {
                output.write_shared(body);
            }
        }
        output.write(b"tail");
        output
    }

    #[test]
    fn pieces_from_any_byte_on_are_the_rest_of_the_output() {
        let body: Arc<[u8]> = (0..100u8).collect::<Vec<_>>().into();
        let output = mixed_output(&body);
        let whole = output.to_vec();
        assert_eq!(whole.len(), output.len());
        for skip in [0, 1, 99, 100, 101, 102, 103, 5000, whole.len() - 1, whole.len()] {
            let rest: Vec<u8> =
                output.pieces(skip).flat_map(|piece| piece.memory().expect("in memory").to_vec()).collect();
            assert_eq!(rest, whole[skip..], "from byte {skip}");
            assert!(output.pieces(skip).all(|piece| piece.len() > 0), "an empty piece from {skip}");
        }
    }

    #[test]
    fn what_a_full_socket_refuses_is_queued_and_sent_later_byte_for_byte() {
        let body: Arc<[u8]> = (0..=255u8).cycle().take(70_000).collect::<Vec<_>>().into();
        let output = mixed_output(&body);
        let expected = output.to_vec();
        let received = sent_through_a_full_socket(&output, 2);
        assert_eq!(received.len(), 2 * expected.len());
        assert!(received[..expected.len()] == expected[..], "the first output, byte for byte");
        assert!(received[expected.len()..] == expected[..], "the second, after it");
    }

    #[test]
    fn output_the_socket_takes_whole_is_sent_whole_however_many_pieces_it_has() {
        // More pieces than one sendmsg takes (64 slices), all small.
        let body: Arc<[u8]> = b"0123456789".to_vec().into();
        let output = mixed_output(&body);
        let (writer, mut reader) = UnixStream::pair().expect("a socket pair");
        assert_eq!(output.send(writer.as_fd()).expect("a send"), output.len());
        drop(writer);
        let mut received = Vec::new();
        reader.read_to_end(&mut received).expect("reading");
        assert!(received == output.to_vec(), "byte for byte");
    }

    #[test]
    fn one_call_hands_the_socket_at_most_its_share_of_a_long_piece_and_the_rest_follows() {
        let long = MOST_PER_CALL * 3 / 2;
        let body: Arc<[u8]> = (0..long).map(|i| (i % 253) as u8).collect::<Vec<u8>>().into();
        let (file, bytes) = sealed_pattern(long);
        let mut output = Output::new();
        output.write(b"head ");
        output.write_shared(&body);
        output.write_file(file, 0, long);
        let (writer, mut reader) = UnixStream::pair().expect("a socket pair");
        writer.set_nonblocking(true).expect("non-blocking");
        // The socket has room for all three calls (a Unix socket takes 200 KiB).
        let mut calls = Vec::new();
        let mut sent = 0;
        while sent < output.len() {
            let (n, offered) = send_some(writer.as_fd(), output.pieces(sent)).expect("a call");
            assert_eq!(n, offered, "the socket has room");
            calls.push(n);
            sent += n;
        }
        let head_and_body = 5 + long;
        assert_eq!(
            calls,
            [MOST_PER_CALL, head_and_body - MOST_PER_CALL, MOST_PER_CALL, long - MOST_PER_CALL]
        );
        drop(writer);
        let mut received = Vec::new();
        reader.read_to_end(&mut received).expect("reading");
        let expected = [&b"head "[..], &body[..], &bytes[..]].concat();
        assert!(received == expected, "byte for byte");
    }

    #[test]
    fn a_queue_of_many_small_pieces_goes_out_byte_for_byte_many_at_a_time() {
        // Small shared pieces between copied ones: each sendmsg takes many of them.
        let body: Arc<[u8]> = b"0123456789".to_vec().into();
        let output = mixed_output(&body);
        let mut queue = SendQueue::default();
        queue.push(&output, 1);
        let (writer, mut reader) = UnixStream::pair().expect("a socket pair");
        assert_eq!(queue.flush(writer.as_fd()).expect("a flush"), output.len() - 1);
        drop(writer);
        let mut received = Vec::new();
        reader.read_to_end(&mut received).expect("reading");
        assert!(received == output.to_vec()[1..], "byte for byte");
    }

    #[test]
    fn a_queue_that_never_empties_holds_only_what_is_unsent() {
        // A peer that reads steadily but never quite catches up: 1000 bytes queued
        // for every 900 sent, 10,000 times over. What was sent must be let go.
        let mut output = Output::new();
        output.write(&[b'x'; 1000]);
        let mut queue = SendQueue::default();
        for round in 1..=10_000 {
            queue.push(&output, 0);
            queue.consume(900);
            assert_eq!(queue.len(), round * 100, "unsent bytes, after round {round}");
            let offered: usize = queue.pieces().map(|piece| piece.len()).sum();
            assert_eq!(offered, queue.len(), "what a flush offers, after round {round}");
            let held = queue.copied.capacity();
            assert!(held <= 2 * queue.len() + 4096, "{held} bytes held for {} unsent", queue.len());
        }
    }

    /// A sealed file of `len` distinct-ish bytes, and the bytes.
    fn sealed_pattern(len: usize) -> (Arc<File>, Vec<u8>) {
        let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8 ^ (i >> 12) as u8).collect();
        (Arc::new(sealed_file(&bytes[..]).expect("a sealed memfd")), bytes)
    }

    #[test]
    fn file_ranges_between_bytes_resume_where_a_full_socket_stopped() {
        let (file, bytes) = sealed_pattern(300_000);
        let body: Arc<[u8]> = vec![b'b'; 5000].into();
        let mut output = Output::new();
        for i in 0..3u64 {
            output.write(b"head\r\n");
            output.write_file(Arc::clone(&file), 1000 * i, 100_000);
            output.write_shared(&body);
        }
        output.write_file(Arc::clone(&file), 0, 1);
        output.write(b"tail");
        let expected = output.to_vec();
        let in_order = [
            &b"head\r\n"[..],
            &bytes[..100_000],
            &body,
            b"head\r\n",
            &bytes[1000..101_000],
            &body,
            b"head\r\n",
            &bytes[2000..102_000],
            &body,
            &bytes[..1],
            b"tail",
        ]
        .concat();
        assert!(expected == in_order, "to_vec reads the ranges in place");
        let received = sent_through_a_full_socket(&output, 1);
        assert!(received == expected, "byte for byte: {} of {} bytes", received.len(), expected.len());
    }

    #[cfg(feature = "tls")]
    #[test]
    fn gathered_a_record_at_a_time_file_ranges_come_in_order_each_piece_as_long_as_asked() {
        let (file, bytes) = sealed_pattern(100_000);
        let mut output = Output::new();
        output.write(b"head\r\n");
        output.write_file(Arc::clone(&file), 1000, 90_000);
        output.write(b"tail");
        let (mut gathered, mut records) = (Vec::new(), 0);
        while gathered.len() < output.len() {
            let n = output.gather(gathered.len(), &mut gathered, 16_384).expect("the file has the range");
            assert!(n == 16_384 || gathered.len() == output.len(), "record {records}: {n} bytes");
            records += 1;
        }
        assert!(gathered == [&b"head\r\n"[..], &bytes[1000..91_000], b"tail"].concat());
        assert_eq!(records, output.len().div_ceil(16_384));
        // A range past the file's end is an error when its bytes are gathered.
        let mut short = Output::new();
        short.write_file(file, 90_000, 20_000);
        assert_eq!(short.gather(0, &mut Vec::new(), 8192).expect("the first 8 KiB are there"), 8192);
        let error = short.gather(8192, &mut Vec::new(), 16_384).expect_err("2 KiB past the end");
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_file_that_ends_before_its_range_is_an_error_not_a_short_answer() {
        let (file, _) = sealed_pattern(1000);
        let mut output = Output::new();
        output.write(b"head");
        output.write_file(file, 500, 1000);
        let (writer, _reader) = UnixStream::pair().expect("a socket pair");
        let error = output.send(writer.as_fd()).expect_err("500 bytes promised past the end");
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_sealed_file_refuses_every_change() {
        let (file, bytes) = sealed_pattern(4096);
        let mut handle: &File = &file;
        assert!(std::io::Write::write(&mut handle, b"x").is_err(), "written");
        assert!(file.set_len(1).is_err(), "shrunk");
        assert!(file.set_len(8192).is_err(), "grown");
        let mut read = vec![0; bytes.len()];
        file.read_exact_at(&mut read, 0).expect("reading");
        assert!(read == bytes, "unchanged");
    }

    #[test]
    fn a_drained_queue_holds_no_shared_piece() {
        let body: Arc<[u8]> = vec![7; 10_000].into();
        let mut output = Output::new();
        output.write(b"head");
        output.write_shared(&body);
        let mut queue = SendQueue::default();
        queue.push(&output, 2);
        assert_eq!(Arc::strong_count(&body), 3, "the output's reference and the queue's");
        queue.consume(2 + 9_999);
        assert_eq!(Arc::strong_count(&body), 3, "one byte of it is still unsent");
        queue.consume(1);
        assert_eq!((queue.len(), Arc::strong_count(&body)), (0, 2), "released once sent");
    }
}
