"""The golden switch: only `--regen-golden` rewrites, and a run that rewrote a file (so compared nothing) fails.

Runs the real golden test module in a copy of tests/ (conftest, support, golden) so the committed goldens are never touched.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent
TESTS = GOLDEN.parent


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    dest = tmp_path / "tests"
    dest.mkdir()
    for name in ("__init__.py", "conftest.py"):
        shutil.copy2(TESTS / name, dest / name)
    shutil.copytree(TESTS / "support", dest / "support")
    shutil.copytree(GOLDEN, dest / "golden", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def pytest_run(tests: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tests.parent),
                           str(tests / "golden" / "test_golden.py"), "-k", "matches_golden or stale", *args],
                          cwd=tests.parent, capture_output=True, text=True, env=env or dict(os.environ), timeout=300)


def test_only_the_option_rewrites_and_a_rewrite_fails_once(copy: Path) -> None:
    golden = sorted((copy / "golden").glob("*.yaml"))[0]
    good = golden.read_text()
    golden.write_text(good + "# tampered\n")
    (copy / "golden" / "gone.yaml").write_text("kind: Stale\n")
    total = len(list((copy / "golden").glob("*.yaml")))  # every golden plus the stale one

    # The old environment switch no longer turns comparing into copying.
    env_run = pytest_run(copy, env={**os.environ, "OFFHOURS_REGEN_GOLDEN": "1"})
    assert env_run.returncode == 1, env_run.stdout
    assert f"2 failed, {total - 2} passed" in env_run.stdout
    assert golden.read_text() == good + "# tampered\n"

    regen = pytest_run(copy, "--regen-golden")
    assert regen.returncode == 1, regen.stdout
    assert f"{golden.name}: golden rewritten" in regen.stdout and "removed stale goldens ['gone.yaml']" in regen.stdout
    assert f"2 failed, {total - 2} passed" in regen.stdout
    assert golden.read_text() == good and not (copy / "golden" / "gone.yaml").exists()

    # Nothing left to rewrite: every file is compared, and the run passes, with or without the option.
    assert pytest_run(copy, "--regen-golden").returncode == 0
    assert pytest_run(copy).returncode == 0
