"""Any file or argument a person gives: one line naming what is wrong and exit 2, never a traceback."""

import codecs
from pathlib import Path

import pytest

from offhours.scripts.cli.main import main

GOOD = "namespace: serving\nworkflowNamespace: research\nmetrics: {source: direct}\n" \
       "services: {chat: {capacity: {requestsPerSecond: 1}}}\n"

# Each fault: how to write the file, and the words the one line must hold.
FAULTS = {
    "UTF-16 (a Windows editor's 'Unicode')": (lambda p: p.write_bytes(codecs.BOM_UTF16_LE + GOOD.encode("utf-16-le")),
                                             "is UTF-16 text: save it as UTF-8"),
    "Latin-1": (lambda p: p.write_bytes(GOOD.replace("chat", "caf\xe9").encode("latin-1")), "is not UTF-8 text"),
    "binary": (lambda p: p.write_bytes(bytes(range(256)) * 4), "is a binary file, not text"),
    "empty": (lambda p: p.write_text(""), "is empty"),
    "only blank lines": (lambda p: p.write_text("\n\n   \n"), "is empty"),
    "nested past the parser": (lambda p: p.write_text("[" * 1000), "nested too deeply"),
    "enormous": (lambda p: p.write_text("# " + "x" * (2 * 1024 * 1024) + "\n" + GOOD), "MiB allowed"),
    "a folder": (lambda p: p.mkdir(), "Is a directory"),
}


def one_line(capsys: pytest.CaptureFixture[str], words: str) -> str:
    out = capsys.readouterr()
    assert "Traceback" not in out.err and out.err.count("\n") == 1, out.err
    assert words in out.err, out.err
    return out.err


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")  # a cluster call would fail differently
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("verb", [["report", "--config"], ["jobs", "--config"], ["usage", "--config"],
                                  ["console", "--config"], ["submit", "offhours-job", "--config"],
                                  ["render", "--out", "{out}", "--gate-config"]])
def test_a_bad_gate_configuration_file_is_one_line_and_exit_2(fault: str, verb: list[str], tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Fault: the file given is in another encoding, binary, empty, enormous, too deep, or a folder."""
    write, words = FAULTS[fault]
    path = tmp_path / "gate.yaml"
    write(path)
    argv = [a.replace("{out}", str(tmp_path / "out")) for a in verb]
    assert main([*argv, str(path)]) == 2
    one_line(capsys, words)
    assert not (tmp_path / "out").exists()  # render wrote nothing


def test_validate_names_a_file_past_its_size_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("wb") as handle:
        handle.truncate(40 * 1024 * 1024)  # sparse: refused on its size, never read
    assert main(["validate", str(path)]) == 2
    assert capsys.readouterr().out == f"{path}: document 0: .: the file is 40.0 MiB: more than the 32 MiB allowed\n"


@pytest.mark.parametrize("fault", sorted(set(FAULTS) - {"nested past the parser", "enormous"}))
def test_validate_names_a_file_it_cannot_read_and_exits_2(fault: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    write, words = FAULTS[fault]
    path = tmp_path / "wf.yaml"
    write(path)
    code = main(["validate", str(path)])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    if fault == "a folder":  # a folder is searched for manifests; this one holds none
        assert code == 2 and "the folder holds no manifest" in out.out
        return
    assert code == 2 and len(out.out.splitlines()) == 1, out.out
    assert words in out.out, out.out


def test_validate_of_yaml_nested_past_the_parser_is_a_problem_not_a_traceback(tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "deep.yaml"
    path.write_text("[" * 1000)
    assert main(["validate", str(path)]) == 1
    assert capsys.readouterr().out == f"{path}: document 0: .: nested too deeply to parse\n"


@pytest.mark.parametrize("fault", ["binary", "Latin-1", "nested past the parser"])
@pytest.mark.parametrize("verb", [["jobs"], ["why", "x"], ["report"], ["check"]])
def test_a_kubeconfig_that_is_not_text_is_one_line(fault: str, verb: list[str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Fault: $KUBECONFIG (or --kubeconfig) names a binary, non-UTF-8 or absurdly nested file."""
    write, _ = FAULTS[fault]
    path = tmp_path / "kubeconfig"
    write(path)
    monkeypatch.setenv("KUBECONFIG", str(path))
    argv = [*verb, "--kubeconfig", str(path)] if verb == ["check"] else verb
    assert main(argv) == 2
    assert str(path) in one_line(capsys, "input file is not")


@pytest.mark.parametrize(("argv", "words"), [
    (["report", "--price", "nan"], "--price nan: expected a GPU-hour price of 0 or more"),
    (["report", "--price", "-1"], "--price -1:"),
    (["report", "--price", "inf"], "--price inf:"),
    (["report", "--json", "/nonexistent/folder/r.json"], "its folder does not exist"),
    (["usage", "--since", "1e9w"], "--since '1e9w': expected a duration"),
    (["usage", "--by", "team"], "--by 'team': expected service, user or label:KEY"),
    (["schedule", "n", "--template", "offhours-job", "--cron", "0 1 * * *", "--keep", "99999999999"], "--keep"),
    (["schedule", "n", "--template", "offhours-job", "--cron", "0 1 * * *", "--starting-deadline", "9" * 20],
     "--starting-deadline"),
    (["schedule", "n", "--template", "offhours-job", "--cron", "0 1 * * *", "--priority", "-" + "9" * 30],
     "--priority"),
    (["submit", "offhours-job", "--priority", "9" * 30], "--priority"),
])
def test_out_of_range_arguments_are_one_line_and_exit_2(argv: list[str], words: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    one_line(capsys, words)
