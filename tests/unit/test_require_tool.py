"""require_tool: a missing program skips a test on a workstation but fails it in CI."""

import pytest

from tests.support.tools import in_ci, require_tool

MISSING = "offhours-no-such-tool"


def test_present_tool_gives_its_path() -> None:
    assert require_tool("sh").endswith("/sh")


@pytest.mark.parametrize("value, ci", [("true", True), ("1", True), ("yes", True), ("", False), ("false", False),
                                       ("0", False), (None, False)])
def test_what_counts_as_ci(value: str | None, ci: bool) -> None:
    assert in_ci({} if value is None else {"CI": value}) is ci


def test_missing_tool_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=f"{MISSING} is not installed .*a missing tool is a failure"):
        require_tool(MISSING)


def test_missing_tool_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=f"{MISSING} is not installed"):
        require_tool(MISSING)
