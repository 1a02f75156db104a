#!/usr/bin/env python3
"""A backend for benches/proxy.py's body shapes: what `percore serve` does not do.

    POST /sink         reads the body (a length or chunks) and drops it: 200 "ok"
    POST /digest       reads the body: 200 with its SHA-256 in hex, to check a proxy
                       passed it whole
    GET /chunked       1 MiB in 16 KiB chunks (the bytes of `content()`)

Keep-alive, a thread per connection, raw sockets: a body is read with recv_into a
buffer kept for the connection, so that Python's work per request is small beside a
proxy's. Prints `listening on 127.0.0.1:PORT` on stderr, as percore does.

    python3 benches/body_backend.py [--port N]
"""
import argparse
import hashlib
import socket
import sys
import threading

SIZE = 1 << 20
CHUNK = 16 << 10


def content():
    """The 1 MiB of GET /chunked: bytes that do not repeat within a chunk."""
    return bytes((i * 7 + i // 251) % 256 for i in range(SIZE))


CONTENT = content()
CHUNKED = b'HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n' + \
    b''.join(b'%x\r\n' % len(CONTENT[at:at + CHUNK]) + CONTENT[at:at + CHUNK] + b'\r\n'
             for at in range(0, SIZE, CHUNK)) + b'0\r\n\r\n'


class Conn:
    def __init__(self, sock):
        self.sock, self.buf, self.scratch = sock, b'', bytearray(256 << 10)

    def fill(self):
        n = self.sock.recv_into(self.scratch)
        if not n:
            raise EOFError
        self.buf += self.scratch[:n]

    def line(self):
        while b'\n' not in self.buf:
            self.fill()
        line, _, self.buf = self.buf.partition(b'\n')
        return line.rstrip(b'\r')

    def take(self, n, digest):
        """Reads n bytes of body into `digest` (None: dropped)."""
        while n:
            if not self.buf:
                self.fill()
            piece, self.buf = self.buf[:n], self.buf[n:]
            if digest:
                digest.update(piece)
            n -= len(piece)

    def body(self, fields, digest):
        if fields.get(b'transfer-encoding', b'').lower() == b'chunked':
            while True:
                size = int(self.line().split(b';')[0], 16)
                if size == 0:
                    while self.line():
                        pass
                    return
                self.take(size, digest)
                self.line()
        self.take(int(fields.get(b'content-length', b'0')), digest)


def serve(sock):
    conn = Conn(sock)
    try:
        while True:
            method, target, _ = conn.line().split(b' ', 2)
            fields = {}
            while line := conn.line():
                name, _, value = line.partition(b':')
                fields[name.strip().lower()] = value.strip()
            digest = hashlib.sha256() if target == b'/digest' else None
            conn.body(fields, digest)
            if method == b'GET' and target == b'/chunked':
                sock.sendall(CHUNKED)
                continue
            answer = digest.hexdigest().encode() if digest else b'ok'
            sock.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s' % (len(answer), answer))
    except (EOFError, OSError, ValueError):
        pass
    finally:
        sock.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--port', type=int, default=0)
    args = ap.parse_args()
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(('127.0.0.1', args.port))
    listener.listen(1024)
    print('listening on 127.0.0.1:%d' % listener.getsockname()[1], file=sys.stderr, flush=True)
    while True:
        sock, _ = listener.accept()
        threading.Thread(target=serve, args=(sock,), daemon=True).start()


if __name__ == '__main__':
    main()
