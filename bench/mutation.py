"""Mutation testing of the decision core, the metrics maths, the exit hook and the gate's act path.

mutmut 3 names a mutant after the module it computes from the file's path, while the tests import
the code as `offhours.*` (the package is mapped from top-level folders by pyproject.toml). So the
run happens in a staged copy, build/mutation, where the installed layout is real folders:
src/offhours/{scripts,steps,...} and tests/. There mutmut mutates the files in SCOPE, learns which
tests call each function, and reruns only those offline tests per mutant.

    python bench/mutation.py                 # every scope; results to bench/results/mutation.json
    python bench/mutation.py --scope policy  # one scope (see SCOPES)

Results: the score (killed / checked) per scope and overall, and every survivor with its diff.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
STAGE = REPO / "build" / "mutation"
RESULTS = REPO / "bench" / "results" / "mutation.json"

# scope -> (files to mutate, relative to the repo; mutant-name patterns; test files that check them)
SCOPES: dict[str, tuple[list[str], list[str], list[str]]] = {
    # The decision core. The config loader (scripts/config/loader.py, checked by its schema tests) is not in scope.
    "policy": (["scripts/policy/capacity.py", "scripts/policy/decide.py", "scripts/policy/plan.py",
                "scripts/policy/window.py"],
               ["offhours.scripts.policy.capacity.*", "offhours.scripts.policy.decide.*",
                "offhours.scripts.policy.plan.*", "offhours.scripts.policy.window.*"],
               ["tests/unit/test_policy.py", "tests/unit/test_capacity.py", "tests/unit/test_plan.py"]),
    "metrics": (["scripts/metrics/load.py", "scripts/metrics/exposition.py"],
                ["offhours.scripts.metrics.load.*", "offhours.scripts.metrics.exposition.*"],
                ["tests/unit/test_exposition*.py", "tests/unit/test_load*.py", "tests/integration/test_sources.py",
                 "tests/integration/test_gate_over_emulated_vllm.py"]),
    "exit-hook": (["scripts/gate/exit_hook.py"], ["offhours.scripts.gate.exit_hook.*"],
                  ["tests/integration/test_gate_over_emulated_vllm.py", "tests/unit/test_steps.py"]),
    # The act path: serving first, the scale (or the autoscaler's cap) with its intent recorded, then
    # the research side (park, stop, admit, adopt, delete, annotate).
    "gate-act": (["scripts/gate/controller.py", "scripts/gate/actuate.py"],
                 ["offhours.scripts.gate.controller.xǁGateǁ_service__mutmut_*"]
                 + [f"offhours.scripts.gate.actuate.x_{m}__mutmut_*" for m in ("write_serving", "research_side",
                                                                             "park_and_stop")],
                 ["tests/integration/test_gate_over_emulated_vllm.py", "tests/unit/test_gate_controller.py"]),
}
# Survivors that no test can kill because they behave like the original: (function, changed lines, why).
EQUIVALENT: list[dict[str, Any]] = [
    {"function": "x__maximum",
     "lines": ["-    return a if a > b or a != a else b", "+    return a if a >= b or a != a else b"],
     "reason": "on a tie both are the same number (only a signed zero differs, and every caller rounds up to whole replicas)"},
    {"function": "x_replicas_needed",
     "lines": ["-    maximum = np.maximum if isinstance(request_rate, np.ndarray) else _maximum",
               "+    maximum = np.maximum if (isinstance(request_rate, np.ndarray)) or True else _maximum"],
     "reason": "np.maximum on floats gives the same values as _maximum, which exists only to skip a ufunc call per term"},
    {"function": "x_plan",
     "lines": ["-        queue = _queue(jobs, deleted) if queue is None else queue",
               "+        queue = _queue(jobs, deleted) if (queue is None) or True else queue"],
     "reason": "a queue passed in is the simulator's precomputed _queue(jobs, deleted) (tests/unit/test_simulate_shortcuts.py)"},
    {"function": "x_plan", "lines": ["-            if not first and room <= 0:", "+            if first and room <= 0:"],
     "reason": "the break only saves work: with no room left, no later job with replicas passes job.replicas <= room"},
    {"function": "x_plan", "lines": ["-            if not first and room <= 0:", "+            if not first and room < 0:"],
     "reason": "at room == 0 the loop goes on, but no job with replicas passes job.replicas <= room"},
    {"function": "x_failed_nodes",
     "lines": ["-            value = json.loads(value) if value.strip() else None",
               "+            value = json.loads(value) if (value.strip()) or True else None"],
     "reason": "json.loads of a blank string raises ValueError, which returns [] exactly as None does"},
    {"function": "x_return_gpus", "lines": ['-    failures: str = "[]",', '+    failures: str = "XX[]XX",'],
     "reason": "an undecodable default reads as no failures, as [] does"},
    {"function": "xǁGateǁ_apply", "lines": ["-        if value < obs.current:", "+        if value <= obs.current:"],
     "reason": "_apply returned earlier when value == obs.current"},
    {"function": "xǁGateǁ_research_side",
     "lines": ['-    steps += [(f"stop {j.name}", partial(self._park_and_stop, t, wf_ns, j, outcome)) for j in p.stop]',
               '+    steps = [(f"stop {j.name}", partial(self._park_and_stop, t, wf_ns, j, outcome)) for j in p.stop]'],
     "reason": "the list is empty before this first addition"},
    {"function": "xǁGateǁ_service",
     "lines": ["-        if obs.scaler is not None and obs.scaler.min_replicas > policy.min_replicas:",
               "+        if obs.scaler is not None and obs.scaler.min_replicas >= policy.min_replicas:"],
     "reason": "on a tie the policy is replaced by one with the same min_replicas"},
    {"function": "xǁGateǁ_service",
     "lines": ["-        lending_allowed=lending_allowed(policy.schedule, datetime.fromtimestamp(now, timezone.utc)),",
               "+        lending_allowed=lending_allowed(policy.schedule, datetime.fromtimestamp(now, None)),"],
     "reason": "a naive local time names the same instant; lending_allowed converts it to the schedule's zone"},
    {"function": "xǁGateǁ_service",
     "lines": ["-        lending_allowed=lending_allowed(policy.schedule, datetime.fromtimestamp(now, timezone.utc)),",
               "+        lending_allowed=lending_allowed(policy.schedule, datetime.fromtimestamp(now, )),"],
     "reason": "a naive local time names the same instant; lending_allowed converts it to the schedule's zone"},
    {"function": "x_decide", "lines": ["-            if rec[1] > peak:", "+            if rec[1] >= peak:"],
     "reason": "a tie replaces the peak with an equal value"},
    {"function": "x_decide",
     "lines": ["-    new_state = ServiceState(tuple(kept), 0)", "+    new_state = ServiceState(tuple(kept), )"],
     "reason": "0 is ServiceState's default failed_ticks"},
    {"function": "x_plan", "lines": ["-    if target < lent:", "+    if target <= lent:"],
     "reason": "at target == lent the stop loop breaks before stopping anything, and admission is skipped either way"},
    {"function": "x_plan",
     "lines": ["-                ceiling_room -= job.replicas", "+                ceiling_room = job.replicas"],
     "reason": "ceiling_room is read only for the first admission, never after one"},
    {"function": "x_plan",
     "lines": ["-                ceiling_room -= job.replicas", "+                ceiling_room += job.replicas"],
     "reason": "ceiling_room is read only for the first admission, never after one"},
    {"function": "x_lending_allowed",
     "lines": ["-    if schedule.start < schedule.end:", "+    if schedule.start <= schedule.end:"],
     "reason": "start == end is refused by the configuration (use mode continuous)"},
    {"function": "x_lending_allowed",
     "lines": ["-    assert schedule.start is not None and schedule.end is not None",
               "+    assert schedule.start is not None or schedule.end is not None"],
     "reason": "a window schedule always has both (the schema requires them); the assert is for the type checker"},
    {"function": "x__parse_value", "lines": ["-        raise ValueError(text)", "+        raise ValueError(None)"],
     "reason": "the caller catches the ValueError and raises its own error naming the value; this text is never read"},
    {"function": "x__sample",
     "lines": ["-        return name, ordered, _SPECIAL[text_value] if text_value in _SPECIAL else float(text_value)",
               "+        return name, ordered, _SPECIAL[text_value] if (text_value in _SPECIAL) and False else "
               "float(text_value)"],
     "reason": "float() reads NaN, +Inf, Inf and -Inf, the only specials the one-match path lets through, as _SPECIAL does"},
    {"function": "x_pod_of", "lines": ['-    return series.split("/", 1)[0]', '+    return series.split("/", )[0]'],
     "reason": "the first field of a split does not depend on how many splits follow it"},
    {"function": "x_pod_of", "lines": ['-    return series.split("/", 1)[0]', '+    return series.split("/", 2)[0]'],
     "reason": "the first field of a split does not depend on how many splits follow it"},
    {"function": "x_parse",
     "lines": ["-                series = f\"{fast.group(1)}{{{fast.group(2) or ''}}}\"",
               "+                series = f\"{fast.group(1)}{{{fast.group(2) or 'XXXX'}}}\""],
     "reason": "any fixed text works for 'no labels' (`m 1` and `m{} 1` stay one series): a label body never equals it"},
]
PACKAGE_DIRS = ("steps", "workflows", "cronworkflows", "scripts", "schemas")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "launcher", "controlplane", "golden")


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def stage(scopes: list[str]) -> list[str]:
    """Build the staged copy; return the mutant-name patterns to run."""
    shutil.rmtree(STAGE, ignore_errors=True)
    pkg = STAGE / "src" / "offhours"
    pkg.mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "_root" / "__init__.py", pkg / "__init__.py")
    for d in PACKAGE_DIRS:
        shutil.copytree(REPO / d, pkg / d, ignore=IGNORE)
    shutil.copytree(REPO / "tests", STAGE / "tests", ignore=IGNORE)
    # The unit tier's guard (no sockets, no subprocesses) keeps the tier honest in the normal suite; under
    # mutmut, which forks and records calls around each test, it made tests that kill mutants go unrecorded
    # (measured: 2 exposition mutants survived with it, none without).
    (STAGE / "tests" / "unit" / "conftest.py").unlink()
    for d in (*PACKAGE_DIRS, "examples"):  # tests read files by repository path too (configs, examples)
        shutil.copytree(REPO / d, STAGE / d, ignore=IGNORE)
    files = sorted({f"src/offhours/{f}" for s in scopes for f in SCOPES[s][0]})
    patterns = [p for s in scopes for p in SCOPES[s][1]]
    tests = sorted({str(t.relative_to(STAGE)) for s in scopes for g in SCOPES[s][2] for t in STAGE.glob(g)})
    (STAGE / "pyproject.toml").write_text(f"""\
