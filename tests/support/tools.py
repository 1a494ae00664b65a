"""Programs the tests need: found on PATH, a skip on a workstation without them, a failure in CI."""

import os
import shutil

import pytest


def in_ci(env: dict[str, str] | None = None) -> bool:
    """Whether this is a CI run (`CI` set to anything but empty, 0 or false), where every tool must be there."""
    value = (os.environ if env is None else env).get("CI", "")
    return value.strip().lower() not in ("", "0", "false", "no")


def require_tool(name: str) -> str:
    """Return the path of program `name`. Without it the test skips, but in CI it fails: CI must run every test."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (`make deps` installs it)"
        if in_ci():
            pytest.fail(f"{message}; CI is set, so a missing tool is a failure, not a skip")
        pytest.skip(message)
    return path
