"""Join a bench run's timing log with a clock log sampled beside it.

    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,\
clocks_event_reasons.active --format=csv,noheader,nounits -lms 25 > smi.csv &
    flashtile bench ... --rounds 3 --timing-log timings.jsonl
    python scripts/clock_join.py --smi smi.csv --timings timings.jsonl [--csv out.csv]

Per timing (one do_bench of one backend, mode and round) it prints the milliseconds
beside the mean SM clock, board power and temperature of the samples taken while it ran,
and the share of them under the software power cap. The question it answers: when a
kernel's time moves between rounds, did the clock move with it.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import statistics
import sys

POWER_CAP_BIT = 0x4  # clocks_event_reasons: SW power cap


def read_smi(path: str) -> list[tuple[datetime.datetime, float, float, float, int]]:
    """(time, MHz, W, degrees C, reasons mask) per sample; unparsable lines skipped."""
    samples = []
    with open(path) as f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) < 5:
                continue
            try:
                when = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f")
                samples.append((when, float(parts[1]), float(parts[2]), float(parts[3]),
                                int(parts[4], 16)))
            except ValueError:
                continue
    return samples


def join(timings: list[dict], samples: list) -> list[dict]:
    """Each timing with the mean clock / power / temperature of its samples (None
    without any) and the share of them under the software power cap."""
    rows = []
    for t in timings:
        start = datetime.datetime.fromisoformat(t["start"])
        end = datetime.datetime.fromisoformat(t["end"])
        inside = [s for s in samples if start <= s[0] <= end]
        row = dict(t, samples=len(inside))
        for i, name in ((1, "mhz"), (2, "watts"), (3, "temp_c")):
            row[name] = statistics.mean(s[i] for s in inside) if inside else None
        row["power_capped"] = (sum(1 for s in inside if s[4] & POWER_CAP_BIT) / len(inside)
                               if inside else None)
        rows.append(row)
    return rows


def _fmt(x, spec):
    """``x`` formatted by ``spec`` (a width first), or a dash as wide where None."""
    return format(x, spec) if x is not None else "-".rjust(int(spec.split(".")[0]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smi", required=True, help="nvidia-smi -lms log (see the docstring)")
    ap.add_argument("--timings", required=True, help="flashtile bench --timing-log JSONL")
    ap.add_argument("--csv", help="write the joined rows here")
    args = ap.parse_args(argv)
    with open(args.timings) as f:
        timings = [json.loads(line) for line in f if line.strip()]
    samples = read_smi(args.smi)
    if not timings or not samples:
        print(f"clock_join: {len(timings)} timings, {len(samples)} samples: nothing to join",
              file=sys.stderr)
        return 1
    rows = join(timings, samples)
    last = None
    for r in rows:
        cell = (r["shape"], r["causal"])
        if cell != last:
            print(f"\n{r['shape']}{' causal' if r['causal'] else ''}\n"
                  f"{'backend':<16}{'mode':<9}{'round':>5}{'ms':>9}{'MHz':>7}{'W':>6}"
                  f"{'C':>5}{'capped':>8}{'n':>4}")
            last = cell
        print(f"{r['backend']:<16}{r['mode']:<9}{r['round']:>5}{r['ms']:>9.3f}"
              f"{_fmt(r['mhz'], '7.0f')}{_fmt(r['watts'], '6.0f')}{_fmt(r['temp_c'], '5.0f')}"
              f"{_fmt(r['power_capped'], '8.0%')}{r['samples']:>4}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
