#!/usr/bin/python3
"""One rank of an MPI all-reduce (mpi4py over Open MPI), checked exactly.

Usage: mpi_allreduce.py OUT_JSON_PREFIX [MIB]
Every rank fills MIB (default 4) MiB of float32 from a generator seeded
with its rank, all-reduces them (sum) 5 times and compares the result with
the sum it computes itself from every rank's seed: with two ranks each
element is one addition, so the result is exact whatever carries the bytes.
Writes {"rank", "size", "ok", "sha256", "allreduce_ms_mean"} to
OUT_JSON_PREFIX.<rank>.json and exits 0 only if the result is right.
"""
import hashlib
import json
import sys
import time

import numpy as np
from mpi4py import MPI


def data(rank: int, n: int) -> np.ndarray:
    return np.random.default_rng(1000 + rank).standard_normal(n, dtype=np.float32)


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    n = (int(sys.argv[2]) if len(sys.argv) == 3 else 4) * (1 << 20) // 4
    mine = data(rank, n)
    want = data(0, n)
    for r in range(1, size):
        want = want + data(r, n)
    out = np.empty_like(mine)
    times = []
    ok = True
    for _ in range(5):
        comm.Barrier()
        t0 = time.perf_counter()
        comm.Allreduce(mine, out, op=MPI.SUM)
        times.append((time.perf_counter() - t0) * 1e3)
        ok = ok and bool(np.array_equal(out, want))
    result = {"rank": rank, "size": size, "ok": ok,
              "sha256": hashlib.sha256(out.tobytes()).hexdigest(),
              "allreduce_ms_mean": sum(times) / len(times)}
    with open(f"{sys.argv[1]}.{rank}.json", "w", encoding="ascii") as f:
        json.dump(result, f)
        f.write("\n")
    print(f"rank {rank}/{size} on {MPI.Get_processor_name()}: "
          f"{'PASS' if ok else 'FAIL'} {result['sha256'][:16]} "
          f"{result['allreduce_ms_mean']:.1f} ms", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
