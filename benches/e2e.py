#!/usr/bin/env python3
"""End-to-end comparison on this machine, in one run: docs/performance.md's tables.

Each server is pinned to one CPU (--server-cpu) and loaded from another (--load-cpu),
shape after shape, server after server, for --rounds rounds. A machine shared with
others drifts by tens of per cent within an hour, so what to quote is the ratio of
server CPU per request between two servers measured back to back in the same round;
the table gives each ratio as the median of its per-round ratios, with the rounds.

Servers (those installed or built; --servers picks):
  percore           target/release/percore serve, one worker (bodies of --sendfile-min
                    16k or more by sendfile(2), smaller ones from memory)
  percore-memory    the same with --sendfile-min off: every body from memory
  percore-sendfile  the same with --sendfile-min 0: every body by sendfile(2)
  baseline          another percore binary (--baseline PATH), e.g. the previous main's
  floor             benches/floor/server.c: only the system calls a request needs
  nginx             nginx-light, one worker, access_log off, sendfile off
  nginx-sendfile    the same with sendfile on and tcp_nopush on; beside nginx for
                    every body shape without asking
The floor answers no body shapes; percore-memory and percore-sendfile answer only
body shapes (elsewhere they are percore), and only when named in --servers or
added beside percore by --sendfile-variants.

Shapes (--shapes picks; `bodies` stands for the five body shapes):
  ka-cN          wrk -t1 -cN, keep-alive
  pipe16-c100    wrk -t1 -c100, 16 requests in each write
  close-c100     ab -c100 without -k: a connection per request
  bodySIZE-c100  wrk -t1 -c100 for a body of SIZE: 4k, 16k, 64k, 256k or 1m (KiB,
                 MiB), random bytes in a file of the workdir (percore --body-file;
                 nginx that file); not asked for, only body64k-c100 and body1m-c100
  idle-10k       10,000 idle keep-alive connections: the worker's RSS per connection

After the table of percore's ratios, the body shapes get one of their own: each
server's requests/s, CPU per request and share of its CPU, and its CPU per request
over nginx-sendfile's, the median of the per-round ratios (the rounds in brackets).
The sendfile threshold, all five sizes by each way of sending (5 x 5 x 5 loads of
--duration, plus a second of warm-up each: about 14 minutes at the default 5 s):

    python3 benches/e2e.py --shapes bodies --servers percore,nginx --sendfile-variants

    python3 benches/e2e.py                        # builds percore, 5 rounds of 5 s
    python3 benches/e2e.py --rounds 3 --duration 3 --shapes ka-c100,pipe16-c100
    python3 benches/e2e.py --baseline /tmp/percore-old --servers percore,baseline,floor

The load generators instead (`loaders`): one server (nginx if installed, else percore;
--server picks) on --server-cpu, and on --load-cpu, in turn within each round, the
generators: percore bench -t 1, wrk -t1 and the floor client (benches/floor/client.c),
and with --baseline PATH another percore binary's bench (`baseline`).
Shapes: ka-c100 (keep-alive, 100 connections), pipe16-c100 (16 requests in each write:
percore bench --pipeline 16, wrk's pipeline script, the floor client's DEPTH 16) and
rate (percore bench --rate R and the floor client at rate R, --rate 50000 unless
given, each against its own unthrottled ka-c100 of the same round: no busy poll
between sends, and what sleeping between sends costs in the kernel). The figure is
the generator's own CPU per response (its rusage), and each ratio the median of
per-round ratios. Beside it, the server's CPU while it ran: near 100% the server is
the limit, and responses/s is the server's rate under that generator's load, not the
generator's own (run --server percore, a faster server, to see the generators'):

    python3 benches/e2e.py loaders --rounds 5 --duration 10
    python3 benches/e2e.py loaders --shapes ka-c100 --baseline /tmp/percore-old

The same servers through `percore bench compare` instead (`compare`): nginx (the
baseline), percore and the floor started by compare itself on --server-cpus, each
shape a comparison of its own, loaded by percore bench -t 1 on --load-cpu; prints
each comparison's Markdown tables and verdicts (docs/performance.md's tables). Its
`study` shapes are the classic study's grid (30 to 5,000 connections, keep-alive and
ab-style close), on each --server-cpus set; its body shapes put percore's ways of
sending against nginx with sendfile; --netns runs the servers in a network namespace
of their own, over a veth pair (root); --baseline puts another percore binary beside
percore; --out keeps JSON and charts:

    python3 benches/e2e.py compare --rounds 5 --duration 5
    python3 benches/e2e.py compare --shapes study --server-cpus 0 --server-cpus 0-1 --out /tmp/study
    python3 benches/e2e.py compare --shapes bodies --netns --baseline /tmp/percore-old

Needs taskset; wrk and ab (apache2-utils) for the loads; nginx (nginx-light) and a C
compiler for those servers. It says what it skips and why, and needs root only for
--netns.
"""
import argparse, json, os, re, resource, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

