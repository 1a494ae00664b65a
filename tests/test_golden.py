"""Every rendered manifest matches its committed golden YAML (regenerate with --regen-golden)."""

from pathlib import Path

import pytest

from offhours.workflows.render import rendered_files

GOLDEN = Path(__file__).parent / "golden"
RENDERED = rendered_files()


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_rendered_manifest_matches_golden(name: str, regen_golden: bool) -> None:
    golden = GOLDEN / name
    before = golden.read_text() if golden.exists() else None
    if regen_golden and before != RENDERED[name]:
        # Rewritten, so not compared: this run fails; the next one compares the new file.
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(RENDERED[name])
        pytest.fail(f"{name}: golden {'written' if before is None else 'rewritten'}: review `git diff tests/golden`")
    assert before is not None, f"no golden for {name}: run `make golden`"
    assert RENDERED[name] == before, f"{name} differs from its golden: run `make golden` and review"


def test_no_stale_goldens(regen_golden: bool) -> None:
    stale = sorted(p.name for p in GOLDEN.glob("*.yaml") if p.name not in RENDERED)
    if regen_golden and stale:
        for name in stale:
            (GOLDEN / name).unlink()
        pytest.fail(f"removed stale goldens {stale}: review `git status tests/golden`")
    assert stale == []
    assert sorted(p.name for p in GOLDEN.glob("*.yaml")) == sorted(RENDERED)


def test_render_command_writes_the_goldens(tmp_path: Path) -> None:
    from offhours.scripts.cli import main

    assert main(["render", "--out", str(tmp_path)]) == 0
    for name in RENDERED:
        assert (tmp_path / name).read_text() == (GOLDEN / name).read_text()
