"""python3's http.server and http.client, for connections of every length.

  short_http.py server          serves on 127.0.0.1:0 (HTTP/1.1; a request
                                with "Connection: close" ends its connection),
                                prints the port, runs until killed
  short_http.py client PORT SPEC...
                                SPEC "short:N": N connections of one request
                                each; "keep:R": one connection of R requests.
                                Every body is checked; prints "ok REQUESTS"
"""
import http.client
import http.server
import sys


def body(path):
    # 2 KiB whose bytes depend on the path, so a mix-up shows.
    seed = sum(path.encode())
    return bytes((seed + i * 31) % 251 for i in range(2048))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        data = body(self.path)
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def server():
    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    print(httpd.server_address[1], flush=True)
    httpd.serve_forever()


def get(conn, path, close):
    conn.request("GET", path, headers={"Connection": "close"} if close else {})
    response = conn.getresponse()
    data = response.read()
    if response.status != 200 or data != body(path):
        print(f"bad response for {path}: {response.status}, {len(data)} bytes",
              file=sys.stderr)
        sys.exit(1)


def client(port, specs):
    requests = 0
    for spec in specs:
        kind, count = spec.split(":")
        count = int(count)
        if kind == "short":
            for _ in range(count):
                conn = http.client.HTTPConnection("127.0.0.1", port)
                get(conn, f"/s{requests}", close=True)
                conn.close()
                requests += 1
        else:
            conn = http.client.HTTPConnection("127.0.0.1", port)
            for _ in range(count):
                get(conn, f"/k{requests}", close=False)
                requests += 1
            conn.close()
    print("ok", requests, flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server()
    else:
        client(int(sys.argv[2]), sys.argv[3:])