from procs import free_port, tree_pids, wait_listening

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PERCORE = os.path.join(ROOT, 'target', 'release', 'percore')
# The tests' certificates (tests/tls/make.sh): the servers under TLS load use these.
CERTS = os.path.join(ROOT, 'tests', 'tls')
CERT, KEY = os.path.join(CERTS, 'localhost.pem'), os.path.join(CERTS, 'localhost.key')


def haproxy_pem(workdir):
    """The certificate and its key in one file, as HAProxy's `crt` takes them."""
    pem = os.path.join(workdir, 'haproxy.pem')
    with open(pem, 'w') as f:
        f.write(open(CERT).read() + open(KEY).read())
    return pem
PIPELINE_LUA = 'init = function(args)\n  local r = {}\n  for i = 1, 16 do r[i] = wrk.format() end\n' \
               '  req = table.concat(r)\nend\nrequest = function() return req end\n'
NGINX_CONF = """daemon off; master_process {master}; worker_processes {workers};
pid {dir}/nginx.pid; error_log {dir}/error.log crit; worker_rlimit_nofile 65536;
events {{ worker_connections 65536; use epoll; }}
http {{ access_log off; keepalive_requests 1000000; {sendfile}
  client_body_temp_path {dir}/body; proxy_temp_path {dir}/proxy; fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi; scgi_temp_path {dir}/scgi;
  server {{ listen {host}:{port} backlog=4096; {locations} }} }}
"""
# The hello at /, and a body file at /body.
NGINX_HELLO = ('location / {{ default_type text/plain; return 200 "hello, world!\\n"; }} '
               'location = /body {{ default_type application/octet-stream; alias {body}; }}')
# The body file on every path (for compare, whose URLs end in /): try_files, not an
# alias of /, which the index module would turn into /index.html.
NGINX_BODY = ('location / {{ default_type application/octet-stream; root {root}; '
              'try_files /{name} =404; }}')
# nginx's sendfile directives: nginx-sendfile corks the head with the file's first
# bytes (tcp_nopush, which nginx sets only where it sends with sendfile).
NGINX_SENDFILE = {'nginx': 'sendfile off;', 'nginx-sendfile': 'sendfile on; tcp_nopush on;'}
BODY_SIZES = {'body4k-c100': 4 << 10, 'body16k-c100': 16 << 10, 'body64k-c100': 64 << 10,
              'body256k-c100': 256 << 10, 'body1m-c100': 1 << 20}
SHAPES = ['ka-c30', 'ka-c100', 'ka-c1000', 'pipe16-c100', 'close-c100'] + list(BODY_SIZES) + ['idle-10k']
DEFAULT_SHAPES = ['ka-c30', 'ka-c100', 'ka-c1000', 'pipe16-c100', 'close-c100', 'body64k-c100', 'body1m-c100',
                  'idle-10k']
SERVERS = ['percore', 'percore-memory', 'percore-sendfile', 'baseline', 'floor', 'nginx', 'nginx-sendfile']
# percore's variants, by the --sendfile-min each runs with (percore: the default).
SENDFILE_MIN = {'percore-memory': 'off', 'percore-sendfile': '0'}
AB_REQUESTS = 20000


def main():
    if sys.argv[1:2] == ['loaders']:
        return loaders_main(sys.argv[2:])
    if sys.argv[1:2] == ['compare']:
        return compare_main(sys.argv[2:])
    ap = argparse.ArgumentParser(
        usage='e2e.py [loaders | compare] [options]', description=__doc__.split('\n\n')[0],
        epilog='Two other modes, each with its --help: `e2e.py loaders` runs the load generators side by '
               'side against one server; `e2e.py compare` runs the servers through percore bench compare. '
               'The module docstring (head -70 benches/e2e.py) has the shapes, servers and examples.')
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--duration', type=int, default=5, help='seconds per load (default 5)')
    ap.add_argument('--shapes', default=','.join(DEFAULT_SHAPES),
                    help=f'default {",".join(DEFAULT_SHAPES)}; known {",".join(SHAPES)}; '
                         '`bodies`: the five body shapes')
    ap.add_argument('--servers', default='percore,baseline,floor,nginx',
                    help=f'default percore,baseline,floor,nginx; known {",".join(SERVERS)}')
    ap.add_argument('--sendfile-variants', action='store_true',
                    help='for the body shapes, percore-memory (--sendfile-min off) and percore-sendfile '
                         '(--sendfile-min 0) beside percore')
    ap.add_argument('--baseline', help='another percore binary to compare with')
    ap.add_argument('--server-cpu', type=int, default=0)
    ap.add_argument('--load-cpu', type=int, default=1)
    ap.add_argument('--no-build', action='store_true', help='use target/release/percore as it is')
    ap.add_argument('--json', help='also write every measurement to this file')
    args = ap.parse_args()
    if not shutil.which('taskset'):
        sys.exit('taskset (util-linux) is needed to pin the server and the load')
    if not args.no_build:
        subprocess.run(['cargo', 'build', '--release', '--quiet'], cwd=ROOT, check=True)
    raise_open_files()
    with tempfile.TemporaryDirectory(prefix='percore-e2e-') as workdir:
        servers = available_servers(args, workdir)
        shapes = available_shapes(args.shapes.split(','))
        bodies = {}
        for shape in shapes:
            if shape in BODY_SIZES:
                bodies[shape] = os.path.join(workdir, f'body-{shape[4:].split("-")[0]}')
                with open(bodies[shape], 'wb') as f:
                    f.write(os.urandom(BODY_SIZES[shape]))
        lua = os.path.join(workdir, 'pipeline.lua')
        with open(lua, 'w') as f:
            f.write(PIPELINE_LUA)
        env = dict(workdir=workdir, bodies=bodies, lua=lua, args=args)
        results = []
        for round_ in range(args.rounds):
            for shape in shapes:
                for server in servers_for(shape, servers):
                    result = measure(server, shape, env)
                    result.update(server=server, shape=shape, round=round_)
                    results.append(result)
                    say(f'round {round_ + 1}/{args.rounds} {shape:13} {server:16} ' + summary(result))
    report(results, args, lambda results, args: table(results, args) + body_table(results))


