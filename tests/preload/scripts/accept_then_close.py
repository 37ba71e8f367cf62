# A server that accepts and closes at once, against a non-blocking
# connect(): on kernel TCP connect() says EINPROGRESS (or 0), SO_ERROR is 0
# once writable, and the client reads end of stream.  Under vsocket the
# server's close ended the liveness connection with a reset before the
# client's connect() returned, and connect() failed with ECONNRESET
# (CPython's test_socket NetworkConnectionAttributesTest hung on it).  Also
# a dup() of an accepted connection whose peer sent and closed: the copy
# reads the bytes, then end of stream (socket.dup() is fcntl(F_DUPFD_CLOEXEC,
# 0), which moved every copied connection to TCP and reset some).
# Prints "bad N of M"; exits 1 if any round differed.
# usage: accept_then_close.py [rounds]
import errno, select, socket, sys, threading
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 100
bad = {}
def note(what):
    bad[what] = bad.get(what, 0) + 1
for i in range(rounds):
    serv = socket.socket(); serv.bind(('127.0.0.1', 0)); serv.listen()
    t = threading.Thread(target=lambda: serv.accept()[0].close()); t.start()
    cli = socket.socket(); cli.setblocking(False)
    rc = cli.connect_ex(serv.getsockname())
    if rc not in (0, errno.EINPROGRESS): note('connect ' + errno.errorcode.get(rc, str(rc)))
    select.select([], [cli], [], 5)
    err = cli.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if err: note('SO_ERROR ' + errno.errorcode.get(err, str(err)))
    t.join()
    cli.setblocking(True); cli.settimeout(5)
    try:
        got = cli.recv(16)
        if got != b'': note('read %r' % got)
    except OSError as e:
        note('read ' + type(e).__name__)
    cli.close(); serv.close()
serv = socket.socket(); serv.bind(('127.0.0.1', 0)); serv.listen()
for i in range(rounds):
    c = socket.create_connection(serv.getsockname())
    conn, _ = serv.accept()
    c.send(b'x' * 30); c.close()
    d = conn.dup()
    try:
        got = d.recv(1024)
        if got != b'x' * 30: note('dup read %r' % got)
        if d.recv(1024) != b'': note('dup no eof')
    except OSError as e:
        note('dup ' + type(e).__name__)
    d.close(); conn.close()
print('bad', sum(bad.values()), 'of', 2 * rounds, bad)
sys.exit(1 if bad else 0)
