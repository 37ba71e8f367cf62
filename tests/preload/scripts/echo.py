"""A plain python3 socket echo pair for the preload tests.

  echo.py server          listens on 127.0.0.1:0, prints the port, echoes one
                          connection until EOF, prints "served N"
  echo.py client PORT     200 messages of varying size, then 2 MiB streamed
                          while a thread reads the echo; prints "ok N"
"""
import socket
import sys
import threading


def server():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    print(listener.getsockname()[1], flush=True)
    conn, _ = listener.accept()
    total = 0
    with conn:
        while True:
            data = conn.recv(65536)
            if not data:
                break
            conn.sendall(data)
            total += len(data)
    listener.close()
    print("served", total, flush=True)


def message(i):
    size = 1 + (i * 37) % 5000
    return bytes((i * 7 + j) % 251 for j in range(size))


def client(port):
    conn = socket.create_connection(("127.0.0.1", port))
    total = 0
    for i in range(200):
        m = message(i)
        conn.sendall(m)
        got = bytearray()
        while len(got) < len(m):
            data = conn.recv(65536)
            assert data, "early EOF"
            got += data
        assert bytes(got) == m, "echo mismatch in message %d" % i
        total += len(m)

    bulk = bytes(range(256)) * (2 * 4096)  # 2 MiB
    received = bytearray()

    def reader():
        while len(received) < len(bulk):
            data = conn.recv(1 << 16)
            if not data:
                break
            received.extend(data)

    t = threading.Thread(target=reader)
    t.start()
    conn.sendall(bulk)
    t.join(30)
    assert bytes(received) == bulk, "bulk echo mismatch"
    total += len(bulk)
    conn.shutdown(socket.SHUT_WR)
    assert conn.recv(1) == b"", "expected EOF"
    conn.close()
    print("ok", total, flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server()
    else:
        client(int(sys.argv[2]))