[tool.pytest.ini_options]
testpaths = ["tests"]
markers = ["cluster: needs the local control plane", "prometheus: needs Debian's prometheus binary"]
addopts = "-m 'not cluster and not prometheus' -p no:cacheprovider"

[tool.mutmut]
source_paths = ["src"]
only_mutate = {_toml_list(files)}
pytest_add_cli_args_test_selection = {_toml_list(tests)}
also_copy = {_toml_list([*PACKAGE_DIRS, "examples"])}
use_git_change_detection = false
""")
    return patterns


def _mutmut(*args: str, check: bool = True) -> str:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "OFFHOURS_HYPOTHESIS_PROFILE": "mutation"}
    out = subprocess.run([str(Path(sys.executable).parent / "mutmut"), *args], cwd=STAGE, env=env,
                         capture_output=True, text=True)
    if check and out.returncode != 0:
        sys.exit(f"mutmut {' '.join(args)} failed ({out.returncode}):\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}")
    return out.stdout


# Read in the staged copy by mutmut's own code: every verdict, and the diff of each survivor in scope.
_VERDICTS = """
import json, sys
from fnmatch import fnmatch
from pathlib import Path
from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.stats import status_by_exit_code
patterns, out = sys.argv[1:], {}
for meta in sorted(Path("mutants/src").rglob("*.py.meta")):
    path = str(meta.relative_to("mutants"))[:-len(".meta")]
    for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
        if any(fnmatch(name, p) for p in patterns):
            status = status_by_exit_code[code]
            out[name] = {"status": status}
            if status not in ("killed", "timeout", "not checked"):
                out[name]["diff"] = get_diff_for_mutant(name, path=path)
