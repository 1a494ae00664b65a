"""The console's namespaces follow kubectl's rule (flag, else the kubeconfig context's, else the gate configuration's),
and an empty pool page names where it looked."""

import argparse
import html
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from offhours.scripts.cli.console import console_namespaces
from offhours.scripts.console.app import create_app
from offhours.scripts.console.source import PoolSource
from offhours.scripts.pool.model import Pool


def kubeconfig(tmp_path: Path, namespace: str | None) -> str:
    context = {"cluster": "c", "user": "u", **({"namespace": namespace} if namespace else {})}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "x",
                                    "contexts": [{"name": "x", "context": context}],
                                    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                                    "users": [{"name": "u", "user": {"token": "t"}}]}))
    return str(path)


def args(**given: object) -> argparse.Namespace:
    return argparse.Namespace(**{"namespace": None, "serving_namespace": None, "config": None, **given})


def test_without_a_flag_or_a_context_namespace_the_gate_configurations_are_used(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", kubeconfig(tmp_path, None))
    research, serving, looked = console_namespaces(args())
    assert (research, serving) == ("research", "serving")  # was default/default: "No service yet"
    assert looked == ("serving namespace serving (the gate configuration's), research namespace research "
                      "(the gate configuration's)")


def test_the_context_namespace_and_the_flags_win_in_that_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", kubeconfig(tmp_path, "team-a"))
    assert console_namespaces(args())[:2] == ("team-a", "serving")
    assert "research namespace team-a (the kubeconfig context's)" in console_namespaces(args())[2]
    assert console_namespaces(args(namespace="r", serving_namespace="s"))[:2] == ("r", "s")


class Empty:
    def read(self, now: datetime | None = None, require_workflows: bool = False) -> Pool:
        return Pool((), (), datetime.now(timezone.utc), ())


def test_no_service_yet_names_where_it_looked() -> None:
    looked = "serving namespace serving (--config's), research namespace research (-n)"
    page = create_app(PoolSource(Empty(), interval=0), looked=looked).test_client().get("/").get_data(as_text=True)
    assert f"No service yet in {looked}" in html.unescape(page)
