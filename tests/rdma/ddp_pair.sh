#!/usr/bin/env bash
# Two-guest training test: a data-parallel PyTorch job (DistributedDataParallel,
# gloo, tests/apps/scripts/ddp_train.py) with rank 0 in guest a and rank 1 in
# guest b, rendezvous by TCPStore on guest a (no ssh, no launcher). One boot
# of the pair runs the same job three times:
#   1. tcp      plain kernel TCP, no interposer;
#   2. rdma     both ranks under vsocket-run, default policy: the ranks'
#               connections to each other must be on RDMA (both ends'
#               VSOCKET_STATS), none on TCP;
#   3. refused  both ranks under vsocket-run, but rank 0 with
#               --transport tcp: its listeners offer no RDMA, so rank 1's
#               probes are refused and every connection between the guests
#               is kernel TCP, with a named reason in rank 1's stats.
# The final parameters (SHA-256 of every parameter's bytes) must be the same
# on both ranks and in all three runs. The step times are printed with their
# ratios to the TCP run (a TCG guest: ratios only).
#
#   tests/rdma/ddp_pair.sh BUILD_DIR
#
# With VSOCKET_DDP_GUESTS=3 (or 4): as many ranks in as many guests on one
# emulated segment (run-in-guest.sh --group), so that gloo's all-reduce is a
# ring (the seed's ring layout); runs 1 and 2 only (every rank but rank 0
# would still reach the others over RDMA in run 3).
#
# Needs: root, /usr/bin/python3 with torch (python3-torch), BUILD_DIR's
# vsocket-run, what run-in-guest.sh needs. Environment: VSOCKET_DDP_STEPS
# (default 12), VSOCKET_DDP_TIMEOUT (guest deadline, default 900 s).
# Exit status: 0 pass; 1 a check failed or a rank failed; 2 usage; 77 no
# torch on this machine; 124 guest deadline; 125 harness failure.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=tests/rdma/pair-common.sh
source "$repo/tests/rdma/pair-common.sh"
if (($# != 1)) || [[ $1 == -* ]]; then
  sed -n '2,29s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
  exit 2
fi
vrun=$(cd "$1" && pwd)/preload/vsocket-run
[[ -x $vrun ]] || { echo "ddp-pair: $vrun not built" >&2; exit 2; }
if ! /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
  echo "ddp-pair: SKIP: /usr/bin/python3 has no torch (apt-get install python3-torch)" >&2
  exit 77
fi
train=$repo/tests/apps/scripts/ddp_train.py
steps=${VSOCKET_DDP_STEPS:-12}
guests=${VSOCKET_DDP_GUESTS:-2}
[[ $guests =~ ^[234]$ ]] || { echo "ddp-pair: VSOCKET_DDP_GUESTS must be 2, 3 or 4" >&2; exit 2; }
runs=(tcp rdma refused)
((guests == 2)) || runs=(tcp rdma)
sides=(a b c d)
sides=("${sides[@]:0:guests}")

work=$(mktemp -d /tmp/ddp-pair.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/out"
out=$work/out

# Rank 0 (guest a) serves the store on its own address. Once the kernel
# lists the store's port as listening, a marker in the shared directory lets
# the other guests start (an early attempt would be refused, and a refused
# RDMA probe is remembered: the next ones would take TCP).
cmds=()
for r in "${!sides[@]}"; do
  if ((r == 0)); then
    cmds[r]='set -e; export GLOO_SOCKET_IFNAME=eth0 VSOCKET_RDMA_PROBE_MS=3000'
  else
    cmds[r]='set -e; export GLOO_SOCKET_IFNAME=eth0 VSOCKET_RDMA_PROBE_MS=3000 VSOCKET_RDMA_NEGATIVE_TTL_MS=0'
  fi
done
for i in "${!runs[@]}"; do
  run=${runs[$i]}
  port=$((29500 + 10 * i))
  for r in "${!sides[@]}"; do
    side=${sides[$r]}
    case $run in
    tcp) pre='' ;;
    rdma) pre="$vrun --stats --" ;;
    refused) if ((r == 0)); then pre="$vrun --transport tcp --stats --"; else pre="$vrun --stats --"; fi ;;
    esac
    if ((r == 0)); then
      # shellcheck disable=SC2016
      cmds[r]+=$(printf '; echo "rank 0: run %s"; timeout 600 %s /usr/bin/python3 %q 0 %d "$VSOCKET_RDMA_SELF_IP" %d %q %d 2>%q & pid=$!; for t in $(seq 3000); do ss -ltn | grep -q ":%d " && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done; touch %q; wait $pid' \
        "$run" "$pre" "$train" "$guests" "$port" "$out/a.$run.json" "$steps" "$out/a.$run.stderr" "$port" "$out/a.$run.listening")
    else
      # shellcheck disable=SC2016
      # (guest a's address: the first of the group's)
      cmds[r]+=$(printf '; echo "rank %d: run %s"; for t in $(seq 6000); do [ -e %q ] && break; sleep 0.1; done; timeout 600 %s /usr/bin/python3 %q %d %d "${VSOCKET_RDMA_GROUP_IPS%%%% *}" %d %q %d 2>%q' \
        "$r" "$run" "$out/a.$run.listening" "$pre" "$train" "$r" "$guests" "$port" "$out/$side.$run.json" "$steps" "$out/$side.$run.stderr")
    fi
  done
