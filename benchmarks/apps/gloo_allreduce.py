#!/usr/bin/python3
"""Two-rank torch.distributed all_reduce over the gloo backend.

Usage: gloo_allreduce.py RANK PORT MIBS ITERATIONS
MIBS is a comma list of sizes in MiB; each size gets one warm-up all_reduce,
then max(ITERATIONS, ITERATIONS * 64 / size) timed ones (more for the small
sizes, so that each takes about as long). Rank 0 checks every result and
prints "allreduce_ms_<MiB>=<mean ms per all_reduce> iterations=<n>" per
size. The timed loops are perf_window.counted() (benchmarks/apps/run.sh's
cost pass).
"""
import sys
import time

import torch
import torch.distributed as dist

from perf_window import counted


def main() -> int:
    rank, port = int(sys.argv[1]), int(sys.argv[2])
    sizes = [int(m) for m in sys.argv[3].split(",")]
    base_iterations = int(sys.argv[4])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=2)
    for mib in sizes:
        iterations = max(base_iterations, base_iterations * 64 // mib)
        tensor = torch.full((mib * 1024 * 1024 // 4,), float(rank + 1))
        dist.all_reduce(tensor)  # warm-up
        dist.barrier()
        with counted():
            start = time.perf_counter()
            for _ in range(iterations):
                tensor.fill_(float(rank + 1))
                dist.all_reduce(tensor)
            elapsed = time.perf_counter() - start
        if not torch.all(tensor == 3.0):
            print(f"allreduce result wrong at {mib} MiB: {tensor[:4]}", file=sys.stderr)
            return 1
        if rank == 0:
            print(f"allreduce_ms_{mib}={elapsed / iterations * 1000:.3f} iterations={iterations}",
                  flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
