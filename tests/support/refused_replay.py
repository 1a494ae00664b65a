"""A gate config on disk for CLI tests of replay requests that must be refused before any history is read."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from offhours.scripts.cli import history_source


def config_that_reads_no_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: dict[str, Any]) -> Path:
    """Write `config` as gate.yaml; any read of Prometheus history from then on fails the test."""
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump(config))

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the history was read for a request that is refused")

    monkeypatch.setattr(history_source, "read", never)
    return path
