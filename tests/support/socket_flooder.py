"""A same-user flood of the control socket: idle connections that never send (stdlib only).

Usage: socket_flooder.py PATH COUNT

Keeps COUNT connections to PATH open without sending a byte; each one the server closes is
re-opened at once. Prints ``ready`` once COUNT are open together; on SIGTERM prints one JSON line
of statistics (``connects``, ``closed_by_server``, ``open``) and exits.
"""

import errno
import json
import selectors
import signal
import socket
import sys


def main() -> int:
    path, count = sys.argv[1], int(sys.argv[2])
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    sel = selectors.DefaultSelector()
    stats = {"connects": 0, "closed_by_server": 0, "open": 0}
    missing, ready = count, False
    while not stopping:
        while missing and _connect(path, sel):
            stats["connects"] += 1
            stats["open"] += 1
            missing -= 1
        if not ready and stats["open"] >= count:
            print("ready", flush=True)
            ready = True
        for key, _ in sel.select(0.05):
            sock = key.fileobj
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            if not data:
                sel.unregister(sock)
                sock.close()
                stats["open"] -= 1
                stats["closed_by_server"] += 1
                missing += 1
    print(json.dumps(stats), flush=True)
    return 0


def _connect(path, sel):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    code = sock.connect_ex(path)
    if code not in (0, errno.EINPROGRESS):  # EAGAIN: the backlog is full; try again shortly
        sock.close()
        return False
    sel.register(sock, selectors.EVENT_READ)
    return True


if __name__ == "__main__":
    sys.exit(main())
