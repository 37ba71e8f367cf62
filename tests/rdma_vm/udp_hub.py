#!/usr/bin/python3
"""An Ethernet hub for three or more QEMU guests (run-in-guest.sh --group).

Usage: udp_hub.py HUB_PORT GUEST_PORT...
Each guest's NIC is a QEMU socket netdev that sends its frames as UDP
datagrams to 127.0.0.1:HUB_PORT from 127.0.0.1:GUEST_PORT. Every datagram
from one guest goes to all the others, as on a shared segment (two guests
need no hub: their netdevs point at each other). Runs until killed.
"""
import socket
import sys


def main() -> int:
    hub = int(sys.argv[1])
    guests = [("127.0.0.1", int(p)) for p in sys.argv[2:]]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind(("127.0.0.1", hub))
    while True:
        frame, source = sock.recvfrom(65536)
        for guest in guests:
            if guest != source:
                sock.sendto(frame, guest)


if __name__ == "__main__":
    sys.exit(main())
