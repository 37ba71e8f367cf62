# One thread connects (and then sleeps) while another, which accepted and
# closed the server end at once, waits in select() on the client socket
# and reads it: as CPython's test_socket TCPCloserTest does.  The read must
# give the end of the stream (b''), as on kernel TCP, whether or not the
# connecting thread's connect() has returned yet.  Prints "bad B of N".
# usage: read_while_connecting.py [rounds]
import select, socket, sys, threading, time
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 100
bad = 0
for i in range(rounds):
    serv = socket.socket(); serv.bind(('127.0.0.1', 0)); serv.listen()
    cli = socket.socket()
    t = threading.Thread(target=lambda: (cli.connect(serv.getsockname()), time.sleep(0.05)))
    t.start()
    conn, _ = serv.accept()
    conn.close()
    ready, _, _ = select.select([cli], [], [], 2.0)
    try:
        got = cli.recv(1)
    except OSError as e:
        got = repr(e)
    if ready != [cli] or got != b'':
        bad += 1; print("round", i, "readable", ready == [cli], "recv", got, flush=True)
    t.join(); cli.close(); serv.close()
print("bad", bad, "of", rounds)
sys.exit(1 if bad else 0)
