"""The fixed launcher: decodes JSON command/args/env and execs, never through a shell."""

import json
import os
import subprocess
import sys
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


# One program per language, each printing the variable VAR as its runtime reads it: glibc's getenv and
# Go's os.Getenv take the first of two entries of one name, Python's os.environ and shells the last.
_C_READER = r'''
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
extern char **environ;
int main(void) {
    int n = 0;
    for (char **e = environ; *e; e++) n += strncmp(*e, "VAR=", 4) == 0;
    printf("%s %d", getenv("VAR") ? getenv("VAR") : "(unset)", n);
    return 0;
}
'''
_GO_READER = '''package main

import (
	"fmt"
	"os"
	"syscall"
)

func main() {
	n := 0
	for _, kv := range syscall.Environ() {
		if len(kv) >= 4 && kv[:4] == "VAR=" {
			n++
		}
	}
	fmt.Printf("%s %d", os.Getenv("VAR"), n)
}
'''
_PY_READER = ("import os; raw = open('/proc/self/environ', 'rb').read().split(b'\\0'); "
              "print(os.environ.get('VAR'), sum(e.startswith(b'VAR=') for e in raw), end='')")
_SH_READER = 'n=$(tr "\\0" "\\n" < /proc/$$/environ | grep -c "^VAR="); printf "%s %s" "$VAR" "$n"'


@pytest.fixture(scope="module")
def readers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """The command of each environment reader: C (cc), Go, Python and sh."""
    from tests.support.tools import require_tool

    tmp = tmp_path_factory.mktemp("readers")
    (tmp / "reader.c").write_text(_C_READER)
    subprocess.run([require_tool("cc"), "-o", str(tmp / "c-reader"), str(tmp / "reader.c")], check=True)
    (tmp / "go").mkdir()
    (tmp / "go" / "main.go").write_text(_GO_READER)
    (tmp / "go" / "go.mod").write_text("module reader\n\ngo 1.21\n")
    subprocess.run([require_tool("go"), "build", "-o", str(tmp / "go-reader"), "."], cwd=tmp / "go", check=True,
                   env={**os.environ, "CGO_ENABLED": "0"})
    return {"c": [str(tmp / "c-reader")], "go": [str(tmp / "go-reader")], "python": [sys.executable, "-c", _PY_READER],
            "sh": ["sh", "-c", _SH_READER]}


@pytest.mark.parametrize("language", ["c", "go", "python", "sh"])
def test_env_parameter_wins_over_the_images_variable_in_every_language(
        launcher: Path, readers: dict[str, list[str]], language: str) -> None:
    """Fault: the image sets VAR and the env parameter sets it too; the program must see the parameter's value, once."""
    out = subprocess.run([str(launcher), "--command", json.dumps(readers[language]), "--env", '{"VAR": "from-env"}'],
                         capture_output=True, text=True, timeout=60, env={**os.environ, "VAR": "from-image"})
    assert out.returncode == 0, out.stderr
    assert out.stdout == "from-env 1"  # the parameter's value, and no second entry a runtime could pick instead


@pytest.mark.parametrize("language", ["c", "go", "python", "sh"])
def test_the_images_variables_reach_the_program_untouched(
        launcher: Path, readers: dict[str, list[str]], language: str) -> None:
    """Fault: none; the baseline of the override (a variable the parameter does not name stays the image's)."""
    out = subprocess.run([str(launcher), "--command", json.dumps(readers[language]), "--env", '{"OTHER": "x"}'],
                         capture_output=True, text=True, timeout=60, env={**os.environ, "VAR": "from-image"})
    assert out.stdout == "from-image 1", out.stderr


def test_a_path_in_env_finds_the_program_as_env1_does(launcher: Path, tmp_path: Path) -> None:
    """Fault: the program lives only on the PATH the env parameter gives; it must be found there and run with it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "only-here"
    tool.write_text('#!/bin/sh\nprintf "%s" "$PATH"\n')
    tool.chmod(0o755)
    path = f"{bin_dir}:/usr/bin:/bin"
    out = _run(launcher, "--command", '["only-here"]', "--env", json.dumps({"PATH": path}))
    assert out.returncode == 0, out.stderr
    assert out.stdout == path


@pytest.mark.parametrize("flags, needle", [
    (["--command", '["true"]', "--env", '{"A": "x\\u0000y"}'], '--env: value of "A" holds a NUL character'),
    (["--command", '["true", "a\\u0000b"]'], "--command: item 1 holds a NUL character"),
    (["--command", '["true"]', "--args", '["\\u0000"]'], "--args: item 0 holds a NUL character"),
])
def test_a_nul_character_is_named_not_an_exec_failure(launcher: Path, flags: list[str], needle: str) -> None:
    """Fault: a NUL inside a value, which no argv or environment can carry; one line, exit 64, nothing run."""
    out = _run(launcher, *flags)
    assert (out.returncode, out.stderr.count("\n")) == (64, 1), out.stderr
    assert needle in out.stderr
