import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--regen-golden",
        action="store_true",
        default=os.environ.get("OFFHOURS_REGEN_GOLDEN") == "1",
        help="rewrite tests/golden from the current templates instead of comparing",
    )


@pytest.fixture(scope="session")
def regen_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--regen-golden"))


@pytest.fixture(scope="session")
def launcher(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go launcher, built from scripts/launcher for this test session."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not installed")
    out = tmp_path_factory.mktemp("launcher") / "offhours-launch"
    env = {**os.environ, "CGO_ENABLED": "0"}
    subprocess.run([go, "build", "-o", str(out), "."], cwd=REPO / "scripts" / "launcher", check=True, env=env)
    return out
