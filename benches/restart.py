#!/usr/bin/env python3
"""Restarting under load, percore beside nginx, in one run: the failed requests a
client counts while the server is reloaded, upgraded, has workers killed, and stops.

For each server (two workers; nginx with `reuseport`), each step runs under its own
`percore bench -c 200 --json` of --duration seconds (keep-alive), and the table gives
the requests that failed (connect, read, write, timeout, parse, and non-2xx):

  reload x10     percore: SIGHUP; nginx: `nginx -s reload`; spread over the run
  upgrade        percore: SIGUSR2; nginx: USR2, then WINCH and QUIT to the old master
  kill -9        a worker SIGKILLed every 3 s (its open connections are lost)
  stop           SIGTERM (nginx: QUIT, its graceful stop) a second before the load ends:
                 requests after it fail to connect, by design

With --tls both serve HTTPS (the tests' certificate; nginx `listen ... ssl` with
tickets) and the load is over https (`--cacert`): a reload then renews the
certificate (percore reads it again; nginx reloads its configuration). With
--close every request is a new connection (`--close`; over TLS `--tls-resume`,
a handshake resumed with the ticket of an earlier one): the new-connection load.

    python3 benches/restart.py                  # builds percore first
    python3 benches/restart.py --duration 20 --servers percore
    python3 benches/restart.py --tls --close    # HTTPS, a connection per request

Needs nginx (nginx-light) for its column; never needs root.
"""
import argparse, json, os, shutil, signal, subprocess, sys, tempfile, threading, time

from e2e import CERT, CERTS, KEY
from procs import children, free_port, wait_listening

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PERCORE = os.path.join(ROOT, 'target', 'release', 'percore')
# `daemon on`: nginx ignores USR2 while the process that started it is its parent.
NGINX_CONF = """daemon on; worker_processes 2; master_process on;
pid {dir}/nginx.pid; error_log {dir}/error.log crit; worker_rlimit_nofile 65536;
events {{ worker_connections 65536; use epoll; }}
http {{ access_log off; keepalive_requests 1000000;
  client_body_temp_path {dir}/body; proxy_temp_path {dir}/proxy; fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi; scgi_temp_path {dir}/scgi;
  server {{ listen 127.0.0.1:{port}{ssl} reuseport backlog=4096; {certificate}
    location / {{ default_type text/plain; return 200 "hello, world!\\n"; }} }} }}
"""
STEPS = ['reload x10', 'upgrade', 'kill -9', 'stop']


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--duration', type=int, default=30, help='seconds of load per step (default 30)')
    ap.add_argument('--servers', default='percore,nginx')
    ap.add_argument('--no-build', action='store_true')
    ap.add_argument('--tls', action='store_true', help='HTTPS: a reload renews the certificate')
    ap.add_argument('--close', action='store_true', help='a new connection per request')
    args = ap.parse_args()
    if not args.no_build:
        subprocess.run(['cargo', 'build', '--release', '--quiet'], cwd=ROOT, check=True)
    servers = [s for s in args.servers.split(',') if s != 'nginx' or shutil.which('nginx')]
    if 'nginx' in args.servers and 'nginx' not in servers:
        print('skipped nginx: not installed (apt-get install nginx-light)', file=sys.stderr)
    results = {}
    with tempfile.TemporaryDirectory(prefix='percore-restart-') as workdir:
        for step in STEPS:
            for server in servers:
                results[(server, step)] = run_step(server, step, args, workdir)
                r = results[(server, step)]
                print(f'{step:11} {server:8} {r["failed"]:>6} failed of {r["sent"]:>8}  {r["detail"]}',
                      file=sys.stderr, flush=True)
    print(f'`percore bench -c 200 -d {args.duration}s{load_flags(args)}` per step, two workers each'
          + (', over https' if args.tls else '')
          + '; failed requests (connect, read, write, timeout, parse and non-2xx) of those sent.\n')
    print('| step | ' + ' | '.join(servers) + ' |')
    print('|---|' + '---|' * len(servers))
    for step in STEPS:
        cells = [cell(results[(s, step)], step) for s in servers]
        print(f'| {step} | ' + ' | '.join(cells) + ' |')
    print('\nAfter the stop every new connection is refused, and the client retries at once: '
          'those connection attempts are counted apart.')


def cell(r, step):
    if r['failed'] == '-':
        return r['detail']
    if step == 'stop':
        return f'{r["failed"] - r["refused"]} of {r["sent"]:,} (+{r["refused"]:,} refused after the stop)'
    return f'{r["failed"]} of {r["sent"]:,}'



def run_step(server, step, args, workdir):
    port, duration = free_port(), args.duration
    proc = start(server, port, workdir, args.tls)
    try:
        load = threading.Thread(target=lambda: result.update(bench(port, args)))
        result = {}
        load.start()
        act(server, step, proc, duration, workdir)
        load.join()
        return summarize(result)
    finally:
        stop(server, proc, workdir)


