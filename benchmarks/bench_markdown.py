#!/usr/bin/python3
"""Markdown tables from a vsocket-bench --json file, every figure against the
kernel-TCP row of the same run.

Usage: bench_markdown.py RESULTS.json [COUNTS.tsv]

COUNTS.tsv (written by benchmarks/report.sh, optional): one line per point,
"transport<TAB>mode<TAB>msg_size<TAB>system calls per message", counted in a
separate run of that point alone, so that counting never slows the figures.
One table per mode; a row per size and non-tcp transport.  The CPU column is
vsocket-bench's own: getrusage of client + server over the measured window,
per message (a round trip for ping-pong, a connection for connect).
"""
import json
import sys


def size_text(n):
    for unit, name in ((1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {name}"
    return f"{n} B"


def num(v, digits=2):
    return "n/a" if v is None else f"{v:,.{digits}f}"


def load_counts(path):
    counts = {}
    if path:
        with open(path) as f:
            for line in f:
                t, mode, size, per_msg = line.rstrip("\n").split("\t")
                counts[(t, mode, int(size))] = per_msg
    return counts


# mode -> (title, headline column, how to print a result's headline, higher is better)
MODES = {
    "pingpong": ("Ping-pong (one message each way), round-trip p50",
                 "round trip p50 (p99), µs",
                 lambda r: f"{num(r['latency_p50_us'])} ({num(r['latency_p99_us'])})",
                 lambda r: r["latency_p50_us"], False, "round trip"),
    "stream": ("Streaming, one direction, counted by the receiver",
               "throughput",
               lambda r: (f"{num(r['messages_per_s'] / 1e6, 3)} M msg/s" if r["msg_size"] < 1024
                          else f"{num(r['gb_per_s'], 3)} GB/s"),
               lambda r: r["messages_per_s"], True, "message"),
    "connect": ("Connection setup (connect, accept, 1-byte echo, close), sequential",
                "connections/s, first byte p50 µs",
                lambda r: f"{num(r['messages_per_s'], 0)}/s, {num(r['latency_p50_us'], 1)}",
                lambda r: r["messages_per_s"], True, "connection"),
}


def label(r):
    t, actual = r["transport"], r.get("actual_transport") or r["transport"]
    return t if t == actual else f"{t} ({actual})"


def main(argv):
    doc = json.load(open(argv[1]))
    counts = load_counts(argv[2] if len(argv) > 2 else None)
    ok = [r for r in doc["results"] if r["status"] == "ok"]
    out = []
    for mode, (title, column, show, key, higher, unit) in MODES.items():
        rows = [r for r in ok if r["mode"] == mode]
        if not rows:
            continue
        base = {r["msg_size"]: r for r in rows if r["transport"] == "tcp"}
        others = [r for r in rows if r["transport"] != "tcp"]
        if not others:
            continue
        out.append(f"{title}:\n")
        out.append(f"| {'size, ' if mode != 'connect' else ''}transport | kernel TCP: {column} "
                   f"| vsocket: {column} | vsocket vs TCP | CPU µs per {unit}, TCP → vsocket "
                   f"| system calls per {unit}, TCP → vsocket |")
        out.append("|---|---|---|---|---|---|")
        order = {t: i for i, t in enumerate(doc["transports"])}
        for r in sorted(others, key=lambda r: (r["msg_size"], order.get(r["transport"], 99))):
            b = base.get(r["msg_size"])
            ratio = "n/a"
            if b and key(b) and key(r):
                ratio = f"**{(key(r) / key(b) if higher else key(b) / key(r)):.2f}x**"
            where = f"{size_text(r['msg_size'])}, " if mode != "connect" else ""
            syscalls = (f"{counts.get(('tcp', mode, r['msg_size']), 'n/a')} → "
                        f"{counts.get((r['transport'], mode, r['msg_size']), 'n/a')}")
            out.append(f"| {where}{label(r)} | {show(b) if b else 'n/a'} | {show(r)} | {ratio} "
                       f"| {num(b['cpu_us_per_msg']) if b else 'n/a'} → {num(r['cpu_us_per_msg'])} "
                       f"| {syscalls} |")
        out.append("")
    failed = [r for r in doc["results"] if r["status"] != "ok"]
    for r in failed:
        out.append(f"Not measured: {r['transport']} {r['mode']} {size_text(r['msg_size'])}: "
                   f"{r['status']}: {r['reason']}")
    print("\n".join(out).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
