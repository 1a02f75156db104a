#!/usr/bin/env python3
"""HTTPS servers side by side: `percore serve --tls-cert --tls-key` against nginx, HAProxy
and the TLS floor, CPU per response and memory per idle connection.

Each server runs one worker (or thread) pinned to --server-cpu (0), with the tests'
certificate (tests/tls/localhost.pem, ECDSA P-256), TLS 1.3 and 1.2; the load runs on
--load-cpu (1). The figure is the server's own CPU (its process tree's utime + stime,
from /proc, as benches/e2e.py reads it) per response, over the load.

Servers (--servers picks; each started afresh for every measurement):
  percore   target/release/percore serve (--percore PATH), one worker, --idle-timeout 0
  floor     benches/floor/tls, built here with the provider percore uses (aws-lc-rs):
            one epoll loop on rustls's buffered API, a fixed answer, no HTTP work
  nginx     nginx (nginx-light, OpenSSL), one worker, `listen ... ssl`,
            ssl_session_tickets on, `return 200`
  haproxy   HAProxy (OpenSSL), nbthread 1, `bind ... ssl crt`, `http-request return`
            (no body shape: it serves no files; no idle shape past the connections
            the open-file limit lets it take: two files each, 9,990 at a limit of 20,000)

Shapes (--shapes picks):
  ka-cN       wrk -t1 -cN over https, keep-alive: one handshake per connection
  close-c50   ab -c50 over https without -k: a full handshake per request
  resume-c50  percore bench --close --tls-resume -c 50: a handshake per request, resumed
              with the server's session ticket
  body1m-cN   wrk -t1 -cN over https, a 1 MiB body (random bytes in a file: percore
              --body-file, nginx an alias of that file)
  flood-c100  wrk -t1 -c100 keep-alive while percore bench --close opens new TLS
              connections at --flood-rate per second (a full handshake and a request
              each): the keep-alive clients' p99 and the server's CPU per response
  idle-N      N idle TLS keep-alive connections (Python's ssl), each answered once: the
              server's RSS growth per connection (bytes), from /proc

Rounds are interleaved, the servers' order rotated each round; the table gives medians,
and each ratio (a server's figure over nginx's, HAProxy's, the floor's) as the median of
its per-round ratios, with the rounds in brackets.

    python3 benches/tls.py                  # after cargo build --release
    python3 benches/tls.py --rounds 2 --duration 3 --shapes ka-c100,idle-2000

Needs taskset, wrk, ab, nginx and haproxy (skipping, and saying so, those missing);
builds only the floor. Never needs root.
"""
import argparse, json, os, re, resource, shutil, socket, ssl, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e  # noqa: E402
import relay  # noqa: E402
from procs import free_port, tree_pids  # noqa: E402

SERVERS = ['percore', 'floor', 'nginx', 'haproxy']
SHAPES = ['ka-c100', 'ka-c1000', 'close-c50', 'resume-c50', 'body1m-c10', 'flood-c100', 'idle-2000',
          'idle-10000']
CERTS, CERT, KEY = e2e.CERTS, e2e.CERT, e2e.KEY
FLOOR = os.path.join(e2e.ROOT, 'benches', 'floor', 'tls')
AB_REQUESTS = 5000
HELLO = 'hello, world!\\n'

NGINX_CONF = """daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile 65536;
pid {dir}/nginx.pid;
error_log {dir}/error.log crit;
events {{ worker_connections 65536; use epoll; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_tickets on;
    server {{
        listen 127.0.0.1:{port} ssl backlog=4096;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        location / {{ default_type text/plain; return 200 "{hello}"; }}
        location = /body {{ default_type application/octet-stream; alias {body}; }}
    }}
}}
"""

