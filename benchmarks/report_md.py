#!/usr/bin/python3
"""The two edits benchmarks/report.sh makes to the documents.

  report_md.py splice DOC NAME FRAGMENT
      Replaces what lies between the lines "<!-- report.sh NAME begin -->"
      and "<!-- report.sh NAME end -->" of DOC with the file FRAGMENT.
      Fails (status 1) when DOC lacks the pair: the generator never
      guesses where a table goes.
  report_md.py headline API.json APPS.md STAMP
      Prints the README's headline sentence from the same run's
      vsocket-bench JSON and benchmarks/apps/run.sh --markdown table.
"""
import json
import re
import sys


def splice(doc, name, fragment):
    text = open(doc).read()
    begin, end = f"<!-- report.sh {name} begin -->", f"<!-- report.sh {name} end -->"
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        print(f"{doc}: no '{begin}' ... '{end}' pair", file=sys.stderr)
        return 1
    body = open(fragment).read().strip("\n")
    text = text[:i + len(begin)] + "\n" + body + "\n" + text[j:]
    open(doc, "w").write(text)
    return 0


def api_point(results, transport, mode, size):
    for r in results:
        if (r["transport"], r["mode"], r["msg_size"], r["status"]) == (transport, mode, size, "ok"):
            return r
    return None


def app_ratio(apps_md, name):
    # Rows: | name | plain | vsocket | **1.23x** (...) | ...
    for line in open(apps_md):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == name and len(cells) > 3:
            m = re.search(r"[0-9.]+x", cells[3])
            return m.group(0) if m else "n/a"
    return "n/a"


def headline(api_json, apps_md, stamp):
    results = json.load(open(api_json))["results"]
    tcp_pp, shm_pp = (api_point(results, t, "pingpong", 64) for t in ("tcp", "shm"))
    tcp_st, shm_st = (api_point(results, t, "stream", 64) for t in ("tcp", "shm"))
    parts = []
    if tcp_pp and shm_pp:
        parts.append(f"a 64 B round trip over shared memory takes {shm_pp['latency_p50_us']:.2f} µs "
                     f"against kernel TCP's {tcp_pp['latency_p50_us']:.2f} µs "
                     f"({tcp_pp['latency_p50_us'] / shm_pp['latency_p50_us']:.2f}x, medians)")
    if tcp_st and shm_st:
        parts.append(f"64 B messages stream {shm_st['messages_per_s'] / tcp_st['messages_per_s']:.2f}x "
                     f"as fast at {shm_st['cpu_us_per_msg']:.3f} µs of CPU each "
                     f"(TCP {tcp_st['cpu_us_per_msg']:.3f})")
    apps = [(n, app_ratio(apps_md, n)) for n in
            ("redis GET -P 1", "memcached -u root, memaslap -c16", "nginx 64 KiB file, wrk -c10")]
    parts.append("unchanged programs under `vsocket-run`: " +
                 ", ".join(f"{n.split(',')[0]} {r}" for n, r in apps))
    print(f"Measured {stamp}: " + "; ".join(parts) +
          ". Every figure against kernel TCP in the same run; all tables, commands and "
          "what limits the misses: [docs/BENCHMARKS.md](docs/BENCHMARKS.md).")
    return 0


def main(argv):
    if len(argv) == 5 and argv[1] == "splice":
        return splice(argv[2], argv[3], argv[4])
    if len(argv) == 5 and argv[1] == "headline":
        return headline(argv[2], argv[3], argv[4])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
