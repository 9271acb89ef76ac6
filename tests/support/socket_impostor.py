"""A stand-in for whoever replaced the daemon's control socket (stdlib only; run as root).

Usage: socket_impostor.py PATH MODE [REPLY]

Removes whatever is at PATH, binds a socket there, then listens as:
  same          our uid (a same-user process answering with REPLY: the malformed-answer case)
  foreign-peer  uid 65534 (the socket file stays root's; only the peer credentials tell)
  foreign-file  uid 65534, the socket file chowned to 65534 as well
Prints ``ready``, then one JSON line per connection: ``{"got": "<what the client sent>"}``.
Every request is answered with REPLY (default: a plausible pong). Runs until killed.
"""

import json
import os
import socket
import sys

NOBODY = 65534
PONG = '{"v":1,"ok":true,"result":{"pong":true,"pid":1}}'


def main() -> int:
    path, mode = sys.argv[1], sys.argv[2]
    reply = (sys.argv[3] if len(sys.argv) > 3 else PONG).encode() + b"\n"
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    if mode == "foreign-file":
        os.chown(path, NOBODY, NOBODY)
    if mode != "same":
        # The peer credentials a client reads are those in force at listen().
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    server.listen(16)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        with conn:
            conn.settimeout(2)
            got = b""
            try:
                while b"\n" not in got:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    got += chunk
                if got:
                    conn.sendall(reply)
            except OSError:
                pass
        print(json.dumps({"got": got.decode("utf-8", "replace")}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