HAPROXY_CONF = """global
    nbthread 1
    maxconn {maxconn}
    ssl-default-bind-options ssl-min-ver TLSv1.2
defaults
    mode http
    timeout client 60s
frontend tls
    bind 127.0.0.1:{port} ssl crt {pem} alpn http/1.1
    http-request return status 200 content-type text/plain string "{hello}"
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--duration', type=int, default=5, help='seconds of wrk per load (default 5)')
    ap.add_argument('--shapes', default=','.join(SHAPES), help=f'default and known: {",".join(SHAPES)}')
    ap.add_argument('--servers', default=','.join(SERVERS), help=f'default and known: {",".join(SERVERS)}')
    ap.add_argument('--percore', default=e2e.PERCORE, help='the percore binary (its bench loads resume-c50 '
                    'and flood-c100)')
    ap.add_argument('--flood-rate', type=int, default=500, help='new connections per second in flood-c100')
    ap.add_argument('--server-cpu', type=int, default=0)
    ap.add_argument('--load-cpu', type=int, default=1)
    ap.add_argument('--json', help='also write every measurement to this file')
    args = ap.parse_args()
    servers, shapes = check(args)
    e2e.raise_open_files()
    results = []
    with tempfile.TemporaryDirectory(prefix='percore-tls-') as workdir:
        if 'floor' in servers:
            build_floor()
        body = os.path.join(workdir, 'body')
        with open(body, 'wb') as f:
            f.write(os.urandom(1 << 20))
        env = dict(args=args, lua=None, workdir=workdir, body=body)
        for round_ in range(args.rounds):
            order = servers[round_ % len(servers):] + servers[:round_ % len(servers)]
            for shape in shapes:
                for server in order:
                    if not serves(server, shape):
                        continue
                    result = measure(server, shape, env)
                    result.update(server=server, shape=shape, round=round_)
                    results.append(result)
                    e2e.say(f'round {round_ + 1}/{args.rounds} {shape:10} {server:8} {summary(result)}')
    e2e.report(results, args, table)


def serves(server, shape):
    """HAProxy and the floor serve no files; HAProxy holds no more connections than
    haproxy_maxconn()."""
    if shape.startswith('body'):
        return server not in ('floor', 'haproxy')
    return not (server == 'haproxy' and shape.startswith('idle-') and int(shape[5:]) > haproxy_maxconn() - 10)


def haproxy_maxconn():
    """What HAProxy takes under the open-file limit: two files per connection (one kept
    for a backend), and a few of its own."""
    return min(20000, (resource.getrlimit(resource.RLIMIT_NOFILE)[1] - 20) // 2)


def check(args):
    servers, shapes = args.servers.split(','), args.shapes.split(',')
    for server in servers:
        if server not in SERVERS:
            sys.exit(f'unknown server {server}; known: {", ".join(SERVERS)}')
    for shape in shapes:
        if not re.fullmatch(r'(ka|body1m)-c\d+|close-c50|resume-c50|flood-c100|idle-\d+', shape):
            sys.exit(f'unknown shape {shape}; known: {", ".join(SHAPES)} (any count after ka-c, body1m-c, idle-)')
    tools = {'taskset': 'util-linux', 'wrk': 'wrk', 'ab': 'apache2-utils', 'nginx': 'nginx-light',
             'haproxy': 'haproxy', 'cargo': 'rustup'}
    needed = {'taskset'} | {tool for shape in shapes for tool, prefix in
                            [('wrk', 'ka'), ('wrk', 'body'), ('wrk', 'flood'), ('ab', 'close')]
                            if shape.startswith(prefix)}
    for tool in sorted(needed):
        if not shutil.which(tool):
            sys.exit(f'{tool} is needed (apt-get install {tools[tool]})')
    kept = []
    for server in servers:
        program = {'floor': 'cargo'}.get(server, server if server != 'percore' else None)
        if program and not shutil.which(program):
            e2e.say(f'skipped {server}: {program} is not installed ({tools[program]})')
            continue
        kept.append(server)
    if not os.access(args.percore, os.X_OK):
        sys.exit(f'--percore {args.percore}: not an executable (cargo build --release)')
    return kept, shapes


def build_floor():
    subprocess.run(['cargo', 'build', '--release', '--quiet', '--manifest-path', os.path.join(FLOOR, 'Cargo.toml'),
                    '--no-default-features', '--features', 'aws'], check=True)


def start(server, shape, env):
    """Starts `server` pinned to the server CPU; returns it and its port."""
    args, workdir = env['args'], env['workdir']
    port = free_port()
    if server == 'percore':
        cmd = [args.percore, 'serve', '--bind', '127.0.0.1', '--port', str(port), '--workers', '1', '--no-pin',
               '--idle-timeout', '0', '--tls-cert', CERT, '--tls-key', KEY]
        cmd += ['--body-file', env['body']] if shape.startswith('body') else []
    elif server == 'floor':
        cmd = [os.path.join(FLOOR, 'target', 'release', 'floor-tls'), str(port), CERT, KEY]
    elif server == 'nginx':
        d = os.path.join(workdir, 'nginx')
        os.makedirs(d, exist_ok=True)
        conf = os.path.join(d, 'nginx.conf')
        with open(conf, 'w') as f:
            f.write(NGINX_CONF.format(dir=d, port=port, cert=CERT, key=KEY, body=env['body'], hello=HELLO))
        cmd = ['nginx', '-p', d, '-c', conf]
    else:
        pem, conf = e2e.haproxy_pem(workdir), os.path.join(workdir, 'haproxy.cfg')
        with open(conf, 'w') as f:
            f.write(HAPROXY_CONF.format(port=port, pem=pem, hello=HELLO, maxconn=haproxy_maxconn()))
        cmd = ['haproxy', '-db', '-f', conf]
    return relay.start(server, cmd, args.server_cpu, workdir, port)


def measure(server, shape, env):
    proc, port = start(server, shape, env)
    try:
        if shape.startswith('idle-'):
            return idle_connections(proc, port, int(shape[5:]))
        load(shape, port, env, warm_up=True)
        before = e2e.tree_cpu(proc.pid)
        result = load(shape, port, env)
        cpu = e2e.tree_cpu(proc.pid) - before
        result['cpu_us'] = cpu * 1e6 / result['requests'] if result['requests'] else float('nan')
        return result
    finally:
        relay.stop(proc)


def load(shape, port, env, warm_up=False):
    """The shape's load: requests, requests/s, p99 (ms), errors, and what was negotiated
    where the generator says."""
    args = env['args']
    url = f'https://127.0.0.1:{port}' + ('/body' if shape.startswith('body') else '/')
    pin = ['taskset', '-c', str(args.load_cpu)]
    seconds = 1 if warm_up else args.duration
    if shape == 'close-c50':
        out = e2e.run(pin + ['ab', '-q', '-n', str(AB_REQUESTS // 10 if warm_up else AB_REQUESTS), '-c', '50', url],
                      300)
        p99 = re.search(r'\n\s+99%\s+(\d+)', out)
        return dict(requests=int(re.search(r'Complete requests:\s+(\d+)', out).group(1)),
                    rps=float(re.search(r'Requests per second:\s+([\d.]+)', out).group(1)),
                    p99_ms=float(p99.group(1)) if p99 else None,
                    errors=int(re.search(r'Failed requests:\s+(\d+)', out).group(1)),
                    negotiated=re.search(r'SSL/TLS Protocol:\s+(\S+)', out).group(1))
    if shape == 'resume-c50':
        return bench(pin + [args.percore, 'bench', '--close', '--tls-resume', '--insecure', '-c', '50',
                            '-d', f'{seconds}s'], url)
    if shape == 'flood-c100':
        flood = subprocess.Popen(pin + [args.percore, 'bench', '--close', '--insecure', '-c', '10', '--rate',
                                        str(args.flood_rate), '-d', f'{seconds + 2}s', '--json', url],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            time.sleep(1)
            result = e2e.load('ka-c100', port, env, warm_up=warm_up, path='/', scheme='https')
        finally:
            out, _ = flood.communicate(timeout=seconds + 60)
        flooded = bench_figures(out)
        result['requests'] += flooded['requests'] * seconds // (seconds + 2)
        result['flood_rps'] = flooded['rps']
        result['errors'] += flooded['errors']
        return result
    return e2e.load(shape.replace('body1m', 'ka'), port, env, warm_up=warm_up,
                    path='/body' if shape.startswith('body') else '/', scheme='https')


def bench(cmd, url):
    """Runs percore bench with --json; its requests, rate, p99 and errors."""
    return bench_figures(e2e.run(cmd + ['--json', url], 300))


def bench_figures(out):
    report = json.loads(out)
    tls = report.get('tls', {})
    return dict(requests=report['requests'], rps=report['requests_per_sec'],
                p99_ms=report['latency_us']['percentiles']['99'] / 1000, errors=report['errors']['total'],
                negotiated=','.join(list(tls.get('versions', {})) + list(tls.get('suites', {}))) or None,
                resumed=tls.get('resumed'))


def idle_connections(proc, port, count):
    """Opens `count` TLS keep-alive connections, each answered once, and returns the
    server's RSS growth per connection (bytes), read from /proc."""
    def rss_kib():
        return sum(e2e.kib(pid, 'VmRSS') for pid in tree_pids(proc.pid))
    context = ssl.create_default_context(cafile=os.path.join(CERTS, 'ca.pem'))
    request = b'GET / HTTP/1.1\r\nHost: localhost\r\n\r\n'

    def connect():
        s = context.wrap_socket(socket.create_connection(('127.0.0.1', port), timeout=30),
                                server_hostname='localhost')
        s.sendall(request)
        return s

    def answered(s):
        answer = b''
        while not answer.endswith(b'hello, world!\n'):
            chunk = s.recv(4096)
            if not chunk:
                raise RuntimeError(f'a connection closed before its answer: {answer!r}')
            answer += chunk
    first = connect()  # so that every lazily allocated buffer is there before the baseline
    answered(first)
    time.sleep(0.2)
    before = rss_kib()
    connections = []
    try:
        for _ in range(count):
            connections.append(connect())
        for s in connections:
            answered(s)
        time.sleep(0.5)
        after = rss_kib()
    finally:
        for s in connections + [first]:
            s.close()
    return dict(requests=count, bytes_per_conn=(after - before) * 1024 / count)