def report(results, args, make_table):
    """Writes every measurement to --json, if given, and prints the table."""
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)
    print(make_table(results, args))


def available_servers(args, workdir):
    names = list(dict.fromkeys(args.servers.split(',')))
    for name in names:
        if name not in SERVERS:
            sys.exit(f'unknown server {name}; known: {", ".join(SERVERS)}')
    if args.sendfile_variants and 'percore' in names:
        at = names.index('percore') + 1
        names[at:at] = [v for v in SENDFILE_MIN if v not in names]
    servers = []
    for name in names:
        if name == 'baseline' and not args.baseline:
            continue
        if name == 'baseline' and not os.access(args.baseline, os.X_OK):
            sys.exit(f'--baseline {args.baseline}: not an executable')
        if name.startswith('nginx') and not shutil.which('nginx'):
            say(f'skipped {name}: nginx is not installed (apt-get install nginx-light)')
            continue
        if name == 'floor' and not build_floor(workdir):
            continue
        servers.append(name)
    return servers


def available_shapes(shapes):
    tools = {'ab': 'apache2-utils', 'wrk': 'wrk'}
    kept = []
    shapes = [s for shape in shapes for s in (BODY_SIZES if shape == 'bodies' else [shape])]
    for shape in dict.fromkeys(shapes):
        if shape not in SHAPES:
            sys.exit(f'unknown shape {shape}; known: {", ".join(SHAPES)}')
        tool = 'ab' if shape.startswith('close') else 'wrk'
        if shape != 'idle-10k' and not shutil.which(tool):
            say(f'skipped {shape}: {tool} is not installed (apt-get install {tools[tool]})')
            continue
        kept.append(shape)
    return kept


def servers_for(shape, servers):
    """Who serves a shape: the floor answers hellos only; percore's sendfile variants
    and nginx-sendfile bodies only; a body gets nginx twice, without sendfile and with."""
    body = shape in BODY_SIZES
    chosen = [s for s in servers if not (s == 'floor' and (body or shape == 'idle-10k'))
              and (body or s not in SENDFILE_MIN and s != 'nginx-sendfile')]
    if body and 'nginx' in chosen and 'nginx-sendfile' not in chosen:
        chosen.insert(chosen.index('nginx') + 1, 'nginx-sendfile')
    return chosen


def build_floor(workdir, part='server'):
    """Builds the floor's server or client into workdir (floor-server, floor-client);
    False (said why) without a compiler."""
    cc = shutil.which('cc') or shutil.which('gcc')
    if not cc:
        say(f'skipped the floor {part}: no C compiler (apt-get install gcc)')
        return False
    source = os.path.join(ROOT, 'benches', 'floor', f'{part}.c')
    built = subprocess.run([cc, '-O2', '-o', os.path.join(workdir, f'floor-{part}'), source],
                           stderr=subprocess.PIPE, text=True)
    if built.returncode != 0:
        say(f'skipped the floor {part}: {source} did not build:\n{built.stderr}')
        return False
    return True


