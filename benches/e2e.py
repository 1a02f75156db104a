#!/usr/bin/env python3
"""End-to-end comparison on this machine, in one run: percore (and nginx, where
installed) pinned to one CPU, loaded from another CPU by `percore bench` (and wrk,
where installed), at keep-alive and pipelined shapes.

Where a C compiler is installed it adds the kernel floor: benches/floor/server.c and
client.c do nothing but the system calls a keep-alive request needs (no parse, no
timing), so their CPU per request is what the kernel alone costs on this machine.
The floor client loads keep-alive only and measures no latency.

Prints one table: requests/s, p99 latency, and CPU microseconds per request of the
server and of the load generator (utime+stime from /proc, before and after). On a
shared machine absolute numbers drift; compare rows measured in the same run.

    python3 benches/e2e.py                 # builds percore in release mode first
    python3 benches/e2e.py --duration 10 --connections 100 --server-cpu 0 --load-cpu 1
    sudo python3 benches/e2e.py --apply-sysctl   # applies sysctl.conf first (root)

It never needs root unless --apply-sysctl is given, and says what it skips and why.
"""
import argparse, json, os, re, shutil, signal, socket, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PERCORE = os.path.join(ROOT, 'target', 'release', 'percore')
PIPELINE_LUA = 'init = function(args)\n  local r = {}\n  for i = 1, 16 do r[i] = wrk.format() end\n' \
               '  req = table.concat(r)\nend\nrequest = function() return req end\n'
NGINX_CONF = """daemon off; master_process off; worker_processes 1;
pid {dir}/nginx.pid; error_log {dir}/error.log crit; worker_rlimit_nofile 65536;
events {{ worker_connections 65536; use epoll; }}
http {{ access_log off; keepalive_requests 1000000;
  client_body_temp_path {dir}/body; proxy_temp_path {dir}/proxy; fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi; scgi_temp_path {dir}/scgi;
  server {{ listen 127.0.0.1:{port}; location / {{ default_type text/plain; return 200 "hello, world!\\n"; }} }} }}
"""


