#!/usr/bin/python3
"""The client side of setup_burst.sh, plain python sockets.

Usage: echo_client.py burst PORT N SIZE
         N connections opened at once (blocking connects, one after
         another), then SIZE bytes on every one and each echo read back
         and compared, all through one selector.  Setup time: the first
         connect to the last echo complete.
       echo_client.py sequential PORT N
         N times: connect, 1 byte, its echo, close.
Prints one line: "<mode> n=<N> seconds=<s> connect_seconds=<s> ok=<count>";
exits 1 if any echo differs or is short."""
import selectors
import socket
import sys
import time


def burst(port, n, size):
    start = time.perf_counter()
    conns = []
    for _ in range(n):
        s = socket.socket()
        s.connect(("127.0.0.1", port))
        conns.append(s)
    connected = time.perf_counter()
    sel = selectors.DefaultSelector()
    state = {}
    for i, s in enumerate(conns):
        payload = (b"%08d" % i) * (size // 8) + b"x" * (size % 8)
        s.setblocking(False)
        state[s] = [payload, 0, bytearray()]  # payload, bytes sent, echo
        sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)
    ok = 0
    while state:
        events = sel.select(timeout=30)
        if not events:
            sys.exit("no echo for 30 s")
        for key, mask in events:
            s = key.fileobj
            payload, sent, echo = state[s]
            if mask & selectors.EVENT_WRITE and sent < len(payload):
                try:
                    sent += s.send(payload[sent:])
                except BlockingIOError:
                    pass
                state[s][1] = sent
                if sent == len(payload):
                    sel.modify(s, selectors.EVENT_READ)
            if mask & selectors.EVENT_READ:
                data = s.recv(65536)
                if not data:
                    sys.exit("connection closed before its echo")
                echo += data
                if len(echo) >= len(payload):
                    if bytes(echo) != payload:
                        sys.exit("echo differs")
                    ok += 1
                    sel.unregister(s)
                    del state[s]
    done = time.perf_counter()
    for s in conns:
        s.close()
    print("burst n=%d seconds=%.4f connect_seconds=%.4f ok=%d"
          % (n, done - start, connected - start, ok))
    return ok == n


def sequential(port, n):
    start = time.perf_counter()
    ok = 0
    for _ in range(n):
        s = socket.socket()
        s.connect(("127.0.0.1", port))
        s.sendall(b"!")
        if s.recv(1) == b"!":
            ok += 1
        s.close()
    done = time.perf_counter()
    print("sequential n=%d seconds=%.4f connect_seconds=%.4f ok=%d"
          % (n, done - start, done - start, ok))
    return ok == n


if __name__ == "__main__":
    mode, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    good = burst(port, n, int(sys.argv[4])) if mode == "burst" else sequential(port, n)
    sys.exit(0 if good else 1)