done

echo "ddp-pair: DDP, $guests ranks in $guests guests, $steps steps, runs: ${runs[*]}"
status=0
mode=--pair
((guests == 2)) || mode=--group
"$repo/tests/rdma_vm/run-in-guest.sh" --timeout "${VSOCKET_DDP_TIMEOUT:-900}" \
  --writable "$out" "$mode" "${cmds[@]}" || status=$?
((status == 0)) || fail_with_rank_logs ddp-pair "$status" "$out"

stats_line() {  # FILE: the last VSOCKET_STATS line of a stderr file
  grep '^{"pid"' "$1" | tail -n 1 || true
}

want=$(json_field "$out/a.tcp.json" params_sha256)
for run in "${runs[@]}"; do
  for side in "${sides[@]}"; do
    got=$(json_field "$out/$side.$run.json" params_sha256)
    if [[ $got != "$want" ]]; then
      echo "ddp-pair: FAIL: run $run guest $side ended with parameters $got, the TCP run's rank 0 with $want" >&2
      exit 1
    fi
  done
done
echo "ddp-pair: final parameters identical on every rank in every run: ${want:0:16}..."

for side in "${sides[@]}"; do
  line=$(stats_line "$out/$side.rdma.stderr")
  echo "ddp-pair: rdma run, guest $side stats: $line"
  if [[ $line != *'"rdma":{"connections":'[1-9]* ]]; then
    echo "ddp-pair: FAIL: rank in guest $side has no connection on RDMA" >&2
    exit 1
  fi
  if [[ $line != *'"fallback_reasons":{}'* ]]; then
    echo "ddp-pair: FAIL: rank in guest $side moved connections to TCP" >&2
    exit 1
  fi
done
if ((guests == 2)); then
  line=$(stats_line "$out/b.refused.stderr")
  echo "ddp-pair: refused run, guest b stats: $line"
  if [[ $line == *'"rdma":{'* || $line == *'"fallback_reasons":{}'* ]]; then
    echo "ddp-pair: FAIL: with RDMA refused by rank 0, rank 1 should be on TCP with a named reason" >&2
    exit 1
  fi
fi
tcp_ms=$(json_field "$out/a.tcp.json" step_ms_mean)
for run in "${runs[@]}"; do
  ms=$(json_field "$out/a.$run.json" step_ms_mean)
  awk -v r="$run" -v ms="$ms" -v base="$tcp_ms" \
    'BEGIN { printf "ddp-pair: step time %-8s %8.1f ms  %.2fx the TCP run\n", r, ms, ms / base }'
done
echo "ddp-pair: PASS"
