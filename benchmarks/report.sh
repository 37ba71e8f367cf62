#!/usr/bin/env bash
# Runs the benchmarks and writes their tables into docs/BENCHMARKS.md (the
# parts between "<!-- report.sh NAME begin/end -->"), docs/plot.svg and the
# README's headline sentence, all from the one run, each table stamped with
# its date, commit, machine and command.  Nothing in those parts is typed
# by hand.
#
# Usage: benchmarks/report.sh [--quick] [--skip-rdma | --rdma-only | --only LIST]
#                             [--build DIR] [--out DIR]
#   sections   api    vsocket-bench --local, kernel TCP vs shm (and auto),
#                     plus docs/plot.svg and the README's headline
#              apps   benchmarks/apps/run.sh: real programs, both ends
#              toe    vsocket-bench and apps/run.sh with toe on our side,
#                     the peer a plain kernel-TCP program
#              rdma   benchmarks/rdma/run.sh: a Soft-RoCE QEMU guest
#   --quick      short points (200 ms, apps 1 s, RDMA 16 MiB and 500
#                round trips): to test this script, not to publish; the
#                stamp says so
#   --skip-rdma  everything but the guest; --rdma-only the guest alone;
#                --only LIST a comma list of sections
#   --build DIR  build tree (default <repo>/build-release; its benchmark
#                targets are built first)
#   --out DIR    raw outputs: JSON, logs, fragments (default
#                <repo>/bench-results/report)
# Needs root (perf counts system calls; the guest), perf, the programs of
# scripts/install-deps.sh --apps, and a quiet machine: every figure is a
# ratio to kernel TCP in the same run, but a busy host still moves them.
# A --quick run took 6-12 minutes for the host sections and 5.5 for the
# guest on the loaded 2-CPU development VM; the full run about twice that.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$repo/build-release
out=$repo/bench-results/report
quick=0
sections=(api apps toe rdma)
while (($#)); do
  case $1 in
    --quick) quick=1; shift ;;
    --skip-rdma) sections=(api apps toe); shift ;;
    --rdma-only) sections=(rdma); shift ;;
    --only) IFS=, read -r -a sections <<<"$2"; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,29s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "report: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
doc=$repo/docs/BENCHMARKS.md
readme=$repo/README.md
py=/usr/bin/python3
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=$(cd "$build" && pwd)
bench=$build/benchmarks/vsocket-bench

if ((quick)); then duration=200 app_seconds=1; else duration=1000 app_seconds=3; fi
cmake --build "$build" --target vsocket-bench vsocket-run vsocket_preload >/dev/null

# --- the stamp every table carries ---------------------------------------------
commit=$(git -C "$repo" rev-parse --short HEAD)
git -C "$repo" diff --quiet HEAD -- ':!docs/BENCHMARKS.md' ':!docs/plot.svg' ':!README.md' ||
  commit="$commit + uncommitted changes"
machine() {
  local cpu mem os cxx
  cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
  mem=$(awk '/^MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)
  os=$(. /etc/os-release && echo "$PRETTY_NAME")
  cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
  cxx=$("${cxx:-c++}" --version | head -1)
  echo "$(nproc) CPUs ($cpu), $mem, $os, kernel $(uname -r), $cxx, $(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt") build"
}
stamp() {  # the line under each section's heading
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit$( ((quick)) && echo ", **--quick run: a test of the generator, not figures to quote**"). $(machine). Load average before: $(cut -d' ' -f1-3 /proc/loadavg)."
}