def act(server, step, proc, duration, workdir):
    """What the step does to the server while the load runs."""
    if step == 'reload x10':
        for _ in range(10):
            time.sleep(duration / 12)
            if server == 'percore':
                os.kill(proc.pid, signal.SIGHUP)
            else:
                subprocess.run(nginx_cmd(workdir) + ['-s', 'reload'], check=True, capture_output=True)
    elif step == 'upgrade':
        time.sleep(duration / 3)
        upgrade(server, proc, workdir)
    elif step == 'kill -9':
        end = time.time() + duration - 3
        while time.time() < end:
            time.sleep(3)
            workers = children(proc.pid) if server == 'percore' else children(nginx_master(proc, workdir))
            if workers:
                os.kill(workers[0], signal.SIGKILL)
    elif step == 'stop':
        time.sleep(max(duration - 1, 1))
        if server == 'percore':
            os.kill(proc.pid, signal.SIGTERM)
        else:
            os.kill(nginx_master(proc, workdir), signal.SIGQUIT)


def upgrade(server, proc, workdir):
    """percore: USR2, the rest is automatic. nginx: USR2, wait for the new master,
    then WINCH and QUIT to the old one (its documented sequence)."""
    if server == 'percore':
        os.kill(proc.pid, signal.SIGUSR2)
        return
    old = nginx_master(proc, workdir)
    os.kill(old, signal.SIGUSR2)
    new_pid_file = os.path.join(workdir, 'nginx.pid')
    deadline = time.time() + 10
    while time.time() < deadline and (read_pid(new_pid_file) in (None, old)):
        time.sleep(0.1)
    time.sleep(1)  # its workers start
    os.kill(old, signal.SIGWINCH)
    time.sleep(2)
    os.kill(old, signal.SIGQUIT)


def load_flags(args):
    """The load's flags beyond -c and -d, as the table's title says them."""
    flags = (' --close' if args.close else '') + (' --tls-resume' if args.close and args.tls else '')
    return flags + (' --cacert ca.pem' if args.tls else '')


def bench(port, args):
    scheme = 'https' if args.tls else 'http'
    cmd = [PERCORE, 'bench', '-t', '1', '-c', '200', '-d', f'{args.duration}s', '--json',
           f'{scheme}://127.0.0.1:{port}/']
    cmd[2:2] = ['--close'] * args.close + ['--tls-resume'] * (args.close and args.tls) \
        + ['--cacert', os.path.join(CERTS, 'ca.pem')] * args.tls
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.duration + 120)
    try:
        return json.loads(out.stdout)
    except json.JSONDecodeError:
        return {'error': out.stderr.strip() or out.stdout.strip()}


def summarize(report):
    if 'error' in report:
        return dict(failed='-', refused=0, sent='-', detail=report['error'])
    errors = report['errors']
    failed = errors['total'] + report['non_2xx_3xx']
    kinds = ', '.join(f'{k} {v}' for k, v in errors.items() if k != 'total' and v)
    return dict(failed=failed, refused=errors['connect'], sent=report['requests'] + errors['total'], detail=kinds)


def start(server, port, workdir, tls):
    if server == 'percore':
        cmd = [PERCORE, 'serve', '--bind', '127.0.0.1', '--port', str(port), '--workers', '2']
        cmd += ['--tls-cert', CERT, '--tls-key', KEY] * tls
    else:
        ssl, certificate = ('', '') if not tls else (
            ' ssl', f'ssl_certificate {CERT}; ssl_certificate_key {KEY}; ssl_protocols TLSv1.2 TLSv1.3; ssl_session_tickets on;')
        with open(os.path.join(workdir, 'nginx.conf'), 'w') as f:
            f.write(NGINX_CONF.format(dir=workdir, port=port, ssl=ssl, certificate=certificate))
        cmd = nginx_cmd(workdir)
    stderr = open(os.path.join(workdir, f'{server}.err'), 'w')
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
    if server == 'nginx':
        proc.wait(timeout=10)  # it daemonizes: its master is in the pid file
    if not wait_listening(port):
        stop(server, proc, workdir)
        raise RuntimeError(f'{server} did not start on port {port}')
    return proc


def nginx_cmd(workdir):
    # By its full path: at USR2 nginx executes its argv[0] again, and a bare `nginx`
    # fails there (execve: ENOENT), which made its upgrade step a failed upgrade.
    return [shutil.which('nginx'), '-p', workdir, '-c', os.path.join(workdir, 'nginx.conf')]


def nginx_master(proc, workdir):
    """The serving nginx master, from its pid file (after an upgrade, the new one)."""
    return read_pid(os.path.join(workdir, 'nginx.pid')) or proc.pid


def stop(server, proc, workdir):
    """Kills every process of the server, by pid: after an upgrade the master is a new
    process, outside the first one's session."""
    pids = {proc.pid}
    if server == 'nginx':
        pids.add(nginx_master(proc, workdir))
        pids.update(filter(None, [read_pid(os.path.join(workdir, 'nginx.pid.oldbin'))]))
    else:
        prefix = 'percore: upgrading: new master pid '
        for line in open(os.path.join(workdir, 'percore.err')):
            if line.startswith(prefix):
                pids.add(int(line[len(prefix):]))
    for pid in list(pids):
        pids.update(children(pid))
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    proc.wait()
    for pid_file in ('nginx.pid', 'nginx.pid.oldbin'):
        try:
            os.remove(os.path.join(workdir, pid_file))
        except OSError:
            pass


def read_pid(path):
    try:
        return int(open(path).read().strip())
    except (OSError, ValueError):
        return None


if __name__ == '__main__':
    main()