def start(server, shape, port, env):
    """Starts `server` pinned to the server CPU, in a session of its own."""
    args, workdir = env['args'], env['workdir']
    body_file = env['bodies'].get(shape, '/dev/null')
    body = ['--body-file', body_file] if shape in BODY_SIZES else []
    if server.startswith('percore') or server == 'baseline':
        binary = args.baseline if server == 'baseline' else PERCORE
        sendfile_min = ['--sendfile-min', SENDFILE_MIN[server]] if server in SENDFILE_MIN else []
        cmd = [binary, 'serve', '--bind', '127.0.0.1', '--port', str(port), '--workers', '1',
               '--keepalive-timeout', '0'] + body + sendfile_min
    elif server == 'floor':
        close = ['close'] if shape.startswith('close') else []
        cmd = [os.path.join(workdir, 'floor-server'), str(port), '1', 'nopin'] + close
    else:
        conf = os.path.join(workdir, f'{server}.conf')
        with open(conf, 'w') as f:
            f.write(NGINX_CONF.format(master='off', workers=1, dir=workdir, host='127.0.0.1', port=port,
                                      sendfile=NGINX_SENDFILE[server],
                                      locations=NGINX_HELLO.format(body=body_file)))
        cmd = ['nginx', '-p', workdir, '-c', conf]
    proc = subprocess.Popen(['taskset', '-c', str(args.server_cpu)] + cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    if not wait_listening(port):
        stop(proc)
        raise RuntimeError(f'{server} did not start listening on port {port}')
    return proc


def stop(proc):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def measure(server, shape, env):
    port = free_port()
    proc = start(server, shape, port, env)
    try:
        if shape == 'idle-10k':
            return idle_connections(proc, port, 10000)
        load(shape, port, env, warm_up=True)
        before = tree_cpu(proc.pid)
        result = load(shape, port, env)
        cpu = tree_cpu(proc.pid) - before
        result['cpu_us'] = cpu * 1e6 / result['requests'] if result['requests'] else float('nan')
        return result
    finally:
        stop(proc)


def load(shape, port, env, warm_up=False, path=None, script=None, scheme='http'):
    """Runs the shape's load (at `path`, with the wrk `script` if given, over `scheme`);
    returns requests, requests/s, p99 ms, errors."""
    args = env['args']
    pin = ['taskset', '-c', str(args.load_cpu)]
    connections = shape.rsplit('-c', 1)[1]
    path = path or ('/body' if shape in BODY_SIZES else '/')
    url = f'{scheme}://127.0.0.1:{port}{path}'
    if shape.startswith('close'):
        count = AB_REQUESTS // 10 if warm_up else AB_REQUESTS
        out = run(pin + ['ab', '-q', '-n', str(count), '-c', connections, url], 300)
        done = int(re.search(r'Complete requests:\s+(\d+)', out).group(1))
        failed = int(re.search(r'Failed requests:\s+(\d+)', out).group(1))
        rps = float(re.search(r'Requests per second:\s+([\d.]+)', out).group(1))
        p99 = re.search(r'\n\s+99%\s+(\d+)', out)
        return dict(requests=done, rps=rps, p99_ms=float(p99.group(1)) if p99 else None, errors=failed)
    seconds = 1 if warm_up else args.duration
    cmd = pin + ['wrk', '-t1', '-c', connections, '-d', f'{seconds}s', '--latency']
    script = script or (env['lua'] if shape.startswith('pipe') else None)
    cmd += ['-s', script] if script else []
    out = run(cmd + [url], seconds + 60)
    requests = int(re.search(r'(\d+) requests in', out).group(1))
    rps = float(re.search(r'Requests/sec:\s+([\d.]+)', out).group(1))
    value, unit = re.search(r'99%\s+([\d.]+)(us|ms|s)', out).groups()
    errors = re.search(r'Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)', out)
    non_2xx = re.search(r'Non-2xx or 3xx responses: (\d+)', out)
    errors = sum(map(int, errors.groups())) if errors else 0
    errors += int(non_2xx.group(1)) if non_2xx else 0
    # wrk times a pipelined write's answers together, not each request: no p99 to quote.
    p99 = None if shape.startswith('pipe') else float(value) * {'us': 0.001, 'ms': 1, 's': 1000}[unit]
    return dict(requests=requests, rps=rps, p99_ms=p99, errors=errors)


def idle_connections(proc, port, count):
    """Opens `count` keep-alive connections, each answered once, and returns the
    server's RSS growth per connection (bytes), read from /proc."""
    def rss_kib():
        return sum(kib(pid, 'VmRSS') for pid in tree_pids(proc.pid))
    request = b'GET / HTTP/1.1\r\nHost: a\r\n\r\n'
    # One first answer, so every lazily allocated buffer is there before the baseline.
    with socket.create_connection(('127.0.0.1', port)) as first:
        first.sendall(request)
        first.recv(4096)
    time.sleep(0.2)
    before = rss_kib()
    connections = []
    for _ in range(count):
        s = socket.create_connection(('127.0.0.1', port))
        s.sendall(request)
        connections.append(s)
    for s in connections:
        s.settimeout(10)
        s.recv(4096)
    time.sleep(0.2)
    after = rss_kib()
    for s in connections:
        s.close()
    return dict(requests=count, bytes_per_conn=(after - before) * 1024 / count)


def run(cmd, timeout):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          timeout=timeout, check=True).stdout


def tree_cpu(root):
    """utime+stime, in seconds, of a process and its descendants."""
    total = 0.0
    for pid in tree_pids(root):
        try:
            fields = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
        except OSError:
            pass
    return total


def kib(pid, field):
    try:
        for line in open(f'/proc/{pid}/status'):
            if line.startswith(field + ':'):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def raise_open_files():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def say(text):
    print(text, file=sys.stderr, flush=True)