def cpu_seconds(pid):
    """utime+stime of a process and its children, in seconds."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            fields = open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
            todo += [int(c) for c in open(f'/proc/{p}/task/{p}/children').read().split()]
        except OSError:
            pass
    return total


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def wait_listening(port, seconds=10):
    end = time.time() + seconds
    while time.time() < end:
        try:
            socket.create_connection(('127.0.0.1', port), 0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def start_server(name, port, cpu, workdir):
    if name == 'percore':
        cmd = [PERCORE, 'serve', '--bind', '127.0.0.1', '--port', str(port), '--workers', '1', '--backlog', '4096']
    elif name == 'floor':
        cmd = [os.path.join(workdir, 'floor-server'), str(port), '1', 'nopin']
    else:
        conf = os.path.join(workdir, 'nginx.conf')
        open(conf, 'w').write(NGINX_CONF.format(dir=workdir, port=port))
        cmd = ['nginx', '-p', workdir, '-c', conf]
    proc = subprocess.Popen(['taskset', '-c', str(cpu)] + cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    if not wait_listening(port):
        stop(proc)
        raise RuntimeError(f'{name} did not start listening on port {port}')
    return proc


def stop(proc):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_load(loader, shape, port, args, workdir, lua):
    """Runs one load; returns (requests, requests/s, p99 ms)."""
    url = f'http://127.0.0.1:{port}/'
    pin = ['taskset', '-c', str(args.load_cpu)]
    if loader == 'percore bench':
        cmd = pin + [PERCORE, 'bench', '-t', '1', '-c', str(args.connections), '-d', f'{args.duration}s', '--json']
        cmd += ['--pipeline', '16'] if shape == 'pipe16' else []
        cmd += [url]
    elif loader == 'floor':
        cmd = pin + [os.path.join(workdir, 'floor-client'), str(port), str(args.connections), str(args.duration)]
    else:
        cmd = pin + ['wrk', '-t1', '-c', str(args.connections), '-d', f'{args.duration}s', '--latency']
        cmd += ['-s', lua] if shape == 'pipe16' else []
        cmd += [url]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=args.duration + 60, check=True).stdout
    if loader == 'percore bench':
        report = json.loads(out)
        return report['requests'], report['requests_per_sec'], report['latency_us']['percentiles']['99'] / 1000
    if loader == 'floor':
        requests, seconds = out.split()
        return int(requests), int(requests) / float(seconds), None
    requests = int(re.search(r'(\d+) requests in', out).group(1))
    rps = float(re.search(r'Requests/sec:\s+([\d.]+)', out).group(1))
    value, unit = re.search(r'99%\s+([\d.]+)(us|ms|s)', out).groups()
    p99 = float(value) * {'us': 0.001, 'ms': 1, 's': 1000}[unit]
    return requests, rps, p99


def measure(loader, shape, server_proc, port, args, workdir, lua):
    """The load generator's CPU comes from os.times() of reaped children."""
    before_server = cpu_seconds(server_proc.pid)
    before_load = os.times()
    requests, rps, p99 = run_load(loader, shape, port, args, workdir, lua)
    after_load = os.times()
    server_cpu = cpu_seconds(server_proc.pid) - before_server
    load_cpu = (after_load.children_user - before_load.children_user) + \
               (after_load.children_system - before_load.children_system)
    per = lambda seconds: seconds * 1e6 / requests if requests else float('nan')
    return dict(rps=rps, p99_ms=p99, server_us=per(server_cpu), load_us=per(load_cpu), requests=requests)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--duration', type=int, default=10, help='seconds per load (default 10)')
    ap.add_argument('--connections', type=int, default=100)
    ap.add_argument('--server-cpu', type=int, default=0)
    ap.add_argument('--load-cpu', type=int, default=1)
    ap.add_argument('--shapes', default='ka,pipe16', help='ka (keep-alive), pipe16 (16-deep pipelining)')
    ap.add_argument('--apply-sysctl', action='store_true', help='apply sysctl.conf first (needs root)')
    ap.add_argument('--no-build', action='store_true', help='use target/release/percore as it is')
    args = ap.parse_args()

    if args.apply_sysctl:
        subprocess.run(['sysctl', '-q', '-p', os.path.join(ROOT, 'sysctl.conf')], check=True)
    if not args.no_build:
        subprocess.run(['cargo', 'build', '--release', '--quiet'], cwd=ROOT, check=True)
    servers, loaders = ['percore'], ['percore bench']
    for tool, role, names in (('nginx', 'server', servers), ('wrk', 'load generator', loaders)):
        if shutil.which(tool):
            names.append(tool)
        else:
            print(f'skipped {tool}: not installed (apt-get install {"nginx-light" if tool == "nginx" else tool})'
                  f'; no {role} to compare with', file=sys.stderr)
    if not shutil.which('taskset'):
        sys.exit('taskset (util-linux) is needed to pin the server and the load')
    resource_limit()

    rows = []
    with tempfile.TemporaryDirectory(prefix='percore-e2e-') as workdir:
        if build_floor(workdir):
            servers.append('floor')
            loaders.append('floor')
        lua = os.path.join(workdir, 'pipeline.lua')
        open(lua, 'w').write(PIPELINE_LUA)
        for server in servers:
            port = free_port()
            proc = start_server(server, port, args.server_cpu, workdir)
            try:
                for shape in args.shapes.split(','):
                    for loader in loaders:
                        # The floor takes each read for one request or response.
                        if 'floor' in (server, loader) and shape != 'ka':
                            continue
                        result = measure(loader, shape, proc, port, args, workdir, lua)
                        rows.append((server, loader, shape, result))
                        print(f'  {server:8} {loader:14} {shape:7} {result["rps"]:>12.0f} req/s', file=sys.stderr)
            finally:
                stop(proc)

    print(f'\n{args.connections} connections, {args.duration} s each; server on CPU {args.server_cpu}, '
          f'load on CPU {args.load_cpu}\n')
    print('| server | load | shape | requests/s | p99 ms | server CPU µs/req | load CPU µs/resp |')
    print('|---|---|---|---|---|---|---|')
    for server, loader, shape, r in rows:
        p99 = '–' if r['p99_ms'] is None else f'{r["p99_ms"]:.2f}'
        print(f'| {server} | {loader} | {shape} | {r["rps"]:.0f} | {p99} | '
              f'{r["server_us"]:.2f} | {r["load_us"]:.2f} |')


def build_floor(workdir):
    """Builds the floor server and client into workdir; False (said why) without a compiler."""
    cc = shutil.which('cc') or shutil.which('gcc')
    if not cc:
        print('skipped the kernel floor: no C compiler (apt-get install gcc)', file=sys.stderr)
        return False
    for name in ('server', 'client'):
        source = os.path.join(ROOT, 'benches', 'floor', f'{name}.c')
        built = subprocess.run([cc, '-O2', '-o', os.path.join(workdir, f'floor-{name}'), source],
                               stderr=subprocess.PIPE, text=True)
        if built.returncode != 0:
            print(f'skipped the kernel floor: {source} did not build:\n{built.stderr}', file=sys.stderr)
            return False
    return True


def resource_limit():
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


if __name__ == '__main__':
    main()
