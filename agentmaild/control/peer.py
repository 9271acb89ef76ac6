"""Who is on the other end of a Unix socket, and whether a socket file is ours: stdlib only.

Both sides use it: the daemon refuses peers of another uid, and the client refuses a socket file or
a listening server that belongs to another uid before it sends anything (an impostor that replaced
the socket must not learn our commands nor feed us answers).
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import sys

from agentmaild.errors import ControlError, DaemonNotRunning

_UCRED = struct.Struct("=iII")  # struct ucred {pid_t pid; uid_t uid; gid_t gid;}
_SOL_LOCAL, _LOCAL_PEERCRED, _XUCRED_SIZE = 0, 0x001, 76  # macOS <sys/un.h>, struct xucred


def peer_credentials(sock: socket.socket) -> tuple[int | None, int | None]:
    """(pid, uid) of the connected peer; None where the platform will not say.

    Linux: ``SO_PEERCRED``. macOS: ``LOCAL_PEERCRED`` (what ``getpeereid`` reads; no pid). Elsewhere
    both are None and the callers fall back on the socket file's owner and 0600 mode.
    """
    if sys.platform == "linux":
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
        pid, uid, _gid = _UCRED.unpack(raw)
        return pid, uid
    if sys.platform == "darwin":
        # LOCAL_PEERCRED fills a struct xucred {u_int cr_version; uid_t cr_uid; ...}.
        raw = sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERCRED, _XUCRED_SIZE)
        return None, int(struct.unpack_from("=II", raw)[1])
    return None, None


def check_socket_file(path: str) -> None:
    """Refuse (``ControlError``) a path that is not a socket owned by our uid.

    ``DaemonNotRunning`` when nothing is there. Checked with ``lstat``: a symlink is refused too.
    """
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise DaemonNotRunning(f"no agentmaild is listening on {path}") from exc
    except OSError as exc:
        raise ControlError(f"cannot inspect {path}: {exc}") from exc
    if not stat.S_ISSOCK(st.st_mode):
        raise ControlError(f"{path} is not a socket; refusing to talk to it")
    if st.st_uid != os.getuid():
        raise ControlError(
            f"{path} belongs to uid {st.st_uid}, not to us (uid {os.getuid()}); "
            "refusing to talk to it"
        )


def check_server(sock: socket.socket, path: str) -> None:
    """Refuse (``ControlError``) a connected server that runs as another uid."""
    try:
        _pid, uid = peer_credentials(sock)
    except OSError as exc:
        raise ControlError(f"cannot tell who listens on {path}: {exc}") from exc
    if uid is not None and uid != os.getuid():
        raise ControlError(
            f"the server on {path} runs as uid {uid}, not as us (uid {os.getuid()}); "
            "refusing to talk to it"
        )
