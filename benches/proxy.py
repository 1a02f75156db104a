#!/usr/bin/env python3
"""HTTP reverse proxies side by side: percore's examples/proxy against nginx and HAProxy,
CPU per request, each with a pool of kept-alive backend connections.

Each proxy runs with one worker (or thread) pinned to --proxy-cpu (0), in front of a
`percore serve` backend (one worker) on --load-cpu (1), where wrk also runs. What is
measured is the proxy's own CPU (its process tree's utime + stime, from /proc, as
benches/e2e.py reads it) over the load, per request; wrk's p99; and the backend
connections the proxy opened per 1,000 requests (the backend, started afresh for each
measurement, counts the connections it accepted).

Proxies (--proxies picks; each started afresh for every measurement):
  percore      examples/proxy (--proxy PATH), one worker, --keepalive 64
  baseline     another proxy binary (--baseline PATH), the same flags
  nginx        nginx (Debian's nginx-light), one worker, access_log off, proxy_pass to
               an upstream with keepalive 64, proxy_http_version 1.1, Connection "";
               its defaults otherwise: a request body is read whole before it goes on
               (to a temporary file past 16 KiB), an answer buffered
  nginx-nobuf  the same with proxy_request_buffering off and proxy_buffering off:
               bodies streamed both ways, as percore and HAProxy do
  haproxy      HAProxy (Debian's), mode http, nbthread 1, http-reuse always

Shapes (--shapes picks), wrk -t1 -cN -d DURATION, keep-alive:
  ka-cN          hello responses from `percore serve`
  post1m-cN      a 1 MiB POST (Content-Length), answered "ok" by benches/body_backend.py
  chunked1m-cN   GET answered with 1 MiB in 16 KiB chunks by benches/body_backend.py
For the body shapes the bytes are checked once per proxy before the load: a 1 MiB
POST of random bytes reaches the backend with the same SHA-256, and the chunked
answer's content reaches the client as sent (the "bytes" column).

With --tls each proxy ends its clients' TLS (the tests' ECDSA P-256 certificate,
TLS 1.3 and 1.2) and speaks plain HTTP to the backend, and wrk loads it over https
(keep-alive: one handshake per connection): percore --tls-cert/--tls-key, nginx
`listen ... ssl` with ssl_session_tickets on, HAProxy `bind ... ssl crt`. The
keep-alive shapes only.

Rounds are interleaved, the proxies' order rotated each round; the table gives medians,
and each ratio (a proxy's CPU per request over nginx's and over HAProxy's) as the median
of its per-round ratios, with the rounds in brackets.

    python3 benches/proxy.py                 # after cargo build --release --examples
    python3 benches/proxy.py --rounds 2 --duration 3 --shapes ka-c100
    python3 benches/proxy.py --tls          # the proxies end TLS

Needs taskset, wrk, nginx and haproxy; builds nothing. Never needs root.
"""
import argparse, hashlib, os, re, shutil, socket, statistics, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e  # noqa: E402
import relay  # noqa: E402
from procs import free_port  # noqa: E402

PROXIES = ['percore', 'nginx', 'haproxy']
KNOWN = PROXIES + ['nginx-nobuf', 'baseline']
SHAPES = ['ka-c100', 'ka-c1000']
BODY_BACKEND = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'body_backend.py')
POST_LUA = 'wrk.method = "POST"\nwrk.body = string.rep("x", 1048576)\n'

KEEPALIVE = 64

NGINX_CONF = """daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile 65536;
pid {dir}/nginx.pid;
error_log {dir}/error.log error;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    client_max_body_size 2m;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    upstream backend {{
        server 127.0.0.1:{backend};
        keepalive {keepalive};
    }}
    server {{
        listen 127.0.0.1:{port}{ssl};
        {certificate}
        location / {{
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            {buffering}
        }}
    }}
}}
"""

