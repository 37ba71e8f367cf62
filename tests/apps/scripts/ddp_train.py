#!/usr/bin/python3
"""One rank of a small data-parallel training job (DistributedDataParallel, gloo).

Usage: ddp_train.py RANK WORLD_SIZE MASTER_ADDR PORT OUT_JSON [STEPS]

Rendezvous is a TCPStore on MASTER_ADDR:PORT (rank 0 serves it), so no ssh
or launcher is needed. Every rank builds the same model from a fixed seed,
trains it on its own seeded batches with SGD for STEPS steps (default 12,
the first 2 are warm-up and not timed; the timed ones run in
perf_window.counted() when benchmarks/apps is on the path) and writes one JSON object to
OUT_JSON:
  {"rank", "world_size", "steps", "params_sha256", "final_loss",
   "step_ms_mean", "step_ms_min"}
params_sha256 hashes every parameter's bytes in order: the same on every
rank (DDP keeps replicas equal) and, since a 2-rank sum is exact, the same
whatever carries the bytes (kernel TCP, shared memory, RDMA). One thread
per rank, so the arithmetic does not depend on the machine's core count.
"""
import hashlib
import json
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

try:  # benchmarks/apps/run.sh puts benchmarks/apps on PYTHONPATH
    from perf_window import counted
except ImportError:
    from contextlib import nullcontext as counted

BATCH = 8
WARMUP = 2


def build_model() -> torch.nn.Module:
    torch.manual_seed(1234)
    # About 1.05 M parameters: 4 MiB of gradients all-reduced every step.
    return torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 10))


def params_sha256(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def main() -> int:
    if len(sys.argv) not in (6, 7):
        print(__doc__, file=sys.stderr)
        return 2
    rank, world = int(sys.argv[1]), int(sys.argv[2])
    addr, port, out = sys.argv[3], int(sys.argv[4]), sys.argv[5]
    steps = int(sys.argv[6]) if len(sys.argv) == 7 else 12
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}",
                            rank=rank, world_size=world,
                            timeout=timedelta(seconds=300))
    model = DistributedDataParallel(build_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    data = torch.Generator().manual_seed(100 + rank)
    times = []
    loss = torch.tensor(0.0)
    batches = [(torch.randn(BATCH, 512, generator=data),
                torch.randint(0, 10, (BATCH,), generator=data)) for _ in range(steps)]

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()  # DDP all-reduces the gradients here
        opt.step()
        return loss

    for x, y in batches[:WARMUP]:
        loss = step(x, y)
    with counted():  # the timed steps only (benchmarks/apps/run.sh's costs)
        for x, y in batches[WARMUP:]:
            t0 = time.perf_counter()
            loss = step(x, y)
            times.append((time.perf_counter() - t0) * 1e3)
    dist.barrier()
    result = {
        "rank": rank, "world_size": world, "steps": steps,
        "params_sha256": params_sha256(model.module),
        "final_loss": float(loss),
        "step_ms_mean": sum(times) / len(times) if times else 0.0,
        "step_ms_min": min(times) if times else 0.0,
    }
    dist.destroy_process_group()
    with open(out, "w", encoding="ascii") as f:
        json.dump(result, f)
        f.write("\n")
    print(f"rank {rank}: params {result['params_sha256'][:16]} "
          f"loss {result['final_loss']:.6f} step {result['step_ms_mean']:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
