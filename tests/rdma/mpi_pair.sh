#!/usr/bin/env bash
# Two-guest MPI test: an all-reduce (tests/apps/scripts/mpi_allreduce.py,
# mpi4py) over Open MPI's TCP transport (btl tcp), rank 0 in guest a and
# rank 1 in guest b, launched by mpirun in guest a without ssh: Open MPI's
# remote-shell agent is tests/rdma/mpi_file_rsh.sh, which hands the daemon's
# command line to guest b through the directory both guests share. One boot
# of the pair runs the job twice:
#   1. tcp      plain kernel TCP;
#   2. vsocket  every process (mpirun, the daemon in guest b, both ranks)
#               under vsocket-run, default policy: both ranks' connections
#               must be on RDMA, none moved to TCP. The connection between
#               mpirun and the daemon stays on kernel TCP (peer_not_vsocket):
#               mpirun forks to start the agent and the local rank, and a
#               process that forks stops offering RDMA on its listeners
#               (rdma_backend/rdma_acceptor.h, "Fork").
# Each rank checks the sum exactly against its own computation; the two runs'
# results must have the same SHA-256. The all-reduce times are printed with
# their ratio (a TCG guest: ratios only).
#
#   tests/rdma/mpi_pair.sh BUILD_DIR
#
# Needs: root, Open MPI's mpirun and /usr/bin/python3 with mpi4py and numpy
# (openmpi-bin, python3-mpi4py), BUILD_DIR's vsocket-run, what run-in-guest.sh
# needs. Environment: VSOCKET_MPI_TIMEOUT (guest deadline, default 600 s).
# Exit status: 0 pass; 1 a check or a rank failed; 2 usage; 77 no Open MPI
# or mpi4py here; 124 guest deadline; 125 harness failure.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=tests/rdma/pair-common.sh
source "$repo/tests/rdma/pair-common.sh"
runs=(tcp vsocket)
script=$repo/tests/apps/scripts/mpi_allreduce.py

# ---- in guest a: mpirun, one run after the other ----
if [[ ${1:-} == --guest-a ]]; then
  vrun=$2 out=$3
  export VSOCKET_MPI_LAUNCH_DIR=$out VSOCKET_RDMA_PROBE_MS=3000
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  for run in "${runs[@]}"; do
    export VSOCKET_MPI_RUN=$run
    pre=()
    [[ $run == vsocket ]] && pre=("$vrun" --stats --)
    echo "mpirun: run $run"
    # The ranks' stderr (and so their VSOCKET_STATS lines) goes to a file
    # each, named by the rank Open MPI gives it.
    timeout 400 "${pre[@]}" mpirun --allow-run-as-root -np 2 \
      --host "$VSOCKET_RDMA_SELF_IP:1,$VSOCKET_RDMA_PEER_IP:1" \
      --mca plm_rsh_agent "$repo/tests/rdma/mpi_file_rsh.sh" \
      --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
      bash -c "exec /usr/bin/python3 $script $out/$run 2>$out/$run.rank\$OMPI_COMM_WORLD_RANK.stderr"
  done
  exit 0
fi
# ---- in guest b: run each daemon command guest a's agent hands over ----
if [[ ${1:-} == --guest-b ]]; then
  vrun=$2 out=$3
  export VSOCKET_RDMA_PROBE_MS=3000 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  for run in "${runs[@]}"; do
    for _ in $(seq 6000); do [[ -e $out/$run.launch ]] && break; sleep 0.1; done
    [[ -e $out/$run.launch ]] || { echo "guest b: no launch for run $run" >&2; exit 1; }
    pre=()
    [[ $run == vsocket ]] && pre=("$vrun" --stats --)
    status=0
    timeout 400 "${pre[@]}" bash -c "$(cat "$out/$run.launch")" || status=$?
    echo "$status" >"$out/$run.done"
  done
  exit 0
fi

# ---- on the host ----
if (($# != 1)) || [[ $1 == -* ]]; then
  sed -n '2,27s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
  exit 2
fi
vrun=$(cd "$1" && pwd)/preload/vsocket-run
[[ -x $vrun ]] || { echo "mpi-pair: $vrun not built" >&2; exit 2; }
if ! command -v mpirun >/dev/null || ! /usr/bin/python3 -c 'import mpi4py, numpy' 2>/dev/null; then
  echo "mpi-pair: SKIP: no Open MPI or mpi4py (apt-get install openmpi-bin python3-mpi4py)" >&2
  exit 77
fi
work=$(mktemp -d /tmp/mpi-pair.XXXXXX)
trap 'rm -rf "$work"' EXIT
out=$work/out
mkdir "$out"

self=$repo/tests/rdma/mpi_pair.sh
echo "mpi-pair: MPI_Allreduce of 4 MiB, 2 ranks in 2 guests, btl tcp, runs: ${runs[*]}"
status=0
"$repo/tests/rdma_vm/run-in-guest.sh" --timeout "${VSOCKET_MPI_TIMEOUT:-600}" --writable "$out" \
  --pair "bash $self --guest-a $vrun $out" "bash $self --guest-b $vrun $out" || status=$?
((status == 0)) || fail_with_rank_logs mpi-pair "$status" "$out"

want=$(json_field "$out/tcp.0.json" sha256)
for run in "${runs[@]}"; do
  for rank in 0 1; do
    if [[ $(json_field "$out/$run.$rank.json" ok) != True ]]; then
      echo "mpi-pair: FAIL: run $run rank $rank computed a wrong sum" >&2
      exit 1
    fi
    got=$(json_field "$out/$run.$rank.json" sha256)
    if [[ $got != "$want" ]]; then
      echo "mpi-pair: FAIL: run $run rank $rank ended with $got, the TCP run's rank 0 with $want" >&2
      exit 1
    fi
  done
done
echo "mpi-pair: sums exact on both ranks, identical in both runs: ${want:0:16}..."
for rank in 0 1; do
  line=$(grep '^{"pid"' "$out/vsocket.rank$rank.stderr" | tail -n 1 || true)
  echo "mpi-pair: vsocket run, rank $rank stats: $line"
  if [[ $line != *'"rdma":{"connections":'[1-9]* || $line != *'"fallback_reasons":{}'* ]]; then
    echo "mpi-pair: FAIL: rank $rank's connections are not all on RDMA" >&2
    exit 1
  fi
done
tcp_ms=$(json_field "$out/tcp.0.json" allreduce_ms_mean)
for run in "${runs[@]}"; do
  awk -v r="$run" -v ms="$(json_field "$out/$run.0.json" allreduce_ms_mean)" -v base="$tcp_ms" \
    'BEGIN { printf "mpi-pair: all-reduce %-8s %8.1f ms  %.2fx the TCP run\n", r, ms, ms / base }'
done
echo "mpi-pair: PASS"
