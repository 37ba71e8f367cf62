"""Counting window for `perf stat --delay -1 --control fifo:CTL,ACK`.

benchmarks/apps/run.sh runs a rank under perf stat with its events off and
names the two fifos in VSOCKET_PERF_CTL and VSOCKET_PERF_ACK. The rank wraps
what it measures in `with counted():`, so perf counts that and not the
import of torch or the rendezvous. Without the variables it does nothing.
"""
import contextlib
import os


def _command(word: str) -> None:
    with open(os.environ["VSOCKET_PERF_CTL"], "w", encoding="ascii") as ctl:
        ctl.write(word + "\n")
    with open(os.environ["VSOCKET_PERF_ACK"], encoding="ascii") as ack:
        ack.readline()  # perf has applied it


@contextlib.contextmanager
def counted():
    if "VSOCKET_PERF_CTL" not in os.environ:
        yield
        return
    _command("enable")
    try:
        yield
    finally:
        _command("disable")
