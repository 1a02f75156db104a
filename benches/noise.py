#!/usr/bin/env python3
"""The noise study of percore bench compare: two identical percore servers compared
--repeats times (10), --rounds rounds each (5), and how often the verdict claims a
difference that is not there (on server CPU per response, the lead figure: the goal
is at most 1 in 10). Beside it, how often one round's pair of runs, the one-off
A-then-B comparison a user makes with two runs of percore bench, differs by more
than 10% in responses/s, and in server CPU per response.

    python3 benches/noise.py                  # after cargo build --release
    python3 benches/noise.py --repeats 10 --rounds 5 --duration 2

Both servers run one worker on --server-cpu, the load on --load-cpu.
"""
import argparse, json, os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PERCORE = os.path.join(ROOT, 'target', 'release', 'percore')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--repeats', type=int, default=10)
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--duration', type=float, default=2.0, help='seconds per load (default 2)')
    ap.add_argument('--server-cpu', type=int, default=0)
    ap.add_argument('--load-cpu', type=int, default=1)
    args = ap.parse_args()
    serve = f'{PERCORE} serve --bind 127.0.0.1 --port {{port}} --workers 1'
    claimed, pairs = [], []
    for repeat in range(args.repeats):
        cmd = [PERCORE, 'bench', 'compare', '-t', '1', '--cpus', str(args.load_cpu), '-c', '100',
               '-d', f'{args.duration}s', '--rounds', str(args.rounds), '--server-cpus', str(args.server_cpu),
               '--serve', f'a={serve}', '--serve', f'b={serve}', '--json']
        # One point: one -c, one CPU set.
        [point] = json.loads(subprocess.run(cmd, stdout=subprocess.PIPE, check=True, text=True).stdout)['points']
        lead = next(v for v in point['verdicts'] if v['figure'] == 'server_cpu_per_response')
        claimed.append(lead['direction'] != 'same')
        print(f'comparison {repeat + 1}: {lead["words"]}', file=sys.stderr)
        for round_ in point['rounds']:
            a, b = sorted(round_['results'], key=lambda r: r['target'])
            pairs.append((b['responses_per_sec'] / a['responses_per_sec'],
                          b['server_cpu_us_per_response'] / a['server_cpu_us_per_response']))
    off = lambda ratios: sum(abs(r - 1) > 0.10 for r in ratios)
    rate, cpu = [p[0] for p in pairs], [p[1] for p in pairs]
    print(f'| two identical servers | count |\n|---|---|\n'
          f'| compare ({args.rounds} rounds of {args.duration:g} s) claims a difference in CPU per response '
          f'| {sum(claimed)} of {len(claimed)} |\n'
          f'| one A-then-B pair differs by more than 10% in responses/s | {off(rate)} of {len(rate)} |\n'
          f'| one A-then-B pair differs by more than 10% in server CPU per response | {off(cpu)} of {len(cpu)} |\n'
          f'| pair ratios, responses/s: range | {min(rate):.2f}–{max(rate):.2f} |\n'
          f'| pair ratios, CPU per response: range | {min(cpu):.2f}–{max(cpu):.2f} |')


if __name__ == '__main__':
    main()
