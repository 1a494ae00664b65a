"""Every input comes in through offhours.scripts.inputs: no other module of the package reads one raw.

The class: an input read without a bound (a YAML loader, `csv.reader`, `json.load` of a file, a raw
HTTP client, a file read whole). The mechanism: one package bounds them all, and this scan of every
module's syntax refuses any raw reader outside it, so a new verb or reader cannot forget the bounds.
An exemption is a named file with the rules it may break and why.
"""

import ast

import pytest

from tests.unit.test_architecture import REPO, modules

INPUTS = "offhours.scripts.inputs"

YAML_LOADERS = "a YAML loader"
CSV_READERS = "csv.reader/DictReader"
JSON_FILE = "json.load of a file"
RAW_HTTP = "a raw HTTP client"
FILE_READ = "a file read whole"

# Each exemption: the module, the rules it may break, and why.
EXEMPT: dict[str, tuple[set[str], str]] = {
    "offhours.scripts.cluster.grace": (
        {YAML_LOADERS},
        "reads tenant-written pod-spec patches and manifests inside Workflow objects (already in memory, bounded "
        "by MAX_PATCH_CHARS, a per-tick parse budget and a MAX_NODES walk); it must never raise (unreadable is a "
        "value), builds only a patch's top-level keys from the loader's nodes, and takes the largest of duplicated "
        "grace keys"),
    "offhours.scripts.runtime.store_file": (
        {FILE_READ},
        "reads back the store's own log entries and checkpoint bytes, which the job itself wrote (a checkpoint is "
        "as large as the job's state, no input bound fits it); what the gate reads there, a tenant-writable "
        "progress.json, goes through _read_small_regular (regular files only, not through links, capped)"),
}
# Whole families of modules left out, by name prefix: (prefix, why).
LEFT_OUT = (
    ("offhours.scripts.controlplane",
     "the local control plane is a test harness nothing of the library imports (.importlinter: controlplane-apart)"),
)

_HTTP_MODULES = ("requests", "http.client", "urllib.request", "httpx", "aiohttp", "urllib3.poolmanager")
_URLLIB3_CALLS = {"PoolManager", "ProxyManager", "HTTPConnectionPool", "HTTPSConnectionPool", "connection_from_url",
                  "request"}
_SOCKET_CALLS = {"socket", "create_connection", "socketpair", "fromfd"}


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


_OPENERS = {"open", "io.open", "codecs.open", "builtins.open"}


def _reads_a_file(call: ast.Call, aliases: dict[str, str]) -> bool:
    """`open(path)`, `io.open`, `codecs.open` or `<path>.open()` in a read mode; a write mode is not an input.

    A mode that is not a constant may be a read: it is counted as one.
    """
    if isinstance(call.func, ast.Name):
        opener = aliases.get(call.func.id, call.func.id)
        if opener not in _OPENERS:
            return False
        at = 1
    elif isinstance(call.func, ast.Attribute) and call.func.attr == "open":
        head = _resolved(call.func.value, aliases)
        if head in ("os", "socket", "webbrowser", "tarfile", "zipfile", "gzip"):
            return False  # not a file read whole by this rule (os.open is a descriptor; the others are named apart)
        at = 1 if f"{head}.open" in _OPENERS else 0  # Path.open(mode): the mode is the first argument
    else:
        return False
    mode = call.args[at] if len(call.args) > at else next((k.value for k in call.keywords if k.arg == "mode"), None)
    if mode is None:
        return True
    if not (isinstance(mode, ast.Constant) and isinstance(mode.value, str)):
        return True
    return not set(mode.value) & set("wax+")


def _resolved(node: ast.AST, aliases: dict[str, str]) -> str:
    """The dotted name of `node` with an import alias at its head replaced (`import yaml as y`: `y.load` is yaml.load)."""
    name = _dotted(node)
    head, dot, rest = name.partition(".")
    return aliases.get(head, head) + dot + rest if name else name


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> the module or object it imports (`import yaml as y`, `from yaml import safe_load as s`)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


_OTHER_READERS = {"tomllib.load": "tomllib.load of a file", "numpy.loadtxt": "numpy.loadtxt",
                  "numpy.genfromtxt": "numpy.genfromtxt", "numpy.load": "numpy.load"}


# Reading standard input (its isatty() is no read).
_STDIN_READS = {"sys.stdin.read", "sys.stdin.readline", "sys.stdin.readlines", "sys.stdin.buffer"}


