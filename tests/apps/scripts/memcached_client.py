#!/usr/bin/python3
"""memcached text protocol over a plain socket: sets COUNT keys with random
values, gets each back and compares.  Prints "PASS <count>" and exits 0 when
every value read back equals what was stored.

Usage: memcached_client.py PORT [COUNT]
"""
import os
import socket
import sys


def read_line(sock, buf):
    while b"\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError("memcached closed the connection")
        buf += chunk
    line, _, rest = bytes(buf).partition(b"\r\n")
    buf[:] = rest
    return line


def read_exact(sock, buf, n):
    while len(buf) < n:
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError("memcached closed the connection")
        buf += chunk
    data = bytes(buf[:n])
    del buf[:n]
    return data


def main() -> int:
    port = int(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    values = {f"vsocket:{i}": os.urandom(1 + (i * 97) % 4000) for i in range(count)}
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    buf = bytearray()
    for key, value in values.items():
        sock.sendall(b"set %s 0 0 %d\r\n%s\r\n" % (key.encode(), len(value), value))
        line = read_line(sock, buf)
        if line != b"STORED":
            print(f"set {key}: {line!r}", file=sys.stderr)
            return 1
    for key, value in values.items():
        sock.sendall(b"get %s\r\n" % key.encode())
        header = read_line(sock, buf).split()
        if len(header) != 4 or header[0] != b"VALUE" or header[1] != key.encode():
            print(f"get {key}: header {header!r}", file=sys.stderr)
            return 1
        data = read_exact(sock, buf, int(header[3]) + 2)
        if data[:-2] != value or data[-2:] != b"\r\n":
            print(f"get {key}: value differs ({len(data) - 2} bytes)", file=sys.stderr)
            return 1
        end = read_line(sock, buf)
        if end != b"END":
            print(f"get {key}: {end!r} instead of END", file=sys.stderr)
            return 1
    sock.sendall(b"quit\r\n")
    sock.close()
    print(f"PASS {count}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