def summary(r):
    if 'bytes_per_conn' in r:
        return f'{r["bytes_per_conn"]:.0f} B per idle connection'
    p99 = '-' if r['p99_ms'] is None else f'{r["p99_ms"]:.2f} ms'
    return f'{r["rps"]:>10.0f} req/s  p99 {p99:>9}  {r["cpu_us"]:6.2f} µs CPU/req  errors {r["errors"]}'


def table(results, args):
    """One markdown table: medians per shape and server, and percore's ratio of CPU
    per request to each other server's, the median of per-round ratios (percore's own
    sendfile variants are left to the body table)."""
    shapes = list(dict.fromkeys(r['shape'] for r in results))
    servers = list(dict.fromkeys(r['server'] for r in results))
    refs = [s for s in servers if s != 'percore' and s not in SENDFILE_MIN]
    out = [f'{args.rounds} rounds of {args.duration} s; server on CPU {args.server_cpu}, load on CPU '
           f'{args.load_cpu}; medians; a ratio is percore\'s CPU per request over the other\'s, the median of '
           f'its per-round ratios (the rounds in brackets).', '']
    head = ['shape', 'percore req/s', 'percore p99', 'percore CPU/req']
    for ref in refs:
        head += [f'{ref} CPU/req', f'percore / {ref}']
    out += ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
    for shape in shapes:
        by = {s: [r for r in results if r['shape'] == shape and r['server'] == s] for s in servers}
        if not by.get('percore'):
            continue
        metric = 'bytes_per_conn' if shape == 'idle-10k' else 'cpu_us'
        unit = (lambda v: f'{v:.0f} B/conn') if shape == 'idle-10k' else (lambda v: f'{v:.2f} µs')
        mine = by['percore']
        if shape == 'idle-10k':
            row = [shape, '–', '–', unit(statistics.median(r[metric] for r in mine))]
        else:
            p99s = [r['p99_ms'] for r in mine if r['p99_ms'] is not None]
            row = [shape, f'{statistics.median(r["rps"] for r in mine):,.0f}',
                   f'{statistics.median(p99s):.2f} ms' if p99s else '–',
                   unit(statistics.median(r[metric] for r in mine))]
        for ref in refs:
            theirs = by.get(ref) or []
            if not theirs:
                row += ['–', '–']
                continue
            rounds = {r['round']: r[metric] for r in theirs}
            ratios = [r[metric] / rounds[r['round']] for r in mine if rounds.get(r['round'])]
            row.append(unit(statistics.median(r[metric] for r in theirs)))
            row.append(f'{statistics.median(ratios):.2f} ({" ".join(f"{x:.2f}" for x in ratios)})'
                       if ratios else '–')
        out.append('| ' + ' | '.join(row) + ' |')
    return '\n'.join(out)


def body_table(results, ref='nginx-sendfile'):
    """A second markdown table, for the body shapes: each server's medians, the share
    of its CPU it used (CPU per request times requests/s), and its CPU per request
    over `ref`'s, the median of per-round ratios. Empty without body shapes."""
    shapes = [s for s in dict.fromkeys(r['shape'] for r in results) if s in BODY_SIZES]
    if not shapes:
        return ''
    out = ['', '', f'Bodies: each server\'s medians; server CPU is CPU per request times requests/s; the ratio is '
           f'the server\'s CPU per request over {ref}\'s, the median of its per-round ratios (the rounds in '
           f'brackets).', '',
           f'| shape | server | req/s | p99 | CPU/req | server CPU | CPU/req over {ref}\'s |', '|---|---|---|---|---|---|---|']
    for shape in shapes:
        theirs = {r['round']: r['cpu_us'] for r in results if r['shape'] == shape and r['server'] == ref}
        for server in dict.fromkeys(r['server'] for r in results if r['shape'] == shape):
            mine = [r for r in results if r['shape'] == shape and r['server'] == server]
            p99s = [r['p99_ms'] for r in mine if r['p99_ms'] is not None]
            ratios = [r['cpu_us'] / theirs[r['round']] for r in mine if theirs.get(r['round'])]
            row = [shape, server, f'{statistics.median(r["rps"] for r in mine):,.0f}',
                   f'{statistics.median(p99s):.2f} ms' if p99s else '–',
                   f'{statistics.median(r["cpu_us"] for r in mine):.2f} µs',
                   f'{statistics.median(r["cpu_us"] * r["rps"] / 1e6 for r in mine):.0%}',
                   f'{statistics.median(ratios):.2f} ({" ".join(f"{x:.2f}" for x in ratios)})'
                   if ratios and server != ref else '–']
            out.append('| ' + ' | '.join(row) + ' |')
    return '\n'.join(out)


LOADER_SHAPES = ['ka-c100', 'pipe16-c100', 'rate']
LOADERS = ['percore', 'wrk', 'floor']