def violations(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, rule, what) for each raw read in a module's syntax tree."""
    found: list[tuple[int, str, str]] = []
    aliases = _aliases(tree)
    _parents = {id(child): [parent] for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in aliases and isinstance(node.ctx, ast.Load):
            target = aliases[node.id]
            head, _, attr = target.rpartition(".")
            if head == "yaml" and ("load" in attr or attr.endswith("Loader")) and node.id != attr:
                found.append((node.lineno, YAML_LOADERS, f"{node.id} ({target})"))
            elif target in _OTHER_READERS or (head == "pandas" and attr.startswith("read_")) or target in _STDIN_READS:
                found.append((node.lineno, FILE_READ, f"{node.id} ({target})"))
            elif (head == "urllib3" and attr in _URLLIB3_CALLS) or (head == "socket" and attr in _SOCKET_CALLS):
                found.append((node.lineno, RAW_HTTP, f"{node.id} ({target})"))
        if isinstance(node, ast.Name) and node.id in _OPENERS and isinstance(node.ctx, ast.Load) and not any(
                isinstance(p, ast.Call) and p.func is node for p in _parents.get(id(node), ())):
            found.append((node.lineno, FILE_READ, "open passed on as a value"))  # `f = open; f(p).read()`
        if isinstance(node, ast.ImportFrom) and node.module in ("yaml", "csv", "json") and any(
                a.name == "*" for a in node.names):
            found.append((node.lineno, YAML_LOADERS if node.module == "yaml" else FILE_READ,
                          f"from {node.module} import *"))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and \
                len(node.args) > 1 and _resolved(node.args[0], aliases) in ("yaml", "csv", "json"):
            found.append((node.lineno, YAML_LOADERS, "getattr of a reader module"))  # a name the scan cannot see
        if isinstance(node, ast.Call) and _resolved(node.func, aliases) == "os.open" and not any(
                flag in ast.dump(node) for flag in ("O_WRONLY", "O_RDWR")):
            found.append((node.lineno, FILE_READ, "os.open for reading"))
        if isinstance(node, ast.Attribute):
            name = _resolved(node, aliases)
            if name in _OTHER_READERS or name.startswith("pandas.read_") or name in _STDIN_READS:
                found.append((node.lineno, FILE_READ, name))
            head, _, attr = name.rpartition(".")
            if head == "yaml" and ("load" in attr or attr.endswith("Loader")):
                found.append((node.lineno, YAML_LOADERS, name))
            elif name in ("csv.reader", "csv.DictReader"):
                found.append((node.lineno, CSV_READERS, name))
            elif name == "json.load":
                found.append((node.lineno, JSON_FILE, name))
            elif (head == "urllib3" and attr in _URLLIB3_CALLS) or (head == "socket" and attr in _SOCKET_CALLS):
                found.append((node.lineno, RAW_HTTP, name))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if node.module == "yaml" and ("load" in alias.name or alias.name.endswith("Loader")):
                    found.append((node.lineno, YAML_LOADERS, f"from yaml import {alias.name}"))
                elif node.module == "csv" and alias.name in ("reader", "DictReader"):
                    found.append((node.lineno, CSV_READERS, f"from csv import {alias.name}"))
                elif node.module == "json" and alias.name == "load":
                    found.append((node.lineno, JSON_FILE, "from json import load"))
            if node.module.startswith(_HTTP_MODULES) or (node.module in ("http", "urllib") and any(
                    a.name in ("client", "request") for a in node.names)):
                found.append((node.lineno, RAW_HTTP, f"from {node.module} import ..."))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(_HTTP_MODULES):
                    found.append((node.lineno, RAW_HTTP, f"import {alias.name}"))
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("read_text", "read_bytes"):
                found.append((node.lineno, FILE_READ, f".{node.func.attr}()"))
            elif _reads_a_file(node, aliases):
                found.append((node.lineno, FILE_READ, "open(...) for reading"))
    return found


def test_no_module_outside_the_input_layer_reads_an_input_raw() -> None:
    """Fault (issue 33): gate configuration, fleet files, traces, Prometheus answers each had their own raw read."""
    problems = []
    for name, path in sorted(modules().items()):
        if name == INPUTS or name.startswith(INPUTS + ".") or name.startswith(tuple(p for p, _ in LEFT_OUT)):
            continue
        allowed = EXEMPT.get(name, (set(), ""))[0]
        for line, rule, what in violations(ast.parse(path.read_text())):
            if rule not in allowed:
                problems.append(f"{path.relative_to(REPO)}:{line}: {what} ({rule}): read it through {INPUTS}")
    assert not problems, "\n".join(problems)


def test_every_exemption_is_still_needed() -> None:
    """An exemption that no longer excuses anything is removed, so the list says only what is true."""
    found = modules()
    for name, (rules, why) in EXEMPT.items():
        assert why, name
        if name not in found:
            continue  # a module the checkpoint rewrite removed
        broken = {rule for _, rule, _ in violations(ast.parse(found[name].read_text()))}
        assert broken & rules, f"{name} no longer needs its exemption ({sorted(rules)})"


@pytest.mark.parametrize(("source", "rule"), [
    ("import yaml\nyaml.safe_load(text)\n", YAML_LOADERS),
    ("import yaml\nyaml.load(text, Loader=yaml.SafeLoader)\n", YAML_LOADERS),
    ("from yaml import safe_load_all\n", YAML_LOADERS),
    ("import csv\ncsv.DictReader(f)\n", CSV_READERS),
    ("import json\njson.load(f)\n", JSON_FILE),
    ("import requests\n", RAW_HTTP),
    ("from urllib.request import urlopen\n", RAW_HTTP),
    ("import http.client\n", RAW_HTTP),
    ("import urllib3\nurllib3.PoolManager()\n", RAW_HTTP),
    ("from pathlib import Path\nPath(p).read_text()\n", FILE_READ),
    ("open(p).read()\n", FILE_READ),
    ("open(p, 'rb').read()\n", FILE_READ),
    # Closes the class "a raw read the scan's spelling did not recognise" (aliases, other openers, other readers).
    ("import yaml as y\ny.safe_load(text)\n", YAML_LOADERS),
    ("from yaml import safe_load as s\n", YAML_LOADERS),
    ("from pathlib import Path\nPath(p).open().read()\n", FILE_READ),
    ("from pathlib import Path\nPath(p).open('rb').read()\n", FILE_READ),
    ("import io\nio.open(p).read()\n", FILE_READ),
    ("import codecs\ncodecs.open(p).read()\n", FILE_READ),
    ("import builtins\nbuiltins.open(p).read()\n", FILE_READ),
    ("from io import open as o\no(p).read()\n", FILE_READ),
    ("open(p, mode).read()\n", FILE_READ),
    ("import sys\nsys.stdin.read()\n", FILE_READ),
    ("from sys import stdin\nstdin.buffer.read()\n", FILE_READ),
    ("import tomllib\ntomllib.load(f)\n", FILE_READ),
    ("import numpy as np\nnp.loadtxt(p)\n", FILE_READ),
    ("import pandas as pd\npd.read_csv(p)\n", FILE_READ),
    ("from pandas import read_parquet\nread_parquet(p)\n", FILE_READ),
    ("f = open\nf(p).read()\n", FILE_READ),
    ("import yaml\nload = getattr(yaml, 'safe_load')\n", YAML_LOADERS),
    ("from yaml import *\nsafe_load(text)\n", YAML_LOADERS),
    ("import csv as c\nc.reader(f)\n", CSV_READERS),
    ("import json as j\nj.load(f)\n", JSON_FILE),
    ("from urllib3 import PoolManager\nPoolManager().request('GET', u)\n", RAW_HTTP),
    ("import urllib3 as u3\nu3.PoolManager()\n", RAW_HTTP),
    ("from socket import create_connection\ncreate_connection((h, 80)).recv(1 << 30)\n", RAW_HTTP),
    ("import os\nos.read(os.open(p, os.O_RDONLY), 1 << 40)\n", FILE_READ),
])
def test_the_scan_finds_each_raw_read(source: str, rule: str) -> None:
    assert rule in {r for _, r, _ in violations(ast.parse(source))}


@pytest.mark.parametrize("source", [
    "import yaml\nyaml.safe_dump(x)\n", "import json\njson.loads(text)\njson.dumps(x)\n", "open(p, 'w').write(t)\n",
    "import urllib3\nurllib3.exceptions.HTTPError\n", "import socket\nsocket.gethostname()\n",
    "import sys\nsys.stdin.isatty()\n", "from pathlib import Path\nPath(p).open('w').write(t)\n",
    "import os\nos.open(p, os.O_WRONLY)\n",
])
def test_the_scan_leaves_writes_and_in_memory_decoding_alone(source: str) -> None:
    assert violations(ast.parse(source)) == []
