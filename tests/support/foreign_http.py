"""One HTTP request as another local user (stdlib only; started as root, it drops to ``nobody``).

Usage: foreign_http.py URL METHOD PATH [JSON_BODY]

Switches to uid/gid 65534 before the socket exists (the kernel records a socket's owner when it
is created), sends one request with ``Host`` set to the URL's own address, and prints
``{"status": N, "body": "<answer>"}``.
"""

import encodings.idna  # noqa: F401  # loaded now: the stdlib may be unreadable once we are nobody
import http.client
import json
import os
import sys

NOBODY = 65534


def main() -> int:
    url, method, path = sys.argv[1], sys.argv[2], sys.argv[3]
    body = sys.argv[4].encode() if len(sys.argv) > 4 else None
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    host, _, port = url.removeprefix("http://").rpartition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=15)
    headers = {"content-type": "application/json"} if body is not None else {}
    conn.request(method, path, body=body, headers=headers)
    answer = conn.getresponse()
    print(json.dumps({"status": answer.status, "body": answer.read().decode("utf-8", "replace")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