# What each shape asks of percore bench compare. A `study-` shape is the classic
# hello-server study's grid: 30 to 5,000 connections, keep-alive or a connection per
# request (ab without -k); a body shape loads the body servers instead of the hellos.
STUDY_CONNECTIONS = ['-c', '30,100,1000,5000']
COMPARE_SHAPES = {
    'ka-c100': ['-c', '100'],
    'ka-c1000': ['-c', '1000'],
    'pipe16-c100': ['-c', '100', '--pipeline', '16'],
    'close-c100': ['-c', '100', '--close'],
    'study-ka': STUDY_CONNECTIONS,
    'study-close': STUDY_CONNECTIONS + ['--close'],
    **{shape: ['-c', '100'] for shape in BODY_SIZES},
}
COMPARE_DEFAULT = ['ka-c100', 'ka-c1000', 'pipe16-c100', 'close-c100']
# The body shapes' servers, the first the baseline: nginx with sendfile on and
# tcp_nopush on, nginx without sendfile, and percore by each way of sending.
BODY_SERVERS = ['nginx-sendfile', 'nginx', 'percore', 'percore-memory', 'percore-sendfile']


def compare_main(argv):
    """`e2e.py compare`: the servers through percore bench compare, a shape a comparison."""
    ap = argparse.ArgumentParser(
        prog='e2e.py compare', description='The servers through percore bench compare, each shape a comparison: '
        'nginx (the baseline), percore and the floor for the hello shapes; nginx-sendfile (the baseline), '
        'nginx, percore, percore-memory and percore-sendfile for the body shapes. Each server runs as many workers '
        'as its CPU set has CPUs. Prints each comparison\'s Markdown; --out keeps its JSON and charts too.')
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--duration', type=int, default=5, help='seconds per load (default 5)')
    ap.add_argument('--shapes', default=','.join(COMPARE_DEFAULT),
                    help=f'default {",".join(COMPARE_DEFAULT)}; known {",".join(COMPARE_SHAPES)}; '
                         '`bodies`: the five body shapes; `study`: study-ka,study-close')
    ap.add_argument('--server-cpus', action='append',
                    help='a CPU set for the servers, taskset syntax; again for another row of the grid (default 0)')
    ap.add_argument('--load-cpu', type=int, default=1)
    ap.add_argument('--netns', action='store_true',
                    help='the servers in a network namespace of their own, over a veth pair (root)')
    ap.add_argument('--out', help='a directory for each shape\'s Markdown, JSON and, for a grid, its two charts')
    ap.add_argument('--no-build', action='store_true', help='use target/release/percore as it is')
    ap.add_argument('--baseline', help='another percore binary, beside percore as `baseline` (its default flags)')
    args = ap.parse_args(argv)
    groups = {'bodies': list(BODY_SIZES), 'study': ['study-ka', 'study-close']}
    shapes = [s for shape in args.shapes.split(',') for s in groups.get(shape, [shape])]
    for shape in shapes:
        if shape not in COMPARE_SHAPES:
            sys.exit(f'unknown shape {shape}; known: {", ".join(COMPARE_SHAPES)}')
    if not args.no_build:
        subprocess.run(['cargo', 'build', '--release', '--quiet'], cwd=ROOT, check=True)
    raise_open_files()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix='percore-compare-') as workdir:
        # nginx's workers, which run as nobody when started as root, read the bodies here.
        os.chmod(workdir, 0o755)
        floor = build_floor(workdir)
        for shape in shapes:
            out = args.out or workdir
            cmd = [PERCORE, 'bench', 'compare', '-t', '1', '--cpus', str(args.load_cpu), '-d', f'{args.duration}s',
                   '--rounds', str(args.rounds), '--markdown', os.path.join(out, f'{shape}.md'),
                   '--fail-on', 'never'] + COMPARE_SHAPES[shape]
            for cpus in args.server_cpus or ['0']:
                cmd += ['--server-cpus', cpus]
            cmd += ['--netns'] if args.netns else []
            if ',' in COMPARE_SHAPES[shape][1]:
                cmd += ['--rate-plot', os.path.join(out, f'{shape}-rate.svg'),
                        '--p99-plot', os.path.join(out, f'{shape}-p99.svg')]
            for name, command in compare_servers(shape, workdir, floor, args.baseline):
                cmd += ['--serve', f'{name}={command}']
            if args.out:
                cmd += ['--json']
                with open(os.path.join(out, f'{shape}.json'), 'w') as report:
                    subprocess.run(cmd, stdout=report, check=True)
            else:
                subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
            with open(os.path.join(out, f'{shape}.md')) as f:
                print(f'### {shape}\n\n' + f.read().replace(workdir, '$WORKDIR'))


