#!/usr/bin/env python3
"""Local edge listeners for the health checks of gdnsd (tcp_connect) and PowerDNS
(ifportup): accept and close on 127.0.0.11-14:PORT. Exits by itself after SECONDS."""
import selectors
import socket
import sys
import time

port, seconds = int(sys.argv[1]), float(sys.argv[2])
sel = selectors.DefaultSelector()
for i in range(11, 15):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((f"127.0.0.{i}", port))
    s.listen(64)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
end = time.monotonic() + seconds
while time.monotonic() < end:
    for key, _ in sel.select(timeout=0.5):
        try:
            conn, _ = key.fileobj.accept()
            conn.close()
        except OSError:
            pass
