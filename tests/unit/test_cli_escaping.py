"""Tenant-written strings reach the operator's terminal escaped: no escape sequence runs, no newline forges a row."""

import csv
import io
import json

import pytest

from offhours.scripts.cli import jobs, report
from offhours.scripts.cli.main import main
from offhours.scripts.cli.schedule import ScheduleRow, render_rows
from offhours.scripts.cli.text import printable
from tests.support.pool_fixture import workflow
from tests.support.tenant_pool import Reader, pool_of, running

# Retitle the terminal (OSC 0), then a newline and a row that looks like a real job.
HOSTILE = "\x1b]0;owned\x07waiting\x1b[2J\nforged-run   forged   chat   running   -   4   1m   0   9.99"
RUN_ID = "run\x1b[31m\r\nforged"


def hostile_pool():
    parked = workflow("sweep", "chat", 2, "parked", created=60, suspend=True,
                      annotations={"offhours.io/waiting-reason": HOSTILE})
    parked["spec"]["arguments"] = {"parameters": [{"name": "run-id", "value": RUN_ID}]}
    del parked["metadata"]["labels"]["offhours.io/run-id"]
    parked["metadata"]["labels"]["team"] = HOSTILE  # the API server refuses such a label; a stale cache or a proxy may not
    parked["metadata"]["labels"]["workflows.argoproj.io/creator"] = HOSTILE
    return pool_of(running({}), parked)


def clean(text: str) -> None:
    assert not any(ord(c) < 0x20 and c != "\n" or 0x7f <= ord(c) < 0xa0 for c in text), repr(text)
    assert "forged-run" not in [line.split("   ")[0].strip() for line in text.splitlines()]
    assert not any(line.startswith("forged") for line in text.splitlines()), text


def test_the_helper_escapes_as_kubectl_does() -> None:
    assert printable("a\x1b[31mb") == "a^[[31mb"
    assert printable("row\nrow\r\t\x07\x7f\x9b") == "row\\nrow\\r\\t\\x07\\x7f\\x9b"
    assert printable("evil\u202etxt.exe\u200b\u2028") == "evil\\u202etxt.exe\\u200b\\u2028"
    assert printable("chat-7b é 日本 ✓") == "chat-7b é 日本 ✓"  # printable text, any script, unchanged


@pytest.mark.parametrize("argv", [["jobs"], ["jobs", "-o", "wide"], ["jobs", "--all", "-o", "wide"], ["why", "sweep"],
                                  ["usage", "--by", "user"], ["usage", "--by", "label:team"],
                                  ["usage", "--csv", "--by", "label:team"]])
def test_every_text_verb_escapes_tenant_strings(argv: list[str], monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Fault: a tenant writes an escape sequence and a newline into its waiting reason and run id."""
    monkeypatch.setattr(jobs, "_reader", lambda args: Reader(hostile_pool()))
    assert main(argv) == 0
    out = capsys.readouterr()
    clean(out.out)
    clean(out.err)
    if argv == ["jobs", "-o", "wide"]:
        assert "^[]0;owned\\x07waiting^[[2J\\nforged-run" in out.out
        assert len(out.out.splitlines()) == 3  # header, train, sweep: no forged row


def test_csv_cells_stay_one_row_each(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    pool = hostile_pool()
    monkeypatch.setattr(jobs, "_reader", lambda args: Reader(pool))
    assert main(["usage", "--csv", "--by", "label:team"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert all(len(r) == 5 for r in rows)


def test_json_keeps_the_value_and_encodes_it(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(jobs, "_reader", lambda args: Reader(hostile_pool()))
    assert main(["jobs", "-o", "json"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\n  forged" not in out
    rows = json.loads(out)
    assert HOSTILE in [r["reason"] for r in rows]  # the value kept, encoded
    # A run id that is no object name is no run id (the codec reads it once for every verb): its job
    # stands under its workflow's own name, never under the escape sequence.
    assert RUN_ID not in [r["runId"] for r in rows] and all(r["runId"].isprintable() for r in rows)


def test_report_and_schedule_list_escape(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(report, "_reader", lambda args, config: Reader(hostile_pool()))
    assert main(["report"]) == 0
    clean(capsys.readouterr().out)
    listing = render_rows([ScheduleRow("nightly", "offhours-job", "0 1 * * *\nforged", "never", "Forbid",
                                       [("nightly-1", RUN_ID, "parked")])])
    clean(listing)
    assert len(listing.splitlines()) == 3