def summary(r):
    if 'bytes_per_conn' in r:
        return f'{r["bytes_per_conn"]:.0f} B per idle connection'
    p99 = '-' if r['p99_ms'] is None else f'{r["p99_ms"]:.2f} ms'
    extra = f'  flood {r["flood_rps"]:.0f}/s' if 'flood_rps' in r else ''
    extra += f'  {r["negotiated"]}' if r.get('negotiated') else ''
    extra += f'  resumed {r["resumed"]}' if r.get('resumed') is not None else ''
    return f'{r["rps"]:>9.0f} req/s  p99 {p99:>9}  {r["cpu_us"]:7.2f} µs CPU/req  errors {r["errors"]}{extra}'


def table(results, args):
    """One markdown table: medians per shape and server, and the per-round ratios."""
    def of(server, shape):
        return [r for r in results if r['server'] == server and r['shape'] == shape]

    def figure(r):
        return r.get('bytes_per_conn', r.get('cpu_us'))

    def ratio(mine, theirs):
        theirs = {r['round']: figure(r) for r in theirs}
        ratios = [figure(r) / theirs[r['round']] for r in mine if theirs.get(r['round'])]
        return f'{statistics.median(ratios):.2f} ({" ".join(f"{x:.2f}" for x in ratios)})' if ratios else '–'

    def median(rows, key, form):
        values = [r[key] for r in rows if r.get(key) is not None]
        return form.format(statistics.median(values)) if values else '–'

    out = [f'{args.rounds} rounds; servers on CPU {args.server_cpu} (one worker/thread), the load on CPU '
           f'{args.load_cpu}, {args.duration} s a load; medians; the figure is the server\'s CPU per response '
           f'(idle-N: its RSS per idle connection); a ratio is the median of the per-round ratios (the rounds in '
           f'brackets).', '',
           '| shape | server | figure | req/s | p99 | errors | / nginx | / haproxy | / floor |',
           '|---|---|---|---|---|---|---|---|---|']
    for shape in dict.fromkeys(r['shape'] for r in results):
        idle = shape.startswith('idle-')
        for server in dict.fromkeys(r['server'] for r in results if r['shape'] == shape):
            mine = of(server, shape)
            row = [shape, server,
                   median(mine, 'bytes_per_conn', '{:,.0f} B') if idle else median(mine, 'cpu_us', '{:.2f} µs'),
                   '–' if idle else median(mine, 'rps', '{:,.0f}'),
                   '–' if idle else median(mine, 'p99_ms', '{:.2f} ms'),
                   '–' if idle else str(sum(r['errors'] for r in mine))]
            row += [ratio(mine, of(other, shape)) if server != other else '–'
                    for other in ('nginx', 'haproxy', 'floor')]
            out.append('| ' + ' | '.join(row) + ' |')
    return '\n'.join(out)


if __name__ == '__main__':
    main()
