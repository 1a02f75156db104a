#!/usr/bin/env python3
"""TCP relays side by side: percore's examples/relay against HAProxy, CPU per unit of work.

Each relay runs with one worker (or thread) pinned to --relay-cpu (0), in front of a
`percore serve` backend (one worker) on --load-cpu (1), where the client also runs.
What is measured is the relay's own CPU (its process tree's utime + stime, from
/proc, as benches/e2e.py reads it) over the load, per request or per GiB relayed.

Relays (--relays picks; each started afresh for every measurement):
  percore-relay   target/release/examples/relay (--relay PATH), one worker, --splice auto
  percore-copy    the same, --splice copy: every byte read into user memory and sent
  percore-splice  the same, --splice splice: every byte through a pipe
  baseline        another relay binary (--baseline PATH), e.g. the previous build's
  haproxy         HAProxy (Debian's 2.6), nbthread 1, mode tcp
  haproxy-splice  the same, splicing both ways (pipes instead of copies to user memory)
  floor           benches/floor/relay.c: one recv and one send per read, nothing else

Shapes (--shapes picks):
  ka-c100  wrk -t1 -c100 -d DURATION, keep-alive, hello responses: relay CPU per request
  bulk     a 256 MiB body fetched 4 times (1 GiB) on fresh connections by a client
           in this script, every byte counted: relay CPU seconds per GiB

With --tls the relays end their clients' TLS in front of the plain backend
(stunnel's job; the tests' ECDSA P-256 certificate): percore-relay with
--tls-cert/--tls-key (a TLS connection has nothing to splice: it copies), haproxy
`mode tcp` with `bind ... ssl crt`; wrk loads them over https. ka-c100 only, and
neither splice variant.

Rounds are interleaved, the relays' order rotated each round; the table gives medians,
and each ratio (a relay's CPU figure over HAProxy's, and over haproxy-splice's for
bulk) as the median of its per-round ratios, with the rounds in brackets.

    python3 benches/relay.py                       # after cargo build --release --examples
    python3 benches/relay.py --relays haproxy,haproxy-splice --rounds 2 --duration 3
    python3 benches/relay.py --baseline /tmp/relay-old --shapes bulk
    python3 benches/relay.py --tls --shapes ka-c100 --relays percore-relay,haproxy

Needs taskset, wrk (ka-c100) and haproxy; builds nothing. Never needs root.
"""
import argparse, os, re, shutil, socket, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e  # noqa: E402
from procs import free_port, wait_listening  # noqa: E402

