import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.tools import require_tool

REPO = Path(__file__).resolve().parent.parent

# `make mutation` reruns the property tests once per mutant: fewer examples there keep it within its budget.
settings.register_profile("mutation", max_examples=20, deadline=None)
# No per-example deadline: speed is measured in bench/, never asserted in a test, and a deadline fails by the
# machine's load (CI runs the offline tiers on every core beside the control plane's Go build).
settings.register_profile("default", deadline=None)
settings.load_profile(os.environ.get("OFFHOURS_HYPOTHESIS_PROFILE", "default"))
SHARED = REPO.parent / "shared"


def pytest_addoption(parser: pytest.Parser) -> None:
    # Only this explicit option rewrites the goldens: no environment variable turns comparing off.
    parser.addoption("--regen-golden", action="store_true", default=False,
                     help="rewrite tests/golden from the current templates (each rewritten file still fails once)")


@pytest.fixture(scope="session")
def regen_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--regen-golden"))


@pytest.fixture(scope="session")
def launcher(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go launcher, built from scripts/launcher for this test session."""
    go = require_tool("go")
    out = tmp_path_factory.mktemp("launcher") / "offhours-launch"
    env = {**os.environ, "CGO_ENABLED": "0"}
    subprocess.run([go, "build", "-o", str(out), "."], cwd=REPO / "scripts" / "launcher", check=True, env=env)
    return out
