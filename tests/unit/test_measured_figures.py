"""The docs' figures of the local control plane are the measurement file's, never typed by hand.

bench/results/controlplane.json holds what `make cluster-up` and `make e2e` measured (with the
machine's cores and load); the docs' pages (measure.PAGES) carry each figure between `<!-- measured:KEY -->` markers.
"""

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.controlplane import measure

REPO = Path(__file__).resolve().parents[2]


def test_the_docs_state_every_figure_once_exactly_as_the_measurement_file_has_it() -> None:
    results = measure.load(REPO / "bench" / "results" / "controlplane.json")
    marked: list[tuple[str, str]] = []
    for page in measure.PAGES:
        text = page.read_text()
        marked += measure.MARK.findall(text)
        assert measure.rewrite(text, results) == text, f"{page.name}: run measure.py docs"
    keys = [key for key, _ in marked]
    assert sorted(keys) == sorted(measure.WHAT), "the docs must mark each measured figure once: " + ", ".join(keys)
    for key, text in marked:
        assert text == measure.phrase(key, results), f"the docs' {key} is not the file's: run measure.py docs"
    assert "<!-- measured:" not in (REPO / "README.md").read_text(), "README points to the docs; it states no figure"


def test_a_figure_typed_over_is_put_back_and_a_stale_one_follows_a_new_record(tmp_path: Path) -> None:
    results, page = tmp_path / "controlplane.json", tmp_path / "page.md"
    page.write_text("CI: <!-- measured:e2e_tier -->the e2e tier took about 2 minutes<!-- /measured -->.\n")
    measure.record("e2e_tier", 26 * 60 + 10, results, [page])
    text = page.read_text()
    assert "the e2e tier (`make e2e`) took about 26 minutes on" in text and "about 2 minutes" not in text
    assert json.loads(results.read_text())["e2e_tier"]["seconds"] == 1570.0
    measure.record("cluster_up", 21.04, results, [page])  # another figure: this one stays as recorded
    assert measure.phrase("cluster_up", measure.load(results)).startswith(
        "`make cluster-up` with the binaries cached took about 21 s on ")
    assert page.read_text() == text


@pytest.mark.parametrize("seconds", [-1.0, float("nan"), float("inf"), 1e9])
def test_no_duration_is_refused_and_nothing_is_written(tmp_path: Path, seconds: float) -> None:
    results = tmp_path / "controlplane.json"
    with pytest.raises(ValueError, match="no duration"):
        measure.record("e2e_tier", seconds, results, ())
    with pytest.raises(ValueError, match="unknown measurement 'e2e'"):
        measure.record("e2e", 10.0, results, ())
    assert not results.exists()


def test_a_page_marking_an_unknown_figure_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown measurement 'nightly'"):
        measure.rewrite("<!-- measured:nightly -->x<!-- /measured -->", {})


@given(st.floats(0, 1e6))
def test_a_figure_says_minutes_from_two_minutes_on_and_its_machine(seconds: float) -> None:
    # Invariant: the phrase names the unit it rounds to and where it was measured, from the record alone.
    entry = {"seconds": seconds, "cores": 2, "loadAverage": 3.5, "at": "2026-12-01T17:00:00Z"}
    text = measure.phrase("first_build", {"first_build": entry})
    unit = "minutes" if seconds >= 120 else "s"
    assert re.search(rf"took about \d+ {unit} on 2 cores at load average 3.5 \(2026-12-01\)$", text), text


def test_a_measurement_is_only_printed_unless_recording_is_asked_for(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    # Starting a sandbox must not change a person's checkout: no write without the maintainer's opt-in.
    results = tmp_path / "controlplane.json"
    monkeypatch.setattr(measure, "RESULTS", results)
    monkeypatch.setattr(measure, "REPO", tmp_path)
    monkeypatch.delenv(measure.RECORD_ENV, raising=False)
    assert measure.measured("cluster_up", 30.0) is None and not results.exists()
    monkeypatch.setattr(measure, "record", lambda key, seconds, **kw: {"seconds": seconds})
    monkeypatch.setenv(measure.RECORD_ENV, "1")
    assert measure.measured("cluster_up", 30.0) == {"seconds": 30.0}


def test_a_long_measurement_records_the_mean_load_over_its_run_not_the_load_at_its_end(tmp_path: Path) -> None:
    """Fault: a 52-minute build that shared the cores with tests the whole time was recorded at its end's load, 4.3."""
    results = tmp_path / "controlplane.json"
    entry = measure.record("first_build", 3110.6, results, (), mean_load=7.25)
    assert entry["loadAverageMean"] == 7.2 or entry["loadAverageMean"] == 7.3
    text = measure.phrase("first_build", measure.load(results))
    assert re.search(r"took about 52 minutes on \d+ cores at a mean load average of 7\.[23] \(", text), text
    with pytest.raises(ValueError, match="no load average"):
        measure.record("first_build", 10.0, results, (), mean_load=float("nan"))


def test_the_load_sampler_samples_while_the_measurement_runs() -> None:
    with measure.LoadSampler(every=0.01) as load:
        import time

        time.sleep(0.1)
    assert len(load.samples) >= 3 and load.mean >= 0
