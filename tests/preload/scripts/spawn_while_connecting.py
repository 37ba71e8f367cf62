# Connections set up, used and closed in one thread while another thread
# runs subprocesses without pause: CPython's subprocess starts them with
# vfork() and closes every descriptor in the child before its exec, which
# shares the parent's memory.  Every round trip must arrive intact and
# quickly, as on kernel TCP.  Prints "fails F slow S of N"; exits 1 if any
# round failed or took over 1 s.
# With --posix-spawn-action the spawning thread uses os.posix_spawn with a
# file action instead, which makes vsocket move every connection to kernel
# TCP at each spawn, while the other thread's connections are being set up.
# usage: spawn_while_connecting.py [rounds] [--posix-spawn-action]
import os, socket, subprocess, threading, time, sys
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 300
with_action = '--posix-spawn-action' in sys.argv
stop = False
def spawner():
    while not stop:
        if with_action:
            pid = os.posix_spawn('/bin/true', ['true'], os.environ,
                                 file_actions=[(os.POSIX_SPAWN_CLOSE, 100)])
            os.waitpid(pid, 0)
        else:
            subprocess.run(['true'])
t = threading.Thread(target=spawner); t.start()
fails = 0; slow = 0
for i in range(rounds):
    l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen()
    acc = []
    def accept_one():
        try:
            acc.append(l.accept()[0])
        except Exception as e:
            acc.append(e)
    th = threading.Thread(target=accept_one); th.start()
    t0 = time.monotonic()
    try:
        c = socket.create_connection(l.getsockname(), timeout=10)
        th.join()
        s = acc[0]
        if isinstance(s, Exception):
            raise RuntimeError("accept: " + repr(s))
        c.sendall(b'ping'); assert s.recv(4) == b'ping'
        s.sendall(b'pong'); assert c.recv(4) == b'pong'
        c.close(); s.close()
    except Exception as e:
        fails += 1; print("round", i, repr(e), flush=True)
        th.join(timeout=1)
    if time.monotonic() - t0 > 1: slow += 1
    l.close()
stop = True; t.join()
print("fails", fails, "slow", slow, "of", rounds)
sys.exit(1 if fails or slow else 0)
