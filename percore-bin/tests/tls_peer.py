#!/usr/bin/env python3
"""TLS clients for percore-bin/tests/tls.rs, on Python's ssl module (OpenSSL): each
mode talks to an HTTPS hello server on 127.0.0.1:PORT, trusting the test CA, and
prints what it saw, one fact a line, for the test to read. Run by hand:

    python3 percore-bin/tests/tls_peer.py MODE PORT CA_FILE

Modes:
  pipeline  three requests in one write on a TLS 1.3 connection: their answers
  split     one request written in three records
  resume    a second connection resumes the first one's session by its ticket
  drip      a ClientHello (captured from ssl with a MemoryBIO) sent a byte a write
  oversize  after the handshake, a record header claiming 40,000 bytes
  alert     a fatal alert from the client mid-connection, another connection open
  cut       a request answered, then the connection cut without close_notify
"""

import socket
import ssl
import sys
import time

REQUEST = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
CLOSE = b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
TIMEOUT = 10


def context(ca):
    """TLS 1.3 alone, trusting `ca`, offering http/1.1."""
    ctx = ssl.create_default_context(cafile=ca)
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def connect(port, ctx, session=None):
    """A TLS connection; the end of the stream without close_notify is an error."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    return ctx.wrap_socket(raw, server_hostname="localhost", session=session, suppress_ragged_eofs=False)


def read_to_close(conn):
    """Every byte `conn` gives until its end."""
    data = b""
    while piece := conn.recv(65536):
        data += piece
    return data


def read_answer(conn):
    """One hello answer: its head and its 14-byte body."""
    data = b""
    while not data.endswith(b"hello, world!\n"):
        piece = conn.recv(65536)
        if not piece:
            raise EOFError("closed after %r" % data)
        data += piece
    return data


def say(*words):
    print(*words, flush=True)


def tell(what, data, methods):
    """Says each answer in `data` to the requests of `methods`, in order, a line
    each: its status line and its body's length (Content-Length; none after HEAD);
    then what is left over, if anything."""
    for method in methods:
        head, sep, data = data.partition(b"\r\n\r\n")
        if not sep:
            return say(what, "unframed", head)
        lines = head.decode().split("\r\n")
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.lower() == "content-length" and method != "HEAD":
                length = int(value)
        say(what, lines[0], "body", length)
        data = data[length:]
    if data:
        say(what, "left over", data)


def pipeline(port, ca):
    conn = connect(port, context(ca))
    say("version", conn.version(), "alpn", conn.selected_alpn_protocol())
    # One write: GET, HEAD and a method it refuses, the last asking to close.
    conn.sendall(REQUEST + b"HEAD / HTTP/1.1\r\nHost: localhost\r\n\r\n"
                 + b"DELETE / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    tell("answer", read_to_close(conn), ["GET", "HEAD", "DELETE"])
    say("closed with close_notify")


def split(port, ca):
    conn = connect(port, context(ca))
    # Each write is a record of its own; the pauses let them arrive apart.
    for piece in [b"GET / HT", b"TP/1.1\r\nHost: loc", b"alhost\r\nConnection: close\r\n\r\n"]:
        conn.sendall(piece)
        time.sleep(0.05)
    tell("answer", read_to_close(conn), ["GET"])


def resume(port, ca):
    ctx = context(ca)
    first = connect(port, ctx)
    first.sendall(REQUEST)
    read_answer(first)
    # The ticket came after the handshake; it is the session's once read.
    session = first.session
    say("first reused", first.session_reused, "ticket", session.has_ticket)
    first.close()
    second = connect(port, ctx, session=session)
    second.sendall(CLOSE)
    say("second reused", second.session_reused)
    tell("answer", read_to_close(second), ["GET"])


class Pump:
    """An ssl object on memory BIOs over a socket: what it writes is sent as we
    choose, and what it reads is what we hand it."""

    def __init__(self, port, ca):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.tls = context(ca).wrap_bio(self.incoming, self.outgoing, server_hostname="localhost")

    def flush(self, drip=False):
        """Sends what the ssl object wrote (with `drip`, a byte a write); returns
        how many bytes."""
        data = self.outgoing.read()
        for piece in [data[i:i + 1] for i in range(len(data))] if drip else [data]:
            self.sock.sendall(piece)
            if drip:
                time.sleep(0.002)
        return len(data)

    def receive(self):
        """One read of the socket into the ssl object; False at the end of the stream."""
        data = self.sock.recv(65536)
        if not data:
            self.incoming.write_eof()
            return False
        self.incoming.write(data)
        return True

    def handshake(self, drip=False):
        """The handshake; with `drip`, the ClientHello goes a byte a write."""
        try:
            self.tls.do_handshake()
        except ssl.SSLWantReadError:
            sent = self.flush(drip)
            if drip:
                say("client hello of", sent, "bytes sent a byte a write")
            while True:
                if not self.receive():
                    raise EOFError("closed during the handshake")
                try:
                    self.tls.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    self.flush()
        self.flush()

    def sendall(self, data):
        self.tls.write(data)
        self.flush()

    def recv(self, size):
        """Plaintext, as a socket's recv gives it: b"" at the end of the stream."""
        while True:
            try:
                return self.tls.read(size)
            except ssl.SSLWantReadError:
                if not self.receive():
                    return b""

    def read_raw_to_close(self):
        """Raw bytes until the server closes (a reset ends them too)."""
        try:
            return read_to_close(self.sock), "closed"
        except ConnectionResetError:
            return b"", "reset"

    def opened(self, data):
        """What the ssl object makes of `data`, the last bytes from the server."""
        self.incoming.write(data)
        self.incoming.write_eof()
        try:
            self.tls.read(65536)
            return "nothing"
        except ssl.SSLError as e:
            return e.reason or str(e)


