"""The unit tier: no sockets, no subprocesses. A test here that opens either fails, naming what it opened.

Tests that need a server, a browser, a compiled program or a process of their own live in
tests/integration; this guard keeps the fast default tier honest.
"""

import os
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest


def _refuse(what: str) -> Any:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError(f"the unit tier opens no {what}: move this test to tests/integration")
    return refuse


@pytest.fixture(scope="session", autouse=True)
def _matplotlib_font_cache() -> None:
    # matplotlib builds its font cache on first use by running fc-list: on a new machine that is the first
    # test to plot, in whatever order the tier's workers run. Built here, before the guard, once per session.
    try:
        from matplotlib import font_manager
    except ImportError:  # matplotlib is the `plot` extra: without it the plotting tests say so themselves
        return
    font_manager.findfont("DejaVu Sans")


@pytest.fixture(autouse=True)
def _no_sockets_or_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("connect", "connect_ex", "bind"):
        monkeypatch.setattr(socket.socket, name, _refuse("socket"))
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("subprocess"))
    monkeypatch.setattr(os, "fork", _refuse("process (fork)"))
    yield