def compare_servers(shape, workdir, floor, baseline=None):
    """The (name, --serve command) of each server of `shape`, listening on compare's
    {host} and {port}, with a worker per CPU of the set it is started on ($(nproc));
    `baseline`, another percore binary, beside percore."""
    body = None
    if shape in BODY_SIZES:
        body = os.path.join(workdir, f'body-{shape[4:].split("-")[0]}')
        if not os.path.exists(body):
            with open(body, 'wb') as f:
                f.write(os.urandom(BODY_SIZES[shape]))
    names = BODY_SERVERS if body else ['nginx', 'percore', 'floor']
    names = names + ['baseline'] if baseline else names
    servers = []
    for name in names:
        if name.startswith('nginx'):
            if not shutil.which('nginx'):
                say(f'skipped {name}: nginx is not installed (apt-get install nginx-light)')
                continue
            home = os.path.join(workdir, name)
            os.makedirs(home, exist_ok=True)
            template, conf = os.path.join(home, 'nginx.conf.in'), os.path.join(home, 'nginx.conf')
            with open(template, 'w') as f:
                locations = (NGINX_BODY.format(root=os.path.dirname(body), name=os.path.basename(body)) if body
                             else NGINX_HELLO.format(body='/dev/null'))
                f.write(NGINX_CONF.format(master='on', workers='@WORKERS@', dir=home, host='@HOST@', port='@PORT@',
                                          sendfile=NGINX_SENDFILE[name], locations=locations))
            servers.append((name, f'sed -e s/@HOST@/{{host}}/ -e s/@PORT@/{{port}}/ -e "s/@WORKERS@/$(nproc)/" '
                                  f'{template} > {conf} && exec nginx -p {home} -c {conf}'))
        elif name.startswith('percore') or name == 'baseline':
            sendfile_min = f' --sendfile-min {SENDFILE_MIN[name]}' if name in SENDFILE_MIN else ''
            body_file = f' --body-file {body}' if body else ''
            binary = baseline if name == 'baseline' else PERCORE
            servers.append((name, f'exec {binary} serve --bind {{host}} --port {{port}} --keepalive-timeout 0'
                                  f'{body_file}{sendfile_min}'))
        elif floor:
            close = ' close' if 'close' in shape else ''
            servers.append((name, f'exec {os.path.join(workdir, "floor-server")} {{port}} $(nproc) nopin{close} '
                                  'bind={host}'))
    return servers


def loaders_main(argv):
    """`e2e.py loaders`: the load generators against one server, in rounds."""
    ap = argparse.ArgumentParser(prog='e2e.py loaders', description='the load generators, side by side')
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--duration', type=int, default=10, help='seconds per load (default 10)')
    ap.add_argument('--server', choices=['nginx', 'percore'], default='nginx' if shutil.which('nginx') else 'percore')
    ap.add_argument('--loaders', default=','.join(LOADERS))
    ap.add_argument('--shapes', default=','.join(LOADER_SHAPES))
    ap.add_argument('--rate', type=int, default=50000, help='the rate shape\'s requests/s (default 50000)')
    ap.add_argument('--server-cpu', type=int, default=0)
    ap.add_argument('--load-cpu', type=int, default=1)
    ap.add_argument('--baseline', help='another percore binary whose bench runs beside (`baseline`)')
    ap.add_argument('--no-build', action='store_true', help='use target/release/percore as it is')
    ap.add_argument('--json', help='also write every measurement to this file')
    args = ap.parse_args(argv)
    if args.baseline and not os.access(args.baseline, os.X_OK):
        sys.exit(f'--baseline {args.baseline}: not an executable')
    if not shutil.which('taskset'):
        sys.exit('taskset (util-linux) is needed to pin the server and the load')
    if not args.no_build:
        subprocess.run(['cargo', 'build', '--release', '--quiet'], cwd=ROOT, check=True)
    raise_open_files()
    results = []
    with tempfile.TemporaryDirectory(prefix='percore-loaders-') as workdir:
        loaders = available_loaders(args.loaders.split(','), workdir)
        if args.baseline and 'baseline' not in loaders:
            loaders.insert(loaders.index('percore') + 1 if 'percore' in loaders else 0, 'baseline')
        shapes = [s for s in args.shapes.split(',') if s in LOADER_SHAPES]
        lua = os.path.join(workdir, 'pipeline.lua')
        with open(lua, 'w') as f:
            f.write(PIPELINE_LUA)
        env = dict(workdir=workdir, bodies={}, lua=lua, args=args)
        port = free_port()
        proc = start(args.server, 'ka-c100', port, env)
        env['server'] = proc.pid
        try:
            run_loader('wrk' if 'wrk' in loaders else 'percore', 'ka-c100', port, env, seconds=1)  # warm-up
            for round_ in range(args.rounds):
                for shape in shapes:
                    for loader in loaders:
                        if shape == 'rate' and loader == 'wrk':
                            continue
                        result = run_loader(loader, shape, port, env, args.duration)
                        result.update(loader=loader, shape=shape, round=round_)
                        results.append(result)
                        say(f'round {round_ + 1}/{args.rounds} {shape:12} {loader:8} {result["rps"]:>10.0f} resp/s  '
                            f'{result["cpu_us"]:6.2f} µs CPU/response  {result["errors"]} errors  '
                            f'server {result["server_cpu"]:.0%}')
        finally:
            stop(proc)
    report(results, args, loaders_table)