def answered(port, ca):
    """A Pump past its handshake and a request's answer, and the answer: the
    server's tickets are read with it, so that what comes next is sealed under the
    sequence number the ssl object expects."""
    pump = Pump(port, ca)
    pump.handshake()
    pump.sendall(REQUEST)
    return pump, read_answer(pump)


def drip(port, ca):
    pump = Pump(port, ca)
    pump.handshake(drip=True)
    say("version", pump.tls.version())
    pump.sendall(REQUEST)
    tell("answer", read_answer(pump), ["GET"])


def oversize(port, ca):
    pump, _ = answered(port, ca)
    # Application data, TLS 1.2 on the wire, 40,000 bytes: more than any record.
    pump.sock.sendall(bytes([23, 3, 3, 40000 >> 8, 40000 & 0xff]) + bytes(100))
    data, end = pump.read_raw_to_close()
    say("server sent", len(data), "bytes, then", end)
    say("client read", pump.opened(data))


def alert(port, ca):
    other = connect(port, context(ca))
    other.sendall(REQUEST)
    read_answer(other)
    pump, _ = answered(port, ca)
    pump.sendall(REQUEST)
    # The answer's record, one byte of its ciphertext changed: the client's ssl
    # refuses it with a fatal alert (bad_record_mac), which it writes for the server.
    record = b""
    while len(record) < 5 or len(record) < 5 + int.from_bytes(record[3:5], "big"):
        record += pump.sock.recv(65536)
    say("client read", pump.opened(record[:-1] + bytes([record[-1] ^ 1])))
    say("client alert", pump.flush(), "bytes")
    data, end = pump.read_raw_to_close()
    say("server sent", len(data), "bytes, then", end)
    # The other connection goes on.
    other.sendall(CLOSE)
    tell("other answer", read_to_close(other), ["GET"])


def cut(port, ca):
    pump, answer = answered(port, ca)
    tell("answer", answer, ["GET"])
    # A close of the socket alone: no close_notify.
    pump.sock.close()
    say("cut")
    conn = connect(port, context(ca))
    conn.sendall(CLOSE)
    tell("next answer", read_to_close(conn), ["GET"])


MODES = {f.__name__: f for f in [pipeline, split, resume, drip, oversize, alert, cut]}

if __name__ == "__main__":
    mode, port, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    MODES[mode](port, ca)
