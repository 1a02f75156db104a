#!/usr/bin/env python3
"""A backend for the proxy's tests (percore-bin/tests/proxy.rs): the answers
`percore serve` never gives, one per path, on raw sockets so that every byte is
the test's.

    /echo          200: the head received, then the body received (decoded if
                   chunked); X-Body-Framing and X-Body-Length say how it came
    /chunked       200, chunked, with a trailer
    /interim       100 Continue and 103 Early Hints, then 200
    /until-close   200 delimited by the close
    /204, /304     no body
    /close-early   part of a head, then the close
    /cut           a head for 100 bytes, 10 of them, then the close
    /hang          nothing, until the proxy closes
    /once          200, kept alive; the connection's next request is closed
                   unanswered (a keep-alive timeout crossing it)
    /accepts       200: how many connections were accepted so far
    /big?n=N       200 with N bytes of body
    /log           200: the target of each request answered so far, a line each
                   (not /log's own)

With --crlf-size-lines it reads a chunked body as gunicorn 23 and other older
parsers do: a chunk-size line ends only at CRLF, and what follows a `;` in it is
not looked at, so a bare LF there hides what comes after it in an extension.

Prints `listening on 127.0.0.1:PORT` on stderr once it accepts, as percore does.
"""

import socket
import sys
import threading

accepted = 0
accepted_lock = threading.Lock()
answered = []
crlf_size_lines = "--crlf-size-lines" in sys.argv[1:]


def read_head(reader):
    """The request head's lines, as bytes with their line ends; None at the close."""
    lines = []
    while True:
        line = reader.readline(65536)
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            return lines
        lines.append(line)


def fields(lines):
    """The header fields, names in lower case."""
    out = []
    for line in lines[1:]:
        name, _, value = line.decode("latin-1").partition(":")
        out.append((name.strip().lower(), value.strip()))
    return out


def read_body(reader, headers):
    """The request body (decoded if chunked) and how it was framed."""
    named = dict(headers)
    if named.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int(size_line(reader).split(b";")[0].strip(), 16)
            if size == 0:
                while reader.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return body, "chunked"
            body += reader.read(size)
            reader.readline()
    length = int(named.get("content-length", "0"))
    return reader.read(length), "length" if length else "none"


def size_line(reader):
    """A chunk-size line: up to its LF, or with --crlf-size-lines up to a CRLF."""
    line = reader.readline()
    while crlf_size_lines and line and not line.endswith(b"\r\n"):
        line += reader.readline()
    return line


def answer(conn, method, status, body=b"", extra=b""):
    head = b"HTTP/1.1 %s\r\nContent-Length: %d\r\n%s\r\n" % (status, len(body), extra)
    conn.sendall(head if method == "HEAD" else head + body)


def serve(conn):
    reader = conn.makefile("rb")
    close_next = False
    while True:
        lines = read_head(reader)
        if lines is None or close_next:
            return
        method, target, version = lines[0].decode("latin-1").split()
        headers = fields(lines)
        body, framing = read_body(reader, headers)
        path = target.split("?")[0]
        if path != "/log":
            answered.append(target)
        if path == "/echo":
            extra = b"X-Body-Framing: %s\r\nX-Body-Length: %d\r\n" % (framing.encode(), len(body))
            answer(conn, method, b"200 OK", b"".join(lines) + b"\r\n" + body, extra)
        elif path == "/chunked":
            head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Trailer\r\n\r\n"
            body = b"7\r\nhello, \r\n8;ext=1\r\nchunked \r\n6\r\nworld\n\r\n0\r\nX-Trailer: yes\r\n\r\n"
            conn.sendall(head if method == "HEAD" else head + body)
        elif path == "/interim":
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            conn.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n")
            answer(conn, method, b"200 OK", b"final\n")
        elif path == "/until-close":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the close\n")
            return
        elif path == "/204":
            conn.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")
        elif path == "/304":
            conn.sendall(b'HTTP/1.1 304 Not Modified\r\nETag: "x"\r\n\r\n')
        elif path == "/close-early":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Len")
            return
        elif path == "/cut":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
            return
        elif path == "/hang":
            while reader.read(1):
                pass
            return
        elif path == "/once":
            answer(conn, method, b"200 OK", b"once\n")
            close_next = True
        elif path == "/log":
            answer(conn, method, b"200 OK", "".join(t + "\n" for t in answered).encode())
        elif path == "/accepts":
            with accepted_lock:
                count = accepted
            answer(conn, method, b"200 OK", b"%d\n" % count)
        elif path == "/big":
            length = int(target.split("n=")[1])
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % length)
            block = b"x" * 65536
            while length > 0:
                conn.sendall(block[: min(length, len(block))])
                length -= len(block)
        else:
            answer(conn, method, b"404 Not Found", b"no such path\n")
        if version == "HTTP/1.0" and dict(headers).get("connection", "").lower() != "keep-alive":
            return


def run(conn):
    try:
        serve(conn)
    except (OSError, ValueError):
        pass
    finally:
        conn.close()


def main():
    global accepted
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    print("listening on 127.0.0.1:%d" % listener.getsockname()[1], file=sys.stderr, flush=True)
    while True:
        conn, _ = listener.accept()
        with accepted_lock:
            accepted += 1
        threading.Thread(target=run, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