HAPROXY_CONF = """global
    nbthread 1
    maxconn 8000
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    http-reuse always
frontend proxy
    bind 127.0.0.1:{port}{ssl}
    default_backend backend
backend backend
    server backend 127.0.0.1:{backend}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--duration', type=int, default=5, help='seconds of wrk per load (default 5)')
    ap.add_argument('--shapes', default=','.join(SHAPES))
    ap.add_argument('--proxies', default=','.join(PROXIES))
    ap.add_argument('--percore', default=e2e.PERCORE, help='the percore binary serving as backend')
    ap.add_argument('--proxy', default=os.path.join(e2e.ROOT, 'target', 'release', 'examples', 'proxy'))
    ap.add_argument('--baseline', help='another proxy binary, compared as `baseline`')
    ap.add_argument('--proxy-cpu', type=int, default=0)
    ap.add_argument('--load-cpu', type=int, default=1, help='CPU of the backend and wrk (default 1)')
    ap.add_argument('--tls', action='store_true', help='the proxies end their clients\' TLS (ka shapes only)')
    ap.add_argument('--json', help='also write every measurement to this file')
    args = ap.parse_args()
    proxies, shapes = args.proxies.split(','), args.shapes.split(',')
    if args.baseline and 'baseline' not in proxies:
        proxies.append('baseline')
    check(args, proxies, shapes)
    e2e.raise_open_files()
    results = []
    with tempfile.TemporaryDirectory(prefix='percore-proxy-') as workdir:
        post_lua = os.path.join(workdir, 'post.lua')
        with open(post_lua, 'w') as f:
            f.write(POST_LUA)
        env = dict(args=args, lua=None, post_lua=post_lua)  # what e2e.load needs
        for round_ in range(args.rounds):
            order = proxies[round_ % len(proxies):] + proxies[:round_ % len(proxies)]
            for shape in shapes:
                for proxy in order:
                    result = measure(proxy, shape, workdir, env)
                    result.update(proxy=proxy, shape=shape, round=round_)
                    results.append(result)
                    e2e.say(f'round {round_ + 1}/{args.rounds} {shape:8} {proxy:11} {result["rps"]:>10.0f} req/s  '
                            f'{result["cpu"]:7.2f} µs CPU/req  p99 {result["p99_ms"]:.2f} ms  backend conns '
                            f'{result["opened"]} ({result["per_1000"]:.2f}/1000)  errors {result["errors"]}'
                            + ('' if result['bytes_equal'] is None else f'  bytes equal {result["bytes_equal"]}'))
    e2e.report(results, args, table)


def check(args, proxies, shapes):
    for shape in shapes:
        if not re.fullmatch(r'(ka|post1m|chunked1m)-c\d+', shape):
            sys.exit(f'unknown shape {shape}: ka-cN, post1m-cN or chunked1m-cN')
        if args.tls and not shape.startswith('ka-'):
            sys.exit(f'--tls: the keep-alive shapes only, not {shape}')
    for proxy in proxies:
        if proxy not in KNOWN:
            sys.exit(f'unknown proxy {proxy}; known: {", ".join(KNOWN)}')
        binary = proxy_binary(proxy, args)
        if binary and not os.access(binary, os.X_OK):
            sys.exit(f'{proxy}: {binary} is not an executable (cargo build --release --examples?)')
        program = proxy.split('-')[0]
        if program in ('nginx', 'haproxy') and not shutil.which(program):
            sys.exit(f'{program} is not installed (apt-get install {"nginx-light" if program == "nginx" else program})')
    for tool in ['taskset', 'wrk']:
        if not shutil.which(tool):
            sys.exit(f'{tool} is needed')
    if not os.access(args.percore, os.X_OK):
        sys.exit(f'--percore {args.percore}: not an executable (cargo build --release)')


def proxy_binary(proxy, args):
    return {'percore': args.proxy, 'baseline': args.baseline}.get(proxy)


def start_proxy(proxy, backend, workdir, args):
    cpu, port = args.proxy_cpu, free_port()
    if proxy in ('nginx', 'nginx-nobuf'):
        d = os.path.join(workdir, proxy)
        os.makedirs(d, exist_ok=True)
        conf = os.path.join(d, 'nginx.conf')
        buffering = 'proxy_request_buffering off; proxy_buffering off;' if proxy == 'nginx-nobuf' else ''
        ssl, certificate = ('', '') if not args.tls else (
            ' ssl', f'ssl_certificate {e2e.CERT}; ssl_certificate_key {e2e.KEY}; ssl_protocols TLSv1.2 TLSv1.3; '
            'ssl_session_tickets on;')
        with open(conf, 'w') as f:
            f.write(NGINX_CONF.format(dir=d, port=port, backend=backend, keepalive=KEEPALIVE, buffering=buffering,
                                      ssl=ssl, certificate=certificate))
        return relay.start(proxy, ['nginx', '-p', d, '-c', conf], cpu, workdir, port)
    if proxy == 'haproxy':
        conf = os.path.join(workdir, 'haproxy.cfg')
        ssl = f' ssl crt {e2e.haproxy_pem(workdir)} alpn http/1.1' if args.tls else ''
        with open(conf, 'w') as f:
            f.write(HAPROXY_CONF.format(port=port, backend=backend, ssl=ssl))
        return relay.start(proxy, ['haproxy', '-db', '-f', conf], cpu, workdir, port)
    tls = ['--tls-cert', e2e.CERT, '--tls-key', e2e.KEY] if args.tls else []
    return relay.start(proxy, [proxy_binary(proxy, args), '--port', '0', '--workers', '1', '--cpus', str(cpu),
                               '--backend', f'127.0.0.1:{backend}', '--keepalive', str(KEEPALIVE)] + tls,
                       cpu, workdir)


def measure(proxy, shape, workdir, env):
    """One load through a fresh proxy to a fresh backend: the proxy's CPU per request
    (µs), the load's rate, p99 and errors, and the backend connections it opened."""
    args = env['args']
    bodies = not shape.startswith('ka-')
    if bodies:
        command = ['python3', BODY_BACKEND]
    else:
        command = [args.percore, 'serve', '--bind', '127.0.0.1', '--port', '0', '--workers', '1', '--cpus',
                   str(args.load_cpu)]
    backend_proc, backend = relay.start(f'backend-{proxy}', command, args.load_cpu, workdir)
    path, script = {'post1m': ('/sink', env['post_lua']), 'chunked1m': ('/chunked', None)}.get(
        shape.split('-')[0], (None, None))
    try:
        proc, port = start_proxy(proxy, backend, workdir, args)
        try:
            equal = check_bytes(port) if bodies else None
            scheme = 'https' if args.tls else 'http'
            warm = e2e.load(shape, port, env, warm_up=True, path=path, script=script, scheme=scheme)
            before = e2e.tree_cpu(proc.pid)
            done = e2e.load(shape, port, env, path=path, script=script, scheme=scheme)
            cpu = e2e.tree_cpu(proc.pid) - before
        finally:
            relay.stop(proc)
    finally:
        relay.stop(backend_proc)
    log = open(os.path.join(workdir, f'backend-{proxy}.log')).read()
    # The body backend does not count its connections.
    opened = None if bodies else sum(int(n) for n in re.findall(r'stopped: (\d+) connections', log))
    requests = warm['requests'] + done['requests']
    return dict(cpu=cpu * 1e6 / done['requests'] if done['requests'] else float('nan'), rps=done['rps'],
                p99_ms=done['p99_ms'], errors=done['errors'], opened=opened, bytes_equal=equal,
                per_1000=opened * 1000 / requests if requests and opened is not None else float('nan'))