RELAYS = ['percore-relay', 'haproxy', 'haproxy-splice']
# The relay example's ways of crossing, each a relay of its own here.
PERCORE_FLAGS = {'percore-relay': [], 'percore-copy': ['--splice', 'copy'], 'percore-splice': ['--splice', 'splice']}
SHAPES = ['ka-c100', 'bulk']
# The backend reads --body-file into memory (in each worker; a 1 GiB body would need
# 1 GiB per worker), so the bulk shape fetches a 256 MiB body 4 times: 1 GiB a round.
BODY_SIZE, FETCHES = 256 << 20, 4
GIB = 1 << 30
HAPROXY_CONF = """global
    nbthread 1
    maxconn 4096
defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s
{splice}
frontend relay
    bind 127.0.0.1:{port}{ssl}
    default_backend backend
backend backend
    server backend 127.0.0.1:{backend}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--duration', type=int, default=5, help='seconds of wrk per ka-c100 load (default 5)')
    ap.add_argument('--shapes', default=','.join(SHAPES))
    ap.add_argument('--relays', default=','.join(RELAYS))
    ap.add_argument('--percore', default=e2e.PERCORE, help='the percore binary serving as backend')
    ap.add_argument('--relay', default=os.path.join(e2e.ROOT, 'target', 'release', 'examples', 'relay'))
    ap.add_argument('--baseline', help='another relay binary, compared as `baseline`')
    ap.add_argument('--relay-cpu', type=int, default=0)
    ap.add_argument('--load-cpu', type=int, default=1, help='CPU of the backend and the client (default 1)')
    ap.add_argument('--tls', action='store_true', help='the relays end their clients\' TLS (ka-c100 only)')
    ap.add_argument('--json', help='also write every measurement to this file')
    args = ap.parse_args()
    relays, shapes = args.relays.split(','), args.shapes.split(',')
    if args.baseline and 'baseline' not in relays:
        relays.append('baseline')
    check(args, relays, shapes)
    e2e.raise_open_files()
    os.sched_setaffinity(0, {args.load_cpu})  # the bulk client is this process
    results, procs = [], []
    with tempfile.TemporaryDirectory(prefix='percore-relay-') as workdir:
        try:
            if 'floor' in relays and not e2e.build_floor(workdir, 'relay'):
                relays.remove('floor')
            body = os.path.join(workdir, 'body')
            with open(body, 'wb') as f:
                f.truncate(BODY_SIZE)  # zeros (sparse: no disk written)
            backends = {}
            for shape in shapes:
                extra = ['--body-file', body] if shape == 'bulk' else []
                proc, backends[shape] = start(f'backend-{shape}', [args.percore, 'serve', '--bind', '127.0.0.1',
                                              '--port', '0', '--workers', '1', '--cpus', str(args.load_cpu)] + extra,
                                              args.load_cpu, workdir)
                procs.append(proc)
            env = dict(args=args, lua=None)  # what e2e.load needs
            for round_ in range(args.rounds):
                order = relays[round_ % len(relays):] + relays[:round_ % len(relays)]
                for shape in shapes:
                    for relay in order:
                        result = measure(relay, shape, backends[shape], workdir, env)
                        result.update(relay=relay, shape=shape, round=round_)
                        results.append(result)
                        unit = 'µs CPU/req' if shape == 'ka-c100' else 's CPU/GiB'
                        e2e.say(f'round {round_ + 1}/{args.rounds} {shape:8} {relay:15} {result["rate"]:>10.2f} '
                                f'{result["rate_unit"]}  {result["cpu"]:7.3f} {unit}  relay CPU '
                                f'{result["busy"]:.0%}  errors {result["errors"]}')
        finally:
            for proc in procs:
                stop(proc)
    e2e.report(results, args, table)


def check(args, relays, shapes):
    for shape in shapes:
        if shape not in SHAPES:
            sys.exit(f'unknown shape {shape}; known: {", ".join(SHAPES)}')
        if args.tls and shape != 'ka-c100':
            sys.exit(f'--tls: ka-c100 only, not {shape}')
    for relay in relays:
        if args.tls and relay not in ('percore-relay', 'haproxy', 'baseline'):
            sys.exit(f'--tls: percore-relay, haproxy and baseline only, not {relay}')
        known = list(PERCORE_FLAGS) + RELAYS[1:] + ['floor', 'baseline']
        if relay not in known:
            sys.exit(f'unknown relay {relay}; known: {", ".join(known)}')
        binary = relay_binary(relay, args)
        if binary and not os.access(binary, os.X_OK):
            sys.exit(f'{relay}: {binary} is not an executable (cargo build --release --examples?)')
        if relay.startswith('haproxy') and not shutil.which('haproxy'):
            sys.exit('haproxy is not installed (apt-get install haproxy)')
    needed = ['taskset'] + (['wrk'] if 'ka-c100' in shapes else [])
    for tool in needed:
        if not shutil.which(tool):
            sys.exit(f'{tool} is needed (apt-get install {"util-linux" if tool == "taskset" else tool})')
    if not os.access(args.percore, os.X_OK):
        sys.exit(f'--percore {args.percore}: not an executable (cargo build --release)')


def relay_binary(relay, args):
    return args.relay if relay in PERCORE_FLAGS else {'baseline': args.baseline}.get(relay)


def start(name, cmd, cpu, workdir, port=None):
    """Starts `cmd` pinned to `cpu` in a session of its own, its output to a log in
    workdir; returns it and its port: `port`, or the one it prints as `listening on ADDR`."""
    log = os.path.join(workdir, f'{name}.log')
    with open(log, 'w') as out:
        proc = subprocess.Popen(['taskset', '-c', str(cpu)] + cmd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=out, start_new_session=True)
    deadline = time.monotonic() + 10
    while port is None and time.monotonic() < deadline and proc.poll() is None:
        found = re.search(r'listening on \S+:(\d+)', open(log).read())
        if found:
            port = int(found.group(1))
        else:
            time.sleep(0.05)
    if port is None or not wait_listening(port):
        stop(proc)
        raise RuntimeError(f'{name} did not start listening; its output:\n{open(log).read()[-2000:]}')
    return proc, port


def stop(proc):
    try:
        e2e.stop(proc)
    except ProcessLookupError:  # it had exited, and was reaped, already
        pass


def start_relay(relay, backend, workdir, args):
    cpu = args.relay_cpu
    if relay.startswith('haproxy'):
        port, conf = free_port(), os.path.join(workdir, f'{relay}.cfg')
        with open(conf, 'w') as f:
            # Forced: with `option splice-auto`, HAProxy 2.6 relayed the bulk body with
            # recvfrom/sendto only (strace -c: not one splice call); these splice it.
            splice = '    option splice-request\n    option splice-response' if relay == 'haproxy-splice' else ''
            ssl = f' ssl crt {e2e.haproxy_pem(workdir)}' if args.tls else ''
            f.write(HAPROXY_CONF.format(port=port, backend=backend, splice=splice, ssl=ssl))
        return start(relay, ['haproxy', '-db', '-f', conf], cpu, workdir, port)
    if relay == 'floor':
        port = free_port()
        return start(relay, [os.path.join(workdir, 'floor-relay'), str(port), str(backend)], cpu, workdir, port)
    tls = ['--tls-cert', e2e.CERT, '--tls-key', e2e.KEY] if args.tls else []
    return start(relay, [relay_binary(relay, args), '--port', '0', '--workers', '1', '--cpus', str(cpu),
                         '--backend', f'127.0.0.1:{backend}'] + PERCORE_FLAGS.get(relay, []) + tls, cpu, workdir)


def measure(relay, shape, backend, workdir, env):
    """One load through a fresh relay: its CPU per request (µs) or per GiB (s), and rate."""
    proc, port = start_relay(relay, backend, workdir, env['args'])
    try:
        scheme = 'https' if env['args'].tls else 'http'
        if shape == 'ka-c100':
            e2e.load(shape, port, env, warm_up=True, scheme=scheme)
        before, began = e2e.tree_cpu(proc.pid), time.monotonic()
        if shape == 'ka-c100':
            done = e2e.load(shape, port, env, scheme=scheme)
            count, errors, rate, rate_unit = done['requests'], done['errors'], done['rps'], 'req/s'
        else:
            count, errors = fetch(port, FETCHES, BODY_SIZE) / GIB, 0
        took, cpu = time.monotonic() - began, e2e.tree_cpu(proc.pid) - before
        if shape == 'bulk':
            rate, rate_unit = count / took, 'GiB/s'
        scale = 1e6 if shape == 'ka-c100' else 1
        return dict(cpu=cpu * scale / count if count else float('nan'), rate=rate, rate_unit=rate_unit,
                    busy=cpu / took, errors=errors)
    finally:
        stop(proc)


def fetch(port, times, size):
    """GETs the body `times` times, each on a connection of its own; the body bytes
    received, all counted: anything but `size` bytes each time raises."""
    total, view = 0, memoryview(bytearray(1 << 20))
    for _ in range(times):
        deadline = time.monotonic() + 120
        with socket.create_connection(('127.0.0.1', port), timeout=30) as s:
            s.sendall(b'GET /body HTTP/1.1\r\nHost: relay\r\n\r\n')
            head = b''
            while b'\r\n\r\n' not in head:
                chunk = s.recv(65536)
                if not chunk:
                    raise RuntimeError(f'the relay closed before the response head: {head[:200]!r}')
                head += chunk
            head, rest = head.split(b'\r\n\r\n', 1)
            length = re.search(rb'(?i)\r\ncontent-length:\s*(\d+)', head)
            if not head.startswith(b'HTTP/1.1 200') or not length or int(length.group(1)) != size:
                raise RuntimeError(f'not a {size}-byte body: {head[:300]!r}')
            got = len(rest)
            while got < size and time.monotonic() < deadline:
                n = s.recv_into(view)
                if not n:
                    break
                got += n
            if got != size:
                raise RuntimeError(f'{got} bytes of body received, {size} expected')
            total += got
    return total


def table(results, args):
    """One markdown table: medians per shape and relay, and the per-round ratios."""
    def of(relay, shape):
        return [r for r in results if r['relay'] == relay and r['shape'] == shape]

    def ratio(mine, theirs):
        theirs = {r['round']: r['cpu'] for r in theirs}
        ratios = [r['cpu'] / theirs[r['round']] for r in mine if theirs.get(r['round'])]
        return f'{statistics.median(ratios):.2f} ({" ".join(f"{x:.2f}" for x in ratios)})' if ratios else '–'

    out = [f'{args.rounds} rounds; relays on CPU {args.relay_cpu} (one worker/thread'
           + (', ending their clients\' TLS' if args.tls else '') + '), backend and client on '
           f'CPU {args.load_cpu}; ka-c100: wrk -c100 for {args.duration} s, CPU per request; bulk: '
           f'{FETCHES} × {BODY_SIZE >> 20} MiB, CPU per GiB; medians; a ratio is the relay\'s CPU figure over '
           f'the other\'s, the median of its per-round ratios (the rounds in brackets).', '',
           '| shape | relay | CPU | rate | relay CPU busy | errors | / haproxy | / haproxy-splice |',
           '|---|---|---|---|---|---|---|---|']
    for shape in dict.fromkeys(r['shape'] for r in results):
        for relay in dict.fromkeys(r['relay'] for r in results if r['shape'] == shape):
            mine = of(relay, shape)
            cpu = statistics.median(r['cpu'] for r in mine)
            row = [shape, relay, f'{cpu:.2f} µs/req' if shape == 'ka-c100' else f'{cpu:.3f} s/GiB',
                   f'{statistics.median(r["rate"] for r in mine):,.2f} {mine[0]["rate_unit"]}',
                   f'{statistics.median(r["busy"] for r in mine):.0%}', str(sum(r['errors'] for r in mine)),
                   ratio(mine, of('haproxy', shape)) if relay != 'haproxy' else '–',
                   ratio(mine, of('haproxy-splice', shape)) if shape == 'bulk' and relay != 'haproxy-splice' else '–']
            out.append('| ' + ' | '.join(row) + ' |')
    return '\n'.join(out)


if __name__ == '__main__':
    main()
