"""The fixed launcher: decodes JSON command/args/env and execs, never through a shell."""

import subprocess
from pathlib import Path

import pytest


def _run(launcher: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(launcher), *args], capture_output=True, text=True, timeout=30)


def test_execs_the_decoded_lists_without_a_shell(launcher: Path) -> None:
    out = _run(launcher, "--command", '["printf", "%s|"]', "--args", '["a b", "; rm -rf /", "$(id)"]')
    assert out.returncode == 0, out.stderr
    assert out.stdout == "a b|; rm -rf /|$(id)|"


def test_adds_env_from_a_json_object(launcher: Path) -> None:
    out = _run(launcher, "--command", '["sh", "-c", "printf %s \\"$A\\""]', "--env", '{"A": "x y $B"}')
    assert out.stdout == "x y $B"


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--command", "python train.py"], "--command: not a JSON list"),
        (["--command", "[]"], "--command: the list is empty"),
        (["--command", '["a", 1]'], "--command: item 1 is a number"),
        (["--command", '["true"]', "--args", '{"a": 1}'], "--args: not a JSON list"),
        (["--command", '["true"]', "--env", '{"A": 1}'], '--env: value of "A" is a number'),
        (["--command", '["true"]', "--env", '{"A=B": "x"}'], "not a valid variable name"),
    ],
)
def test_malformed_parameters_get_one_clear_error(launcher: Path, flags: list[str], needle: str) -> None:
    out = _run(launcher, *flags)
    assert out.returncode == 64
    assert needle in out.stderr
    assert out.stderr.count("\n") == 1


def test_missing_program_is_named(launcher: Path) -> None:
    out = _run(launcher, "--command", '["no-such-program-offhours"]')
    assert out.returncode == 127
    assert "no-such-program-offhours" in out.stderr


def test_install_copies_a_working_launcher(launcher: Path, tmp_path: Path) -> None:
    dest = tmp_path / "bin" / "offhours-launch"
    dest.parent.mkdir()
    assert _run(launcher, "--install", str(dest)).returncode == 0
    assert _run(dest, "--command", '["true"]').returncode == 0
