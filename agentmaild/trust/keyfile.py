"""This domain's signing key on disk: a 0600 JSON file holding its name and Ed25519 seed.

Default place: ``domain.key`` next to a SQLite store file; ``--key-file`` or
``$AGENTMAIL_KEY_FILE`` name another (a PostgreSQL store has no directory, so one is required).
A key file that any other user could read (or that another user owns) is refused wherever it is
loaded (``keys show``, ``relay``, the daemon's relay route) with the fix in the message: anyone
who read it can sign mail as this domain, and using it silently would hide that.
"""

from __future__ import annotations

import base64
import json
import os
import stat
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agentmaild.errors import NotFound, StoreError, UsageError, ValidationError
from agentmaild.store.location import StoreLocation
from agentmaild.trust import envelope

FILE_NAME = "domain.key"


@dataclass(frozen=True, slots=True)
class DomainKey:
    domain: str
    key: Ed25519PrivateKey
    path: str

    @property
    def public(self) -> str:
        return envelope.public_text(self.key)

    @property
    def key_id(self) -> str:
        return envelope.key_id(self.public)

    def to_dict(self) -> dict[str, str]:
        return {"domain": self.domain, "public_key": self.public, "key_id": self.key_id,
                "key_file": self.path}  # fmt: skip


def key_path(db_target: str, key_file: str | None) -> str:
    chosen = key_file or os.environ.get("AGENTMAIL_KEY_FILE")
    if chosen:
        return os.path.abspath(chosen)
    if not StoreLocation.of(db_target).is_file:
        raise UsageError("a PostgreSQL store has no directory for the key: give --key-file "
                         "or $AGENTMAIL_KEY_FILE")  # fmt: skip
    return os.path.join(os.path.dirname(os.path.abspath(db_target)), FILE_NAME)


def create(path: str, domain: str) -> DomainKey:
    """Write a new key file (mode 0600 from the start); refuse to overwrite one."""
    key = envelope.new_private_key()
    seed = base64.b64encode(envelope.private_bytes(key)).decode("ascii")
    data = json.dumps({"domain": domain, "ed25519_seed": seed}).encode()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise ValidationError(f"{path}: a key already exists (this domain keeps its key; "
                              "see `agentmaild keys show`)") from None  # fmt: skip
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return DomainKey(domain, key, path)


def check_private(path: str, st: os.stat_result) -> None:
    """Refuse a key file another user owns or may read or write: ``ConfigError`` with the fix."""
    from agentmaild.errors import ConfigError
    if st.st_uid != os.geteuid():
        raise ConfigError(f"{path}: the domain key belongs to uid {st.st_uid}, not to us "
                          f"(uid {os.geteuid()}); refusing to use it")  # fmt: skip
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise ConfigError(f"{path}: the domain key is open to other users (mode "
                          f"{stat.S_IMODE(st.st_mode):04o}); refusing to use it: run "
                          f"`chmod 600 {path}` (and make a new key if another user may have "
                          f"read it)")  # fmt: skip


def load(path: str) -> DomainKey:
    try:
        with open(path, "rb") as f:
            check_private(path, os.fstat(f.fileno()))
            data = json.loads(f.read())
        seed = base64.b64decode(data["ed25519_seed"], validate=True)
        return DomainKey(str(data["domain"]), envelope.load_private(seed), path)
    except FileNotFoundError:
        raise NotFound(f"{path}: no key (create one with `agentmaild keys create`)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"{path}: not a readable domain key ({type(exc).__name__})") from None
