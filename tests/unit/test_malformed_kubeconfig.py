"""A kubeconfig in a shape the client cannot read is one line naming it, for every cluster verb, never a traceback.

The namespace rule reads the kubeconfig's current context before any cluster is asked: a context that
is a string, a file that is a YAML list, contexts that are numbers made that read raise inside the
client library, and every verb without `-n` ended in a traceback. Such a file gives no context namespace,
and the connection then names the file and how to get a cluster (exit 2: fixed locally).
"""

from pathlib import Path

import pytest

from offhours.scripts.cli.main import main
from offhours.scripts.cli.namespaces import context_namespace

MALFORMED = [
    "current-context: c\ncontexts: [{name: c, context: \"str\"}]\n",
    "- a list\n",
    "contexts: [1, 2]\ncurrent-context: 1\n",
    "current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\nclusters: [{name: c, cluster: 7}]\n"
    "users: [{name: u, user: [t]}]\n",
]


@pytest.mark.parametrize("text", MALFORMED)
def test_a_malformed_kubeconfig_has_no_context_namespace(text: str, tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    assert context_namespace(str(path)) is None


@pytest.mark.parametrize("text", MALFORMED)
@pytest.mark.parametrize("verb", [["jobs"], ["why", "x"], ["usage"], ["report"], ["schedule", "list"],
                                  ["submit", "offhours-job"]], ids=lambda v: v[0])
def test_every_verb_names_a_malformed_kubeconfig_in_one_line(text: str, verb: list[str], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(verb) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "make cluster-up" in err, err
