#!/usr/bin/env bash
# Old build against new build, alternated in one run: is the fast path no
# slower?  For each round, both builds run the same points, in the order
# old,new on odd rounds and new,old on even ones, so that drift of this
# shared machine falls on both alike.
#
# Usage: benchmarks/compare_builds.sh OLD_BUILD NEW_BUILD [--rounds N]
#          [--markdown FILE] [--realtime]
# OLD_BUILD and NEW_BUILD are build trees holding benchmarks/vsocket-bench
# and preload/vsocket-run (build one of an old commit with
# `git worktree add --detach DIR COMMIT` and the README's cmake line).
#
# Points (the medians over the rounds are compared):
#   vsocket-bench --local, the explicit API over shared memory: 64 B
#     ping-pong p50 round trip, 64 KiB stream GB/s;
#   redis-benchmark GET -P 1 (-c 50, 100,000 requests), both ends under
#     vsocket-run (default transport: auto): the preloaded path, measured
#     by a real program.
# Needs redis-server and redis-benchmark (scripts/install-deps.sh --apps).
# --realtime: every measured process runs under SCHED_FIFO (chrt -f 10,
#   root only), so that other work on a busy machine (builds, guests) does
#   not preempt it; the kernel's RT throttling still leaves 5% of each
#   second to the rest.  Without it such a machine moves the 64 B round
#   trip between 1 and 20 µs (a sleep instead of a spin).
set -euo pipefail

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
(($# >= 2)) || usage
old=$(realpath "$1") new=$(realpath "$2"); shift 2
rounds=5 markdown="" rt=()
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --markdown) markdown=$2; shift 2 ;;
    --realtime) rt=(chrt -f 10); shift ;;
    *) usage ;;
  esac
done
for b in "$old" "$new"; do
  for f in benchmarks/vsocket-bench preload/vsocket-run; do
    [[ -x $b/$f ]] || { echo "compare_builds: $b/$f is missing" >&2; exit 2; }
  done
done
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null ||
  { echo "compare_builds: redis-server/redis-benchmark missing (scripts/install-deps.sh --apps)" >&2; exit 2; }

work=$(mktemp -d)
server_pid=""
cleanup() { [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
  for _ in $(seq 100); do ss -Htln "sport = :$1" | grep -q . && return 0; sleep 0.1; done
  echo "compare_builds: nothing listens on $1" >&2; return 1
}

# One round of one build: appends "point value" lines to $work/<label>.
run_build() {  # label build
  local label=$1 build=$2 out=$work/$1
  "${rt[@]}" "$build/benchmarks/vsocket-bench" --local --mode pingpong --sizes 64 \
    --transports shm --json "$work/pp.json" >/dev/null
  "${rt[@]}" "$build/benchmarks/vsocket-bench" --local --mode stream --sizes 64K \
    --transports shm --json "$work/st.json" >/dev/null
  /usr/bin/python3 - "$work/pp.json" "$work/st.json" >>"$out" <<'PY'
import json, sys
pp = json.load(open(sys.argv[1]))["results"][0]
st = json.load(open(sys.argv[2]))["results"][0]
for r in (pp, st):
    if r["status"] != "ok" or r["actual_transport"] != "shm":
        sys.exit("vsocket-bench point not on shm: %s" % r)
print("api_shm_64B_rtt_p50_us", pp["latency_p50_us"])
print("api_shm_64KiB_stream_GBps", st["gb_per_s"])
PY
  local port; port=$(free_port)
  "${rt[@]}" "$build/preload/vsocket-run" -- redis-server --port "$port" --bind 127.0.0.1 \
    --save "" --appendonly no >/dev/null 2>&1 &
  server_pid=$!
  wait_port "$port"
  "${rt[@]}" "$build/preload/vsocket-run" -- redis-benchmark -p "$port" -t get -n 100000 \
    -c 50 -P 1 -q >"$work/redis.out" 2>&1
  kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""
  local rps; rps=$(tr '\r' '\n' <"$work/redis.out" | grep -E '^GET: [0-9]' | awk '{print $2}' | tail -1)
  [[ -n $rps ]] || { echo "compare_builds: no redis figure:" >&2; cat "$work/redis.out" >&2; exit 1; }
  echo "redis_get_P1_preloaded_rps $rps" >>"$out"
}

for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then order=(old new); else order=(new old); fi
  for label in "${order[@]}"; do
    if [[ $label == old ]]; then run_build old "$old"; else run_build new "$new"; fi
  done
  echo "round $r/$rounds done" >&2
done

/usr/bin/python3 - "$work/old" "$work/new" "$rounds" "$old" "$new" "$markdown" "${rt[*]:-}" <<'PY'
import statistics, sys, datetime
def load(path):
    d = {}
    for line in open(path):
        k, v = line.split()
        d.setdefault(k, []).append(float(v))
    return d
old, new = load(sys.argv[1]), load(sys.argv[2])
lower_is_better = {"api_shm_64B_rtt_p50_us"}
rows = []
for k in old:
    o, n = statistics.median(old[k]), statistics.median(new[k])
    better = "lower" if k in lower_is_better else "higher"
    ratio = (o / n) if better == "lower" else (n / o)   # >1: new is faster
    rows.append((k, o, n, ratio, better, min(new[k]), max(new[k]), min(old[k]), max(old[k])))
head = "%-32s %12s %12s %10s" % ("point (median of %s rounds)" % sys.argv[3], "old", "new", "new vs old")
print(head)
for k, o, n, ratio, better, *_ in rows:
    print("%-32s %12.3f %12.3f %9.3fx  (%s is better; >1x: new faster)" % (k, o, n, ratio, better))
if sys.argv[6]:
    with open(sys.argv[6], "w") as f:
        f.write("Old build `%s`, new build `%s`, %s alternated rounds%s, %s.\n\n" % (
            sys.argv[4], sys.argv[5], sys.argv[3],
            ", SCHED_FIFO" if sys.argv[7] else "", datetime.date.today()))
        f.write("| point | old (median) | new (median) | new vs old | new range | old range |\n|---|---|---|---|---|---|\n")
        for k, o, n, ratio, better, nmin, nmax, omin, omax in rows:
            f.write("| %s (%s is better) | %.3f | %.3f | %.3fx | %.3f-%.3f | %.3f-%.3f |\n" % (
                k, better, o, n, ratio, nmin, nmax, omin, omax))
PY
