"""A real daemon serving the HTTP API on a loopback port, and tokens minted by the real CLI."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.support.daemon import DaemonProc
from tests.support.waiting import wait_for


def http_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment turning the API on, on a port the kernel picks (read back from the log)."""
    return {"AGENTMAILD_HTTP_LISTEN": "127.0.0.1:0", **(extra or {})}


def base_url(d: DaemonProc) -> str:
    [event] = wait_for(lambda: d.events("http.listening")[-1:], 20, "the HTTP API to listen")
    return f"http://{event['address']}"


def mint(d: DaemonProc, agent: str, *args: str) -> str:
    done = d.cli("tokens", "create", agent, *args, "--json")
    assert done.returncode == 0, done.stderr
    token: str = json.loads(done.stdout)["token"]
    return token


class Api:
    """An httpx client on one daemon's API; ``as_(token)`` is the same API with that token."""

    def __init__(self, d: DaemonProc, token: str | None = None) -> None:
        self.d = d
        self.url = base_url(d)
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.Client(base_url=self.url, headers=headers, timeout=20)

    def as_(self, token: str | None) -> Api:
        return Api(self.d, token)

    def close(self) -> None:
        self.client.close()

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.client.get(path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> httpx.Response:
        return self.client.post(path, json=body, **kw) if body is not None else self.client.post(
            path, **kw
        )


def error_of(response: httpx.Response) -> tuple[int, str]:
    """(status, error code) of a JSON error response; fails on anything else."""
    data = response.json()
    assert set(data) == {"ok", "error"} and data["ok"] is False, data
    assert set(data["error"]) == {"code", "message"} and data["error"]["message"], data
    return response.status_code, data["error"]["code"]