print(json.dumps(out))
"""


def _changed_lines(diff: str) -> list[str]:
    return [line for line in diff.splitlines() if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))]


def _code(lines: list[str]) -> list[tuple[str, str]]:
    # Compared without indentation: mutmut's diff of a method is dedented by one level.
    return [(x[:1], x[1:].strip()) for x in lines]


def _equivalent(name: str, lines: list[str]) -> str | None:
    function = name.rpartition(".")[2].rpartition("__mutmut_")[0]
    for eq in EQUIVALENT:
        if eq["function"] == function and _code(lines) == _code(eq["lines"]):
            return eq["reason"]
    return None


def collect(scopes: list[str], seconds: float) -> dict[str, Any]:
    """Read mutmut's verdicts for the mutants in scope; list each survivor with its diff (and why, if equivalent)."""
    patterns = [p for s in scopes for p in SCOPES[s][1]]
    out = subprocess.run([sys.executable, "-c", _VERDICTS, *patterns], cwd=STAGE, capture_output=True, text=True,
                         env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    if out.returncode != 0:
        sys.exit(f"reading mutmut's results failed:\n{out.stderr[-4000:]}")
    verdicts = json.loads(out.stdout)
    report: dict[str, Any] = {"tool": "mutmut 3", "seconds": round(seconds), "scopes": {}}
    survivors = []
    for scope in scopes:
        names = sorted(n for n in verdicts if any(fnmatch(n, p) for p in SCOPES[scope][1]))
        counts: dict[str, int] = {}
        for n in names:
            counts[verdicts[n]["status"]] = counts.get(verdicts[n]["status"], 0) + 1
        killed = counts.get("killed", 0) + counts.get("timeout", 0)
        checked = sum(v for k, v in counts.items() if k != "not checked")
        equivalent = 0
        for n in names:
            if "diff" in verdicts[n]:
                lines = _changed_lines(verdicts[n]["diff"])
                reason = _equivalent(n, lines)
                equivalent += reason is not None
                survivors.append({"scope": scope, "mutant": n, "status": verdicts[n]["status"], "diff": lines,
                                  **({"equivalent": reason} if reason else {})})
        report["scopes"][scope] = {
            "mutants": len(names), "checked": checked, "killed": killed, "equivalent": equivalent,
            "score": round(killed / checked, 4) if checked else None,
            "score_without_equivalent": round(killed / (checked - equivalent), 4) if checked > equivalent else None,
            "statuses": counts}
    report["survivors"] = survivors
    return _totals(report)


def _totals(report: dict[str, Any]) -> dict[str, Any]:
    scopes = report["scopes"].values()
    killed, checked = sum(s["killed"] for s in scopes), sum(s["checked"] for s in scopes)
    equivalent = sum(s.get("equivalent", 0) for s in scopes)
    report.update(killed=killed, checked=checked, equivalent=equivalent,
                  score=round(killed / checked, 4) if checked else None,
                  score_without_equivalent=round(killed / (checked - equivalent), 4) if checked > equivalent else None)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scope", action="append", choices=sorted(SCOPES), help="default: every scope")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--report-only", action="store_true", help="re-read the last run in build/mutation")
    args = parser.parse_args()
    scopes = args.scope or list(SCOPES)
    if args.report_only:
        report = collect(scopes, 0)
    else:
        patterns = stage(scopes)
        start = time.monotonic()
        print(f"mutmut on {', '.join(scopes)} in {STAGE.relative_to(REPO)}", flush=True)
        _mutmut("run", "--max-children", str(args.max_children), *patterns)
        report = collect(scopes, time.monotonic() - start)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    if args.scope and previous.get("scopes"):  # a partial run keeps the other scopes' last results
        report["scopes"] = {**{k: v for k, v in previous["scopes"].items() if k not in scopes}, **report["scopes"]}
        report["survivors"] = [s for s in previous.get("survivors", []) if s["scope"] not in scopes] + report["survivors"]
        report = _totals(report)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    for scope, s in report["scopes"].items():
        print(f"  {scope:10} {s['killed']}/{s['checked']} killed ({s['score']:.1%})" if s["checked"] else f"  {scope}: none")
    print(f"score {report['score']:.1%}; {len(report['survivors'])} survivors -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