def available_loaders(names, workdir):
    kept = []
    for name in names:
        if name == 'wrk' and not shutil.which('wrk'):
            say('skipped wrk: not installed (apt-get install wrk)')
        elif name == 'floor' and not build_floor(workdir, 'client'):
            pass
        elif name in LOADERS:
            kept.append(name)
    return kept


def run_loader(loader, shape, port, env, seconds):
    """Runs one generator pinned to the load CPU; its responses, rate, its own CPU
    (user + system, from the rusage of the reaped child) per response, and the share
    of a CPU the server used meanwhile."""
    args, url = env['args'], f'http://127.0.0.1:{port}/'
    pipelined = shape.startswith('pipe')
    if loader in ('percore', 'baseline'):
        cmd = [PERCORE if loader == 'percore' else args.baseline, 'bench', '-t', '1', '-c', '100',
               '-d', f'{seconds}s', '--json', '--fail-on', 'never']
        cmd += ['--pipeline', '16'] if pipelined else []
        cmd += ['--rate', str(args.rate)] if shape == 'rate' else []
        cmd.append(url)
    elif loader == 'wrk':
        cmd = ['wrk', '-t1', '-c100', f'-d{seconds}s'] + (['-s', env['lua']] if pipelined else []) + [url]
    else:
        cmd = [os.path.join(env['workdir'], 'floor-client'), str(port), '100', str(seconds)]
        cmd += ['16'] if pipelined else ['1', str(args.rate)] if shape == 'rate' else []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_before, began = tree_cpu(env['server']), time.monotonic()
    out = run(['taskset', '-c', str(args.load_cpu)] + cmd, seconds + 60)
    server_cpu = (tree_cpu(env['server']) - server_before) / (time.monotonic() - began)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if loader in ('percore', 'baseline'):
        report = json.loads(out)
        responses, took, errors = report['requests'], report['duration_s'], report['errors']['total']
    elif loader == 'wrk':
        responses = int(re.search(r'(\d+) requests in', out).group(1))
        took = responses / float(re.search(r'Requests/sec:\s+([\d.]+)', out).group(1))
        socket_errors = re.search(r'Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)', out)
        errors = sum(map(int, socket_errors.groups())) if socket_errors else 0
    else:
        responses, took = out.split()
        responses, took, errors = int(responses), float(took), 0
    return dict(responses=responses, rps=responses / took if took else 0.0, cpu_s=cpu,
                cpu_us=cpu * 1e6 / responses if responses else float('nan'), errors=errors,
                server_cpu=server_cpu)


def loaders_table(results, args):
    """Medians per shape and generator, and the ratios the targets are about."""
    def of(loader, shape):
        return [r for r in results if r['loader'] == loader and r['shape'] == shape]

    def ratios(mine, theirs, metric):
        rounds = {r['round']: r[metric] for r in theirs}
        return [r[metric] / rounds[r['round']] for r in mine if rounds.get(r['round'])]

    def med(values, fmt='{:.2f}'):
        return (fmt.format(statistics.median(values)) + ' (' + ' '.join(f'{v:.2f}' for v in values) + ')'
                if values else '–')

    out = [f'{args.rounds} rounds of {args.duration} s against {args.server} (one worker) on CPU '
           f'{args.server_cpu}; each generator alone on CPU {args.load_cpu}, 100 connections; medians; a ratio '
           f'is the median of its per-round ratios (the rounds in brackets).', '',
           '| generator | shape | responses/s | CPU/response | CPU/response over the floor\'s | responses/s over wrk\'s '
           '| server CPU |',
           '|---|---|---|---|---|---|---|']
    for shape in dict.fromkeys(r['shape'] for r in results):
        for loader in dict.fromkeys(r['loader'] for r in results if r['shape'] == shape):
            mine = of(loader, shape)
            row = [loader, shape, f'{statistics.median(r["rps"] for r in mine):,.0f}',
                   f'{statistics.median(r["cpu_us"] for r in mine):.2f} µs',
                   med(ratios(mine, of('floor', shape), 'cpu_us')) if loader != 'floor' else '–',
                   med(ratios(mine, of('wrk', shape), 'rps')) if loader != 'wrk' else '–',
                   f'{statistics.median(r["server_cpu"] for r in mine):.0%}']
            out.append('| ' + ' | '.join(row) + ' |')
    out.append('')
    for shape in dict.fromkeys(r['shape'] for r in results):
        against = ratios(of('percore', shape), of('baseline', shape), 'cpu_us')
        if against:
            out.append(f'{shape}: percore bench\'s CPU per response over the baseline\'s: {med(against)}')
    for loader in ('percore', 'floor'):
        rated = ratios(of(loader, 'rate'), of(loader, 'ka-c100'), 'cpu_us')
        if rated:
            name = 'percore bench --rate' if loader == 'percore' else 'The floor client at'
            out.append(f'{name} {args.rate}, CPU per response over its unthrottled keep-alive: {med(rated)}')
    return '\n'.join(out)


if __name__ == '__main__':
    main()
