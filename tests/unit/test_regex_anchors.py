"""Every whole-string pattern ends with \\Z, never $: `$` also matches before a final newline, so `.match` of a
tenant's 'value\\n' would pass a check of 'value' (a run id, a bucket, an image digest, a quantity)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOLLAR_ANCHORED = re.compile(r're\.compile\(r"\^[^"]*\$"')


def test_no_pattern_is_anchored_with_a_dollar() -> None:
    found = [f"{p.relative_to(ROOT)}:{n}" for d in ("scripts", "cronworkflows") for p in sorted((ROOT / d).rglob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if DOLLAR_ANCHORED.search(line)]
    assert found == []


def test_a_value_with_a_final_newline_is_refused_by_the_parameter_check() -> None:
    from offhours.scripts.runtime.parameters import value_problem

    for kind, good in (("run-id", "train-1"), ("service", "chat"), ("quantity", "64Gi")):
        assert value_problem(kind, good) is None, kind
        assert value_problem(kind, good + "\n") is not None, kind
