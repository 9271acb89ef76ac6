"""Tokens off (``http.require_tokens = false``): who may reach the HTTP face at all.

Without tokens every request acts as the operator, so ``OwnerOnly`` admits a request to the whole
face (``/v1``, the dashboard, its static files) only when both hold:

- its ``Host`` names a loopback address (``localhost``, ``127.x.x.x``, ``::1``): a page from
  another site that rebinds its own name to 127.0.0.1 still sends that name, and is refused;
- the connecting socket belongs to the daemon's own user (the store's owner: the daemon opens the
  store, 0600, as that user). TCP has no ``SO_PEERCRED``, but on loopback both ends of the
  connection are sockets of this machine, and the kernel records the uid that owns each: the
  socket whose source is the peer's address and whose destination is ours is the caller's, and
  its uid is not the caller's to choose (``peer_uid``: netlink ``sock_diag``, the lookup ``ss``
  makes, else the ``/proc/net/tcp`` table).

Why not only a Unix socket: a browser cannot open one, and the dashboard without tokens is for a
browser of the owner on the same machine. Where the kernel has no such table (not Linux), the
daemon refuses to start with tokens off (``check_available``) rather than serve without the check.
Every refusal is 403 ``forbidden`` and one ``http.refused`` line.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from pathlib import Path

import structlog
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from agentmaild.errors import ConfigError

log = structlog.get_logger(__name__)
PROC_NET = Path("/proc/net")
_MAPPED = "::ffff:"  # an IPv6 client socket reaching an IPv4 listener shows this way in tcp6


def check_available() -> None:
    """``ConfigError`` when callers' uids cannot be read here (tokens off is then refused)."""
    try:
        _diag_uid(("127.0.0.1", 1), ("127.0.0.1", 1))  # no such socket: None, if netlink answers
        return
    except _NoDiag:
        pass
    if not (PROC_NET / "tcp").is_file():
        raise ConfigError(
            "http.require_tokens = false needs the kernel to tell each caller's user (netlink "
            "sock_diag or /proc/net/tcp, Linux); neither answers here: use tokens "
            "(http.require_tokens = true, `agentmaild tokens create`)"
        )


def loopback_host(header: str | None) -> bool:
    """Whether a ``Host`` header names a loopback address (a port after it is allowed)."""
    if not header:
        return False
    host = header.strip().lower()
    if host.startswith("["):
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def peer_uid(peer: tuple[str, int], ours: tuple[str, int]) -> int | None:
    """The uid owning the client socket of the TCP connection ``peer`` → ``ours`` (None: no
    such socket here). Asked of the kernel by netlink (``sock_diag``: one exact lookup, about
    0.2 ms); where that is missing, found in ``/proc/net/tcp*`` (correct, but the kernel walks
    its whole table: 15 ms on a large machine)."""
    try:
        return _diag_uid(peer, ours)
    except _NoDiag:
        return _table_uid(peer, ours)


class _NoDiag(Exception):
    """Netlink ``sock_diag`` is not available here."""


_NETLINK_SOCK_DIAG = 4  # NETLINK_INET_DIAG
_SOCK_DIAG_BY_FAMILY = 20
_NLMSG_ERROR = 2
_NO_COOKIE = 0xFFFFFFFF
_ENOENT = 2
_UID_AT = 16 + 64  # nlmsghdr, then inet_diag_msg's family..retrans (4), sockid (48), 3 u32s