# --- vsocket-bench, and its system calls counted point by point ------------------
# count_points JSON TSV EXTRA...: for every ok point of JSON, perf counts the
# system calls of vsocket-bench (orchestrator, server and client processes)
# in a run of that point alone (at least 1 s) and in one of a single
# message; the difference over the difference in messages is the cost per
# message, without the processes' start and the connection's setup.  "n/a"
# when the setup's own spread outweighs the messages (a loaded host).
count_points() {
  local json=$1 tsv=$2 t mode size; shift 2
  : >"$tsv"
  # shellcheck disable=SC2016
  while read -r t mode size; do
    local sizes=(--sizes "$size") calls=() msgs=() cap
    [[ $mode == connect ]] && sizes=()
    for cap in 0 1; do
      local args=(--local "$@" --transports "$t" --mode "$mode" "${sizes[@]}" --warmup-ms 0 --json "$out/count.json")
      if ((cap)); then args+=(--duration-ms 1 --max-messages 1); else args+=(--duration-ms $((duration < 1000 ? 1000 : duration))); fi
      perf stat -x, -e raw_syscalls:sys_enter -o "$out/count.perf" -- "$bench" "${args[@]}" >/dev/null 2>&1 || true
      calls+=("$(awk -F, '$3 == "raw_syscalls:sys_enter" {print $1}' "$out/count.perf")")
      msgs+=("$("$py" -c 'import json,sys; r=[r for r in json.load(open(sys.argv[1]))["results"] if r["status"]=="ok"]; print(r[0]["messages"] if r else 0)' "$out/count.json" 2>/dev/null || echo 0)")
    done
    printf '%s\t%s\t%s\t%s\n' "$t" "$mode" "$size" "$(awk -v c="${calls[0]:-0}" -v c1="${calls[1]:-0}" -v m="${msgs[0]}" -v m1="${msgs[1]}" \
      'BEGIN { if (m - m1 <= 0 || c <= 0 || c < c1) print "n/a"; else printf "%.3f", (c - c1) / (m - m1) }')" >>"$tsv"
  done < <("$py" -c 'import json,sys
for r in json.load(open(sys.argv[1]))["results"]:
    if r["status"] == "ok": print(r["transport"], r["mode"], r["msg_size"])' "$json")
}

# bench_section NAME TITLE EXTRA...: runs vsocket-bench --local EXTRA with
# --json (and, for api, --plot), counts, writes OUT/NAME.md.
bench_section() {
  local name=$1 title=$2; shift 2
  local args=(--local "$@" --duration-ms "$duration")
  local shown="build-release/benchmarks/vsocket-bench ${args[*]}"
  local head; head=$(stamp)
  local plot=()
  [[ $name == api ]] && plot=(--plot "$repo/docs/plot.svg")
  echo "report: $name: vsocket-bench ${args[*]}" >&2
  "$bench" "${args[@]}" --json "$out/$name.json" "${plot[@]}" >"$out/$name.txt"
  echo "report: $name: counting system calls per point" >&2
  count_points "$out/$name.json" "$out/$name.counts" "${@}"
  {
    echo "### $title"
    echo
    echo "$head"
    echo
    echo "\`$shown\`; system calls: each point alone again under \`perf stat -e raw_syscalls:sys_enter\`, minus a one-message run (benchmarks/report.sh). CPU: \`getrusage\` of both processes over the measured window."
    echo
    "$py" "$repo/benchmarks/bench_markdown.py" "$out/$name.json" "$out/$name.counts"
  } >"$out/$name.md"
}

apps_section() {  # NAME TITLE RUN.SH-OPTIONS...
  local name=$1 title=$2; shift 2
  local head; head=$(stamp)
  echo "report: $name: benchmarks/apps/run.sh $*" >&2
  "$repo/benchmarks/apps/run.sh" --vsocket-run "$build/preload/vsocket-run" --seconds "$app_seconds" \
    "$@" --markdown "$out/$name.table" >"$out/$name.txt" 2>"$out/$name.log"
  {
    echo "### $title"
    echo
    echo "$head"
    echo
    echo "\`benchmarks/apps/run.sh --seconds $app_seconds $*\`: rates from one pass, then every client run once more for the costs: system calls and CPU (\`perf stat -e raw_syscalls:sys_enter,task-clock\`) of client + server over the client's whole run, per message (a round trip for sockperf ping-pong, a request for servers, a write for iperf3; for gloo and DDP both ranks per all_reduce or training step, over the timed loop only: \`perf stat --delay -1 --control\`, turned on by the rank)."
    echo
    cat "$out/$name.table"
  } >"$out/$name.md"
}

rdma_section() {
  local head; head=$(stamp)
  local env=()
  ((quick)) && env=(RDMA_BENCH_MIB=16 RDMA_BENCH_PINGS=500)
  echo "report: rdma: benchmarks/rdma/run.sh (a QEMU guest)" >&2
  local status=0
  env "${env[@]}" "$repo/benchmarks/rdma/run.sh" --build "$build" --out "$out/rdma" >"$out/rdma.txt" 2>&1 || status=$?
  {
    echo "### RDMA: Soft-RoCE in a QEMU guest"
    echo
    echo "$head (host; the guest's line follows)"
    echo
    echo "\`${env[*]}${env:+ }benchmarks/rdma/run.sh\` (one guest, every row in the same boot; exit status $status)."
    echo
    cat "$out/rdma/results.md" 2>/dev/null || echo "No results: see $out/rdma.txt."
  } >"$out/rdma.md"
}

for section in "${sections[@]}"; do
  case $section in
    api) bench_section api "Explicit API: vsocket-bench, kernel TCP against shared memory" \
           --transports tcp,shm,auto ;;
    apps) apps_section apps "Real programs: plain, then both ends under vsocket-run" ;;
    toe)
      bench_section toe-bench "toe: our side sends through the io_uring engine, the peer is plain kernel TCP" \
        --transports tcp,toe --server-transport tcp --mode stream,pingpong --sizes 64,64K
      apps_section toe-apps "toe: the server under vsocket-run --transport toe, plain clients" \
        --transport toe --server-only --only redis,nginx
      { cat "$out/toe-bench.md"; echo; cat "$out/toe-apps.md"; } >"$out/toe.md" ;;
    rdma) rdma_section ;;
  esac
  "$py" "$repo/benchmarks/report_md.py" splice "$doc" "$section" "$out/$section.md"
done

if [[ " ${sections[*]} " == *" api "* ]]; then
  # The plot's title says which run it is.
  sed -i "s|ms per point</text>|ms per point, $(date -u +%Y-%m-%d), $commit</text>|" "$repo/docs/plot.svg"
  if [[ -f $out/apps.table ]]; then
    "$py" "$repo/benchmarks/report_md.py" headline "$out/api.json" "$out/apps.table" \
      "$(date -u +%Y-%m-%d), commit $commit$( ((quick)) && echo " (a --quick run)")" >"$out/headline.md"
    "$py" "$repo/benchmarks/report_md.py" splice "$readme" headline "$out/headline.md"
  fi
fi
echo "report: wrote ${sections[*]} into $doc$([[ " ${sections[*]} " == *" api "* ]] && echo ", docs/plot.svg, README.md's headline"); raw outputs in $out"
