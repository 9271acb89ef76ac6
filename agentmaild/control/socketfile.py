"""The control socket's file: its private directory, a dead daemon's leftover, and who holds the
path now (the daemon re-binds when its socket is removed, or replaced by a stale or foreign one).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import anyio
import anyio.abc
import structlog
from anyio.streams.buffered import BufferedByteReceiveStream

from agentmaild.control.peer import check_server, check_socket_file, peer_credentials
from agentmaild.control.protocol import (
    MAX_RESPONSE_BYTES,
    decode_response,
    encode_request,
    fallback_dir,
)
from agentmaild.errors import ControlError

log = structlog.get_logger(__name__)

Identity = tuple[int, int]
"""(st_dev, st_ino) of the socket file, read with ``lstat``."""

_PROBE_TIMEOUT_S = 1.0


def prepare_directory(directory: Path) -> None:
    """The shared-/tmp fallback must be ours and private; other directories are the user's."""
    if directory == fallback_dir():
        ensure_private_dir(directory)


def ensure_private_dir(directory: Path) -> None:
    """Create ``directory`` 0700, or accept it only if we own it (tightening its mode)."""
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        st = directory.lstat()
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o077:
            directory.chmod(0o700)
    except OSError as exc:
        raise ControlError(f"cannot prepare the socket directory {directory}: {exc}") from exc
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise ControlError(
            f"{directory} is not a directory owned by uid {os.getuid()}; refusing to listen there"
        )


async def clear_stale_socket(path: Path) -> None:
    """Remove a dead daemon's socket file; refuse a live one or anything that is not a socket.

    A socket of another uid (its file, or the server on it) is refused before a byte is sent, as
    the CLI refuses it: a ping would tell an impostor we are starting, and its answer is no
    evidence that an agentmaild of ours is running.
    """
    if not _socket_exists(path):
        return
    check_socket_file(str(path))
    try:
        stream = await anyio.connect_unix(path)
    except ConnectionRefusedError:
        _remove(path, "control.stale_removed")
        return
    except OSError as exc:
        raise ControlError(f"cannot probe the existing socket {path}: {exc}") from exc
    async with stream:
        check_server(stream.extra(anyio.abc.SocketAttribute.raw_socket), str(path))
        pid = await _probe_pid(stream)
    who = f" (pid {pid})" if pid is not None else ""
    raise ControlError(f"another agentmaild{who} is already listening on {path}")


def identity(path: Path) -> Identity | None:
    """The file now at ``path`` (not following a symlink); None when there is none."""
    try:
        st = path.lstat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


async def take_back(path: Path) -> str | None:
    """Clear ``path`` for a re-bind when our socket there was lost; the reason, or None to wait.

    Missing, a dead socket, or a socket another uid owns or serves: cleared, re-bind. A live
    socket served by our uid (another daemon took the path over) or a non-socket: left alone.
    """
    verdict = _look(path)
    return await _take_back_ours(path) if verdict == "ours" else verdict


def _look(path: Path) -> str | None:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        log.warning("control.socket_unreadable", path=str(path), error=str(exc))
        return None
    if not stat.S_ISSOCK(st.st_mode):
        log.warning("control.socket_blocked", path=str(path), reason="not_a_socket")
        return None
    return _cleared(path, "foreign_owner") if st.st_uid != os.getuid() else "ours"


async def _take_back_ours(path: Path) -> str | None:
    try:
        with anyio.fail_after(_PROBE_TIMEOUT_S):
            stream = await anyio.connect_unix(path)
    except (ConnectionRefusedError, FileNotFoundError):
        return _cleared(path, "stale")
    except (OSError, TimeoutError) as exc:
        log.warning("control.socket_unreadable", path=str(path), error=str(exc) or "timeout")
        return None
    async with stream:
        try:
            pid, uid = peer_credentials(stream.extra(anyio.abc.SocketAttribute.raw_socket))
        except OSError:
            pid, uid = None, None
    if uid is not None and uid != os.getuid():
        return _cleared(path, "foreign_server")
    log.warning("control.socket_taken", path=str(path), peer_pid=pid)
    return None


def _cleared(path: Path, reason: str) -> str:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("control.unlink_failed", path=str(path), error=str(exc))
    return reason


def remove_if_ours(path: Path, bound: Identity | None) -> None:
    """Unlink the socket unless a successor daemon has already replaced it."""
    if bound is None or identity(path) != bound:
        return
    try:
        path.unlink()
    except OSError as exc:
        log.warning("control.unlink_failed", path=str(path), error=str(exc))
    else:
        log.info("control.stopped", path=str(path))


def _socket_exists(path: Path) -> bool:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(st.st_mode):
        raise ControlError(f"{path} exists and is not a socket; refusing to replace it")
    return True


def _remove(path: Path, event: str) -> None:
    log.info(event, path=str(path))
    path.unlink(missing_ok=True)


async def _probe_pid(stream: anyio.abc.SocketStream) -> object:
    """Best effort: the pid a live daemon reports for `ping`, to name it in the refusal."""
    with anyio.move_on_after(_PROBE_TIMEOUT_S):
        try:
            await stream.send(encode_request("ping"))
            line = await BufferedByteReceiveStream(stream).receive_until(b"\n", MAX_RESPONSE_BYTES)
            return decode_response(line).get("pid")
        except Exception:  # only decorates the refusal; any failure just leaves the pid out
            return None
    return None
