"""The job page's last checkpoint read from a store whose walk was cut short (its folder bound) is never a confident
"none": what was not read may hold the newest progress record."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from offhours.scripts.pool import store_progress as sp
from offhours.scripts.runtime import store_file


@pytest.mark.parametrize("folders", [0, 2, 9])
def test_a_walk_cut_at_its_folder_bound_never_says_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         folders: int) -> None:
    monkeypatch.setattr(store_file, "PROGRESS_MAX_FOLDERS", 4)
    run = tmp_path / "store" / "run-1"
    run.mkdir(parents=True)
    for i in range(folders):
        (run / f"step-{i:02d}").mkdir()
    view = SimpleNamespace(current=SimpleNamespace(checkpoint_prefix=f"file://{run}"))
    text = sp.stored_checkpoint_text(sp.store_progress(view))  # type: ignore[arg-type]
    cut = folders + 1 > 4  # the run's own folder and its steps'
    assert (text == "none in its checkpoint store") == (not cut), text
    if cut:
        assert text.startswith("unknown") and "not read to the end" in text, text


def test_why_says_a_cut_read_as_such() -> None:
    from offhours.scripts.pool.views import checkpoint_line

    line = checkpoint_line(None, sp.Stored(None, None, "more than 4 folders or 1000 progress.json files: not read to "
                                                       "the end"), __import__("datetime").datetime.now())
    assert line == ("last checkpoint: none recorded; its checkpoint store holds more than 4 folders or 1000 "
                    "progress.json files: not read to the end"), line