def check_bytes(port):
    """Whether a 1 MiB POST of random bytes reaches the body backend whole (its
    SHA-256), and its 1 MiB chunked answer reaches the client as it was sent."""
    body = os.urandom(1 << 20)
    head = b'POST /digest HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\nConnection: close\r\n\r\n' % len(body)
    posted = exchange(port, head + body)
    chunked = exchange(port, b'GET /chunked HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n')
    sys.path.insert(0, os.path.dirname(BODY_BACKEND))
    import body_backend  # noqa: E402
    return posted == hashlib.sha256(body).hexdigest().encode() and chunked == body_backend.CONTENT


def exchange(port, request):
    """The content of the answer to `request` (sent on a new connection, read to the
    close): de-chunked if it came in chunks."""
    with socket.create_connection(('127.0.0.1', port), timeout=30) as s:
        s.sendall(request)
        answer = b''
        while chunk := s.recv(1 << 16):
            answer += chunk
    head, _, body = answer.partition(b'\r\n\r\n')
    if b'transfer-encoding: chunked' not in head.lower():
        return body
    content = b''
    while True:
        size_line, _, body = body.partition(b'\r\n')
        size = int(size_line.split(b';')[0], 16)
        if size == 0:
            return content
        content, body = content + body[:size], body[size + 2:]


def bytes_equal(results):
    """Whether every check of a proxy's bytes found them equal (None: not checked)."""
    checks = [r['bytes_equal'] for r in results if r['bytes_equal'] is not None]
    return all(checks) if checks else None


def table(results, args):
    """One markdown table: medians per shape and proxy, and the per-round ratios."""
    def of(proxy, shape):
        return [r for r in results if r['proxy'] == proxy and r['shape'] == shape]

    def ratio(mine, theirs):
        theirs = {r['round']: r['cpu'] for r in theirs}
        ratios = [r['cpu'] / theirs[r['round']] for r in mine if theirs.get(r['round'])]
        return f'{statistics.median(ratios):.2f} ({" ".join(f"{x:.2f}" for x in ratios)})' if ratios else '–'

    out = [f'{args.rounds} rounds; proxies on CPU {args.proxy_cpu} (one worker/thread'
           + (', ending their clients\' TLS' if args.tls else '') + '), backend (percore serve, '
           f'or benches/body_backend.py for the body shapes) '
           f'and wrk -t1 on CPU {args.load_cpu}, {args.duration} s a load; medians; a ratio is the proxy\'s CPU per '
           f'request over the other\'s, the median of its per-round ratios (the rounds in brackets).', '',
           '| shape | proxy | CPU/req | req/s | p99 | backend conns /1000 req | errors | bytes | / nginx | / nginx-nobuf '
           '| / haproxy |',
           '|---|---|---|---|---|---|---|---|---|---|---|']
    for shape in dict.fromkeys(r['shape'] for r in results):
        for proxy in dict.fromkeys(r['proxy'] for r in results if r['shape'] == shape):
            mine = of(proxy, shape)
            row = [shape, proxy, f'{statistics.median(r["cpu"] for r in mine):.2f} µs',
                   f'{statistics.median(r["rps"] for r in mine):,.0f}',
                   f'{statistics.median(r["p99_ms"] for r in mine):.2f} ms',
                   f'{statistics.median(r["per_1000"] for r in mine):.2f}', str(sum(r['errors'] for r in mine)),
                   {None: '–', True: 'equal', False: 'DIFFER'}[bytes_equal(mine)],
                   ratio(mine, of('nginx', shape)) if proxy != 'nginx' else '–',
                   ratio(mine, of('nginx-nobuf', shape)) if proxy != 'nginx-nobuf' else '–',
                   ratio(mine, of('haproxy', shape)) if proxy != 'haproxy' else '–']
            out.append('| ' + ' | '.join(row) + ' |')
    return '\n'.join(out)


if __name__ == '__main__':
    main()
