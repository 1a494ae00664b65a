"""Benchmark: render and validate the whole library; validate Argo's examples.

Goals (issue "template library"): the library rendered and validated in under 3 s from a cold
process, and validation no slower than 20 ms per manifest once the schemas are loaded.
Writes bench/results/templates.json.
"""

import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "tests" / "data" / "argo-examples"
RESULTS = REPO / "bench" / "results" / "templates.json"

COLD = """
import time, tempfile
t0 = time.perf_counter()
from offhours.workflows.render import write
from offhours.scripts.validate import validate_paths
with tempfile.TemporaryDirectory() as out:
    from pathlib import Path
    write(Path(out))
    problems = validate_paths([out])
assert not problems, problems
print(time.perf_counter() - t0)
"""

BASELINE = "import time; t0 = time.perf_counter(); import hera.workflows, jsonschema, yaml; print(time.perf_counter() - t0)"


def _subprocess_seconds(code: str, runs: int = 5) -> list[float]:
    return [float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
            for _ in range(runs)]


def main() -> None:
    """Run the benchmark and write its results."""
    from offhours.scripts.validate import load_documents, validate_documents
    from offhours.scripts.validate.crd import SCHEMA_FILES, validator
    from offhours.workflows.render import manifests

    cold = _subprocess_seconds(COLD)
    baseline = _subprocess_seconds(BASELINE)

    t0 = time.perf_counter()
    for kind in SCHEMA_FILES:
        validator(kind)
    schema_load = time.perf_counter() - t0

    library = [(name, 0, doc) for name, doc in manifests().items()]
    examples, _ = load_documents([EXAMPLES])
    per_manifest = {}
    for label, docs in (("library", library), ("argo-examples", examples)):
        runs = []
        for _ in range(20):
            t0 = time.perf_counter()
            problems = validate_documents(docs, include_library=False) if label == "library" else validate_documents(docs)
            runs.append((time.perf_counter() - t0) / len(docs))
            assert not problems, problems
        per_manifest[label] = {"documents": len(docs), "median_ms": 1000 * statistics.median(runs),
                               "max_ms": 1000 * max(runs)}

    result = {
        "machine": f"{platform.machine()} {platform.python_implementation()} {platform.python_version()}",
        "cold_render_and_validate_s": {"median": statistics.median(cold), "max": max(cold), "runs": len(cold)},
        "baseline_import_hera_jsonschema_yaml_s": {"median": statistics.median(baseline)},
        "schema_load_s": schema_load,
        "validate_per_manifest": per_manifest,
        "goals": {"cold_render_and_validate_s": 3.0, "validate_per_manifest_ms": 20.0},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
