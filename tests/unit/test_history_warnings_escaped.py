"""History warnings name series by their Prometheus labels, which any scraped target can set: printed escaped, one line each."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from offhours.scripts.cli.main import main
from offhours.scripts.history import read

FORGED = "p0\x1b]0;owned\x07\nwarning: forged line"


def grid(url, promql, start, step, points, timeout, max_points):
    """Every counter of `chat` on one pod whose instance label holds an escape sequence and a newline; it resets once."""
    values = np.arange(points, dtype=float)
    values[points // 2:] -= values[points // 2]  # a counter reset: one warning naming the series
    return {(("instance", FORGED), ("service", "chat")): values}


def test_a_series_label_with_control_characters_is_printed_escaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Fault: a history warning printed series labels raw: an escape reached the terminal, a newline forged a line."""
    gate = tmp_path / "gate.yaml"
    gate.write_text(yaml.safe_dump({"services": {"chat": {"capacity": {"requestsPerSecond": 5.0}}}}))
    monkeypatch.setattr(read, "query_range", grid)
    # A fixed day: `--since 1d` starts at the last midnight, so a run just after one read two steps and no reset.
    main(["calibrate", "--config", str(gate), "--prometheus", "http://p.invalid",
          "--start", "2026-11-01T00:00Z", "--end", "2026-11-02T00:00Z"])
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert "^[]0;owned\\x07\\nwarning: forged line" in err
    assert not any(line.startswith("warning: forged line") for line in err.splitlines())
