#!/usr/bin/python3
"""Two-rank torch.distributed all_reduce over the gloo backend.

Usage: gloo_allreduce.py RANK PORT MIB ITERATIONS
Rank 0 prints "allreduce_ms=<mean ms per all_reduce>" and checks the result.
"""
import sys
import time

import torch
import torch.distributed as dist


def main() -> int:
    rank, port, mib, iterations = (int(a) for a in sys.argv[1:5])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=2)
    n = mib * 1024 * 1024 // 4
    tensor = torch.full((n,), float(rank + 1))
    dist.all_reduce(tensor)  # warm-up
    tensor.fill_(float(rank + 1))
    start = time.perf_counter()
    for _ in range(iterations):
        tensor.fill_(float(rank + 1))
        dist.all_reduce(tensor)
    elapsed = time.perf_counter() - start
    expected = 3.0
    if not torch.all(tensor == expected):
        print(f"allreduce result wrong: {tensor[:4]}", file=sys.stderr)
        return 1
    if rank == 0:
        print(f"allreduce_ms={elapsed / iterations * 1000:.3f}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
