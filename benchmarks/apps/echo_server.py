#!/usr/bin/python3
"""A selectors echo server, as a new user would write one: one thread, a
non-blocking listener, every byte read written back.

Usage: echo_server.py PORTFILE  -- listens on 127.0.0.1 with an ephemeral
port, writes the port to PORTFILE once listening, serves until SIGTERM."""
import os
import selectors
import signal
import socket
import sys

sel = selectors.DefaultSelector()
pending = {}  # connection -> bytes read but not yet written back


def accept(listener):
    while True:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return
        conn.setblocking(False)
        pending[conn] = b""
        sel.register(conn, selectors.EVENT_READ, serve)


def serve(conn, mask):
    if mask & selectors.EVENT_READ:
        try:
            data = conn.recv(65536)
        except ConnectionError:
            data = b""
        if not data:
            sel.unregister(conn)
            del pending[conn]
            conn.close()
            return
        pending[conn] += data
    if pending[conn]:
        try:
            sent = conn.send(pending[conn])
        except BlockingIOError:
            sent = 0
        pending[conn] = pending[conn][sent:]
    events = selectors.EVENT_READ
    if pending[conn]:
        events |= selectors.EVENT_WRITE
    sel.modify(conn, events, serve)


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4096)
    listener.setblocking(False)
    sel.register(listener, selectors.EVENT_READ, None)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    while True:
        for key, mask in sel.select():
            if key.data is None:
                accept(key.fileobj)
            else:
                key.data(key.fileobj, mask)


if __name__ == "__main__":
    main()