def _diag_uid(peer: tuple[str, int], ours: tuple[str, int]) -> int | None:
    """``inet_diag_req_v2`` for the socket whose source is ``peer`` and destination ``ours``."""
    (ph, pp), (oh, op) = peer, ours
    family = socket.AF_INET6 if ipaddress.ip_address(ph).version == 6 else socket.AF_INET
    sockid = struct.pack("!HH16s16s", pp, op, _padded(ph), _padded(oh))
    sockid += struct.pack("=III", 0, _NO_COOKIE, _NO_COOKIE)  # any interface, any cookie
    req = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid
    head = struct.pack("=IHHII", 16 + len(req), _SOCK_DIAG_BY_FAMILY, 1, 1, 0)  # NLM_F_REQUEST
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as link:
            link.settimeout(1.0)
            link.send(head + req)
            answer, source = link.recvfrom(8192)
    except (OSError, AttributeError) as exc:  # no AF_NETLINK, no sock_diag, no answer
        raise _NoDiag(str(exc)) from exc
    if source[0] != 0 or len(answer) < 20:
        return None  # not the kernel's answer (another process may write to us): unknown
    (kind,) = struct.unpack_from("=H", answer, 4)
    if kind == _NLMSG_ERROR:
        (err,) = struct.unpack_from("=i", answer, 16)
        if -err == _ENOENT:
            return None
        raise _NoDiag(f"sock_diag error {-err}")
    if len(answer) < _UID_AT + 4:
        raise _NoDiag("short sock_diag answer")
    (uid,) = struct.unpack_from("=I", answer, _UID_AT)
    return int(uid)


def _padded(host: str) -> bytes:
    return ipaddress.ip_address(host).packed.ljust(16, b"\0")


def _kernel_address(host: str, port: int) -> str:
    """``host:port`` as ``/proc/net/tcp*`` prints it: each 32-bit word in the host's byte order."""
    packed = ipaddress.ip_address(host).packed
    words = struct.unpack(f"={len(packed) // 4}I", packed)
    return "".join(f"{w:08X}" for w in words) + f":{port:04X}"


def _candidates(peer: tuple[str, int], ours: tuple[str, int]) -> list[tuple[str, str, str]]:
    """(table, the caller's local address, its remote address) where the caller's socket can be."""
    (ph, pp), (oh, op) = peer, ours
    if ipaddress.ip_address(ph).version == 6:
        return [("tcp6", _kernel_address(ph, pp), _kernel_address(oh, op))]
    return [("tcp", _kernel_address(ph, pp), _kernel_address(oh, op)),
            ("tcp6", _kernel_address(_MAPPED + ph, pp), _kernel_address(_MAPPED + oh, op))]


def _table_uid(peer: tuple[str, int], ours: tuple[str, int]) -> int | None:
    for table, local, remote in _candidates(peer, ours):
        try:
            text = (PROC_NET / table).read_text()
        except OSError:
            continue
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) > 7 and fields[1] == local and fields[2] == remote:
                return int(fields[7])
    return None


def refusal(scope: Scope, uid: int) -> str | None:
    """Why this request may not act as the operator without a token, or None."""
    headers = dict(scope.get("headers") or [])
    host = headers.get(b"host", b"").decode("latin-1")
    if not loopback_host(host):
        return "without tokens this daemon answers only to a loopback Host name, not " + repr(
            host[:80]
        )
    client, server = scope.get("client"), scope.get("server")
    owner = None
    if client and server:
        try:
            owner = peer_uid((client[0], int(client[1])), (server[0], int(server[1])))
        except ValueError:  # not an IP address (a Unix socket's path): no table holds it
            owner = None
    if owner != uid:
        return ("without tokens only the daemon's own user may call; other users need a token "
                "(http.require_tokens = true)")
    return None


class OwnerOnly:
    """ASGI middleware: every HTTP request passes ``refusal`` or gets one JSON 403."""

    def __init__(self, app: ASGIApp, uid: int | None = None) -> None:
        self.app = app
        self.uid = os.geteuid() if uid is None else uid

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        why = refusal(scope, self.uid) if scope["type"] == "http" else None
        if why is None:
            await self.app(scope, receive, send)
            return
        log.warning("http.refused", status=403, path=str(scope.get("path", ""))[:200],
                    token_id=None, reason=why)  # fmt: skip
        body = {"ok": False, "error": {"code": "forbidden", "message": why}}
        await JSONResponse(body, status_code=403)(scope, receive, send)
