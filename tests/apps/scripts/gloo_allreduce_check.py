#!/usr/bin/python3
"""One rank of a two-rank torch.distributed all_reduce over gloo.

Usage: gloo_allreduce_check.py RANK PORT
Each rank fills a 4 MiB float32 tensor with rank+1, all_reduces it (sum) and
checks that every element equals 3.0; prints "PASS rank=<rank>" then.
"""
import sys
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> int:
    rank, port = int(sys.argv[1]), int(sys.argv[2])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=2,
                            timeout=timedelta(seconds=30))
    tensor = torch.full((4 * 1024 * 1024 // 4,), float(rank + 1),
                        dtype=torch.float32)
    dist.all_reduce(tensor)
    ok = bool(torch.all(tensor == 3.0))
    dist.barrier()
    dist.destroy_process_group()
    if not ok:
        wrong = int((tensor != 3.0).sum())
        print(f"rank {rank}: {wrong} elements differ from 3.0, e.g. {tensor[:4]}",
              file=sys.stderr)
        return 1
    print(f"PASS rank={rank} elements={tensor.numel()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
