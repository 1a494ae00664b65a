"""bench/gpu/gpu_check.py on a machine without a GPU: one clear line, a JSON saying "no GPU", exit 0.

And the one figure it measures that needs no GPU, the reference job's stop on SIGTERM, run here for real:
the harness must start the job, see it train, signal it and read its exit (75, checkpointed).
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "gpu" / "gpu_check.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_a_gpu_it_says_so_in_one_line_and_a_json_and_exits_0(tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # where PyTorch is installed, it then sees no GPU either
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "offhours-gpu-check/1" and doc["gpu"] is False
    assert doc["reason"].startswith("no GPU: ")
    assert "modelLoad" not in doc and "pinnedTransfer" not in doc  # nothing pretends to be measured
    assert done.stderr.strip().splitlines() == [f"gpu_check: {doc['reason']}; nothing measured (the JSON says so)"]
    assert done.stdout == ""


def test_a_size_that_is_not_positive_is_one_error_naming_it(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--model-gib", "0", "--out", str(tmp_path / "x.json")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--model-gib must be above 0" in done.stderr
    assert not (tmp_path / "x.json").exists()


def test_the_reference_job_stop_is_measured_from_sigterm_to_its_checkpointed_exit(tmp_path: Path) -> None:
    result = _module().reference_job_stop(tmp_path, 0, warmup_seconds=0.2)
    assert result["exitCode"] == 75 and result["checkpointed"] is True
    assert result["checkpointBytes"] > 0 and result["seconds"] >= 0
