"""`offhours usage --by label:KEY` needs a label key: `label:` or a key no label can have is refused, not summed.

With an empty key every job fell in one group `(none)`: a table that looked like an answer. Refused
before the cluster is asked anything (exit 2, one line naming the flag).
"""

import pytest

from offhours.scripts.cli import connect as connect_module
from offhours.scripts.cli.main import main


@pytest.mark.parametrize("by", ["label:", "label: ", "label:team name", "label:a/b/c", "label:" + "k" * 64])
def test_a_label_key_no_label_can_have_is_refused_before_the_cluster_is_asked(
        by: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def no_cluster(*_: object, **__: object) -> None:
        raise AssertionError("the cluster was asked before --by was checked")

    monkeypatch.setattr(connect_module, "connect", no_cluster)
    assert main(["usage", "--by", by, "-n", "research"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--by" in err and "label key" in err, err


@pytest.mark.parametrize("by", ["label:team", "label:offhours.io/team", "label:example.com/cost-centre"])
def test_a_label_key_is_accepted(by: str) -> None:
    from offhours.scripts.cli.jobs import check_by

    check_by(by)  # no error
