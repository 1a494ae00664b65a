#!/usr/bin/env python3
"""The parts of the return path a GPU decides, measured on the machine at hand; one JSON document out.

What a reclaim waits for, past the gate's own check: the victim job's exit (its checkpoint on SIGTERM),
then a vLLM replica's start (a CUDA context, the weights read from disk to the GPU, the engine's own
set-up) or, for a replica put to sleep at level 1, its wake (the weights copied back from pinned host
memory). This script measures, with PyTorch and safetensors (CuPy is not needed), nothing downloaded:

- context: the GPU memory a second process's CUDA context keeps (device-wide free memory before and after
  it starts), and how long it takes to create;
- modelLoad: random weights of `--model-gib` written by the script to local disk in safetensors shards,
  loaded to the GPU cold (page cache dropped: as root by writing 3 to /proc/sys/vm/drop_caches, else by
  posix_fadvise(DONTNEED) on the shards, and the JSON says which) and warm (a second load);
- pinnedTransfer: `--transfer-gib` moved GPU -> pinned host (what vLLM's level-1 sleep does) and back
  (its wake), in 256 MiB tensors, and the time to allocate the pinned buffer;
- contendedWake: the same wake while a second process holds GPU memory: once leaving too little room (what
  happens: the error and how far it got), once leaving just enough (its time);
- referenceJob: examples/reference-job/train.py (the project's reference job) stopped by SIGTERM while it
  trains, from the signal to its exit (it checkpoints, then exits 75), three times;
- gpuStateCheckpoint: a job's `--job-state-gib` of GPU tensors checkpointed on SIGTERM: copied to host,
  written with safetensors, fsynced;
- vllm: only where `vllm` is importable (never installed by this script): `vllm serve --load-format dummy`
  of a generated Llama config of about `--model-gib`, its cold start to /health answering, sleep (level 1)
  and wake through the dev-mode endpoints.

Each section has a time bound; the whole run stays within `--budget-seconds` (480 by default), skipping a
section (and saying so) when too little time is left. Without a GPU (no PyTorch, or PyTorch sees none) it
writes {"gpu": false, "reason": "no GPU: ..."}, says so on stderr and exits 0. `offhours calibrate
--gpu-check FILE` turns the document into the fleet file's start, wake and grace times.

    python3 bench/gpu/gpu_check.py --out gpu_check.json
"""

import argparse
import importlib.util
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

GIB = 1 << 30
CHUNK = 256 << 20  # bytes per tensor: about a large layer's weights
SCHEMA = "offhours-gpu-check/1"
REPO = Path(__file__).resolve().parent.parent.parent
REFERENCE_JOB = REPO / "examples" / "reference-job" / "train.py"
PREEMPTED_EXIT_CODE = 75


def log(message: str) -> None:
    """Progress on stderr: stdout (or --out) holds the JSON alone."""
    print(f"gpu_check: {message}", file=sys.stderr, flush=True)


class Budget:
    """Seconds left of the whole run's bound."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left."""
        return self.end - time.monotonic()


def no_gpu_reason() -> str | None:
    """Return why this machine has no usable GPU, or None when PyTorch sees one."""
    if importlib.util.find_spec("torch") is None:
        return "PyTorch is not installed"
    import torch

    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA device (torch.cuda.is_available() is False)"
    return None


def environment() -> dict[str, Any]:
    """What the figures were measured on."""
    env: dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform(),
                           "cpus": os.cpu_count(), "root": hasattr(os, "geteuid") and os.geteuid() == 0}
    for name in ("torch", "safetensors", "cupy", "vllm", "transformers"):
        env[f"{name}Present"] = importlib.util.find_spec(name) is not None
    return env


def gpu_environment() -> dict[str, Any]:
    """The GPU's name, memory and the CUDA build."""
    import torch

    props = torch.cuda.get_device_properties(0)
    free, total = torch.cuda.mem_get_info()
    out = {"name": props.name, "totalGiB": round(total / GIB, 2), "freeGiBAtStart": round(free / GIB, 2),
           "torch": torch.__version__, "cudaRuntime": torch.version.cuda}
    if shutil.which("nvidia-smi"):
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)
        out["driver"] = done.stdout.strip() or None
    return out


def sync() -> None:
    """Wait for the GPU's queued work: a timing ends when the copy has landed."""
    import torch

    torch.cuda.synchronize()


def _holder_code(hold_bytes: int) -> str:
    """A second process that creates a CUDA context, holds `hold_bytes` of GPU memory and says 'ready'."""
    return ("import sys, time, json\n"
            "t0 = time.monotonic()\n"
            "import torch\n"
            "t1 = time.monotonic()\n"
            "x = torch.empty(1, device='cuda')\n"
            "torch.cuda.synchronize()\n"
            "t2 = time.monotonic()\n"
            f"held = torch.empty({int(hold_bytes)}, dtype=torch.uint8, device='cuda') if {int(hold_bytes)} else None\n"
            "torch.cuda.synchronize()\n"
            "print(json.dumps({'importSeconds': t1 - t0, 'contextSeconds': t2 - t1}), flush=True)\n"
            "sys.stdin.read()\n")


class Holder:
    """A second process holding GPU memory until closed."""

    def __init__(self, hold_bytes: int, timeout: float = 120.0) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _holder_code(hold_bytes)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # the child prints once its memory is held
        if not line:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"the second process failed to hold {hold_bytes / GIB:.1f} GiB: {err.strip()[-400:]}")
        self.times = json.loads(line)

    def close(self) -> None:
        """Let the process go and wait for it."""
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def measure_context(args: argparse.Namespace) -> dict[str, Any]:
    """The GPU memory a second process's CUDA context keeps, and its creation time."""
    import torch

    torch.cuda.empty_cache()
    free_before, _ = torch.cuda.mem_get_info()
    holder = Holder(0)
    try:
        free_after, _ = torch.cuda.mem_get_info()
    finally:
        holder.close()
    return {"contextGiB": round((free_before - free_after) / GIB, 3),
            "contextCreateSeconds": round(holder.times["contextSeconds"], 3),
            "torchImportSeconds": round(holder.times["importSeconds"], 3),
            "includes": "device-wide free memory before and after a fresh process imports PyTorch and allocates one "
                        "tensor: its CUDA context plus the first block of PyTorch's caching allocator (2 MiB)"}


def write_random_weights(directory: Path, gib: float) -> list[Path]:
    """Write `gib` GiB of random bf16 weights in safetensors shards of up to 2 GiB (made on the GPU); fsynced."""
    import torch
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    total, shards, index = int(gib * GIB), [], 0
    per_shard = 2 * GIB
    while total > 0:
        size = min(per_shard, total)
        tensors = {}
        for k in range(max(1, size // CHUNK)):
            n = min(CHUNK, size - k * CHUNK) // 2
            tensors[f"layer{index}.w{k}"] = torch.randn(n, dtype=torch.bfloat16, device="cuda").cpu()
        path = directory / f"model-{index:05d}.safetensors"
        save_file(tensors, str(path))
        with open(path, "rb") as f:
            os.fsync(f.fileno())
        shards.append(path)
        total -= size
        index += 1
        del tensors
    return shards


def drop_page_cache(files: list[Path]) -> str:
    """Evict the files from the page cache; return how (or why it could not)."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return "wrote 3 to /proc/sys/vm/drop_caches (root)"
    except OSError as err:
        reason = f"could not write /proc/sys/vm/drop_caches ({err.strerror}"
        reason += "; not root)" if not (hasattr(os, "geteuid") and os.geteuid() == 0) else ")"
    if not hasattr(os, "posix_fadvise"):
        return f"{reason}; posix_fadvise unavailable: the cold load may be warm"
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return f"{reason}; used posix_fadvise(DONTNEED) on the weight files instead (evicts their clean pages)"


def load_to_gpu(files: list[Path]) -> float:
    """Seconds to load every shard to the GPU with safetensors, until the copies have landed."""
    import torch
    from safetensors.torch import load_file

    t0 = time.monotonic()
    loaded = [load_file(str(f), device="cuda:0") for f in files]
    sync()
    seconds = time.monotonic() - t0
    del loaded
    torch.cuda.empty_cache()
    return seconds


def measure_model_load(args: argparse.Namespace) -> dict[str, Any]:
    """Random weights to local disk, then loaded to the GPU cold and warm."""
    directory = Path(args.work) / "weights"
    t0 = time.monotonic()
    files = write_random_weights(directory, args.model_gib)
    write_s = time.monotonic() - t0
    size = sum(f.stat().st_size for f in files)
    how = drop_page_cache(files)
    cold = load_to_gpu(files)
    warm = load_to_gpu(files)
    shutil.rmtree(directory, ignore_errors=True)
    return {"modelGiB": round(size / GIB, 3), "shards": len(files), "writeSeconds": round(write_s, 2),
            "pageCacheDrop": how, "coldSeconds": round(cold, 3), "warmSeconds": round(warm, 3),
            "coldGiBPerSecond": round(size / GIB / cold, 3), "warmGiBPerSecond": round(size / GIB / warm, 3),
            "disk": str(Path(args.work)),
            "includes": "safetensors.torch.load_file(device='cuda:0') of every shard, from the call to the last "
                        "copy landed on the GPU: the file read (cold: from disk; warm: from the page cache) and "
                        "the host-to-GPU copy; not a vLLM engine's own start (see the vllm section)"}


def _pinned_and_gpu(gib: float) -> tuple[list[Any], list[Any], float]:
    import torch

    count = max(1, int(gib * GIB) // CHUNK)
    t0 = time.monotonic()
    host = [torch.empty(CHUNK, dtype=torch.uint8, pin_memory=True) for _ in range(count)]
    pin_s = time.monotonic() - t0
    gpu = [torch.randint(0, 255, (CHUNK,), dtype=torch.uint8, device="cuda") for _ in range(count)]
    sync()
    return host, gpu, pin_s


def _copy(dst: list[Any], src: list[Any]) -> float:
    t0 = time.monotonic()
    for d, s in zip(dst, src):
        d.copy_(s, non_blocking=True)
    sync()
    return time.monotonic() - t0


def measure_pinned_transfer(args: argparse.Namespace) -> dict[str, Any]:
    """GPU -> pinned host (sleep) and back (wake), `--transfer-gib` in 256 MiB tensors."""
    import torch

    host, gpu, pin_s = _pinned_and_gpu(args.transfer_gib)
    size = len(host) * CHUNK
    sleep_s = _copy(host, gpu)
    del gpu
    torch.cuda.empty_cache()
    t0 = time.monotonic()
    gpu = [torch.empty(CHUNK, dtype=torch.uint8, device="cuda") for _ in host]
    alloc_s = time.monotonic() - t0
    wake_s = _copy(gpu, host)
    del gpu, host
    torch.cuda.empty_cache()
    return {"gib": round(size / GIB, 3), "pinnedAllocSeconds": round(pin_s, 3),
            "sleepSeconds": round(sleep_s, 3), "sleepGiBPerSecond": round(size / GIB / sleep_s, 2),
            "wakeSeconds": round(wake_s + alloc_s, 3), "wakeCopySeconds": round(wake_s, 3),
            "wakeGiBPerSecond": round(size / GIB / wake_s, 2),
            "includes": "sleep: GPU-to-pinned-host copies of every tensor until landed; wake: allocating the GPU "
                        "tensors again and the pinned-host-to-GPU copies until landed; the pinned buffer's "
                        "allocation is apart (vLLM makes it at sleep). Not the engine's own bookkeeping"}


def measure_contended_wake(args: argparse.Namespace) -> dict[str, Any]:
    """A wake while a second process holds GPU memory: too little room left, then just enough."""
    import torch

    host, gpu, _ = _pinned_and_gpu(args.transfer_gib)
    size = len(host) * CHUNK
    _copy(host, gpu)
    del gpu
    torch.cuda.empty_cache()
    out: dict[str, Any] = {"gib": round(size / GIB, 3)}
    for case, room in (("tooLittleRoom", size // 2), ("justEnoughRoom", size + GIB)):
        free, _ = torch.cuda.mem_get_info()
        hold = max(0, free - room)
        holder = Holder(hold)
        landed, t0 = 0, time.monotonic()
        result: dict[str, Any] = {"secondProcessHeldGiB": round(hold / GIB, 2),
                                  "freeBeforeWakeGiB": round(torch.cuda.mem_get_info()[0] / GIB, 2)}
        gpu = []
        try:
            for h in host:
                g = torch.empty(CHUNK, dtype=torch.uint8, device="cuda")
                g.copy_(h, non_blocking=True)
                gpu.append(g)
                landed += CHUNK
            sync()
            result.update(outcome="woke", seconds=round(time.monotonic() - t0, 3))
        except torch.cuda.OutOfMemoryError as err:
            result.update(outcome="out of memory", secondsToError=round(time.monotonic() - t0, 3),
                          copiedGiBBeforeError=round(landed / GIB, 2), error=str(err).splitlines()[0][:300])
        finally:
            del gpu
            torch.cuda.empty_cache()
            holder.close()
        out[case] = result
    del host
    out["includes"] = ("the wake of pinnedTransfer while a second process (its own CUDA context) holds all but "
                       "half the weights' size, then all but the weights' size plus 1 GiB; the second process "
                       "keeps its memory throughout: nothing waits for or evicts it")
    return out


def _importable_offhours(work: Path) -> dict[str, str]:
    """An environment in which `offhours` imports from this repository copy, installed or not."""
    env = dict(os.environ)
    if importlib.util.find_spec("offhours") is None:
        link_dir = work / "pkg"
        link_dir.mkdir(parents=True, exist_ok=True)
        link = link_dir / "offhours"
        if not link.exists():
            link.symlink_to(REPO, target_is_directory=True)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(link_dir), env.get("PYTHONPATH", "")) if p)
    return env


def reference_job_stop(work: Path, run: int, warmup_seconds: float = 1.0, timeout: float = 60.0) -> dict[str, Any]:
    """Start the reference job, let it train, SIGTERM it; seconds from the signal to its exit, and its exit code."""
    ckpt = work / f"ckpt-{run}"
    env = _importable_offhours(work)
    env.update(OFFHOURS_CHECKPOINT_URI=ckpt.as_uri(), OFFHOURS_RUN_ID=f"gpu-check-{run}", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, str(REFERENCE_JOB), "--steps", str(10**9), "--every", str(10**6),
                             "--step-seconds", "0.001"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:  # train.py prints "start at step" once it is training
        lines.append(line.strip())
        if line.startswith("start at step"):
            break
    else:
        proc.wait()
        raise RuntimeError(f"the reference job exited {proc.returncode} before training: {' | '.join(lines)[-400:]}")
    time.sleep(warmup_seconds)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return {"exitCode": None, "seconds": None, "note": f"no exit within {timeout:g} s of SIGTERM: killed"}
    seconds = time.monotonic() - t0
    rest = proc.stdout.read()
    return {"exitCode": proc.returncode, "seconds": round(seconds, 3),
            "checkpointed": "SIGTERM: checkpointed" in rest, "checkpointBytes": sum(
                p.stat().st_size for p in ckpt.rglob("*") if p.is_file()) if ckpt.exists() else 0}


def measure_reference_job(args: argparse.Namespace) -> dict[str, Any]:
    """The reference job's checkpoint-on-SIGTERM time, three times."""
    runs = [reference_job_stop(Path(args.work), i) for i in range(3)]
    times = [r["seconds"] for r in runs if r["seconds"] is not None]
    return {"runs": runs, "medianSeconds": round(statistics.median(times), 3) if times else None,
            "maxSeconds": max(times) if times else None,
            "allExited75": all(r["exitCode"] == PREEMPTED_EXIT_CODE for r in runs),
            "includes": "examples/reference-job/train.py on a local file checkpoint store: from SIGTERM sent "
                        "to the process gone (it finishes its step, writes its checkpoint, exits 75); its state "
                        "is small and on the CPU: see gpuStateCheckpoint for a job holding GPU state"}


def measure_gpu_state_checkpoint(args: argparse.Namespace) -> dict[str, Any]:
    """A job's GPU state checkpointed as on SIGTERM: to host, safetensors to local disk, fsync."""
    import torch
    from safetensors.torch import save_file

    count = max(1, int(args.job_state_gib * GIB) // CHUNK)
    state = {f"p{i}": torch.randn(CHUNK // 2, dtype=torch.bfloat16, device="cuda") for i in range(count)}
    sync()
    path = Path(args.work) / "job-state.safetensors"
    t0 = time.monotonic()
    host = {k: v.cpu() for k, v in state.items()}
    to_host = time.monotonic() - t0
    save_file(host, str(path))
    with open(path, "rb") as f:
        os.fsync(f.fileno())
    seconds = time.monotonic() - t0
    size = path.stat().st_size
    path.unlink()
    del state, host
    torch.cuda.empty_cache()
    return {"gib": round(size / GIB, 3), "seconds": round(seconds, 3), "toHostSeconds": round(to_host, 3),
            "includes": "GPU tensors copied to (pageable) host memory, written with safetensors to local disk and "
                        "fsynced; no upload to an object store (add its time at the store's bandwidth)"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _llama_config(directory: Path, gib: float) -> None:
    """A Llama config of about `gib` GiB of bf16 weights and a word-level tokenizer (all local)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    hidden, inter, vocab = 4096, 11008, 32000
    per_layer = 4 * hidden * hidden + 3 * hidden * inter
    layers = max(1, int((gib * GIB / 2 - 2 * vocab * hidden) // per_layer))
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
              "intermediate_size": inter, "num_hidden_layers": layers, "num_attention_heads": 32,
              "num_key_value_heads": 32, "vocab_size": vocab, "max_position_embeddings": 2048,
              "rms_norm_eps": 1e-5, "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2,
              "hidden_act": "silu", "tie_word_embeddings": False}
    (directory / "config.json").write_text(json.dumps(config))
    words = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(vocab - 3)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                            eos_token="</s>").save_pretrained(str(directory))


def _http(url: str, method: str = "GET", timeout: float = 120.0) -> int:
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return int(response.status)


def measure_vllm(args: argparse.Namespace, budget: Budget) -> dict[str, Any]:
    """A real `vllm serve --load-format dummy`: cold start to /health, level-1 sleep and wake."""
    if importlib.util.find_spec("vllm") is None:
        return {"skipped": "vllm is not importable here (this script never installs it)"}
    model = Path(args.work) / "vllm-model"
    _llama_config(model, args.model_gib)
    port = _free_port()
    env = dict(os.environ, VLLM_SERVER_DEV_MODE="1", VLLM_CACHE_ROOT=str(Path(args.work) / "vllm-cache"))
    logfile = open(Path(args.work) / "vllm.log", "w")
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", str(model), "--load-format",
                             "dummy", "--port", str(port), "--max-model-len", "1024", "--enable-sleep-mode",
                             "--gpu-memory-utilization", "0.5"], env=env, stdout=logfile, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    out: dict[str, Any] = {"modelGiB": args.model_gib}
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited {proc.returncode} before serving")
            if budget.left() < 30:
                raise RuntimeError("no /health within the time bound")
            try:
                if _http(base + "/health", timeout=2) == 200:
                    break
            except OSError:
                time.sleep(0.2)
        out["coldStartSeconds"] = round(time.monotonic() - t0, 2)
        t1 = time.monotonic()
        _http(base + "/sleep?level=1", "POST")
        out["sleepSeconds"] = round(time.monotonic() - t1, 3)
        t1 = time.monotonic()
        _http(base + "/wake_up", "POST")
        out["wakeSeconds"] = round(time.monotonic() - t1, 3)
        out["healthAfterWake"] = _http(base + "/health")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        logfile.close()
    out["includes"] = ("coldStart: from the process started to /health answering 200 (dummy weights: no read from "
                       "disk; add modelLoad.coldSeconds scaled to the model for a real one); sleep and wake: the "
                       "dev-mode endpoints' answers (level 1: weights to pinned host and back)")
    return out


SECTIONS: tuple[tuple[str, float, Callable[..., dict[str, Any]]], ...] = (
    ("context", 30.0, measure_context),
    ("modelLoad", 90.0, measure_model_load),
    ("pinnedTransfer", 45.0, measure_pinned_transfer),
    ("contendedWake", 60.0, measure_contended_wake),
    ("referenceJob", 30.0, measure_reference_job),
    ("gpuStateCheckpoint", 30.0, measure_gpu_state_checkpoint),
    ("vllm", 120.0, measure_vllm),
)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Measure every section that fits in the budget; one document."""
    started = time.monotonic()
    doc: dict[str, Any] = {"schema": SCHEMA, "measuredAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "environment": environment()}
    why = no_gpu_reason()
    if why is not None:
        doc.update(gpu=False, reason=f"no GPU: {why}")
        return doc
    doc["gpu"] = gpu_environment()
    doc["settings"] = {"modelGiB": args.model_gib, "transferGiB": args.transfer_gib, "jobStateGiB": args.job_state_gib,
                       "budgetSeconds": args.budget_seconds}
    budget = Budget(args.budget_seconds)
    for name, needs, measure in SECTIONS:
        if budget.left() < needs:
            doc[name] = {"skipped": f"{budget.left():.0f} s left of the bound, {needs:g} s needed"}
            log(f"{name}: skipped (time)")
            continue
        log(f"{name} ...")
        t0 = time.monotonic()
        try:
            doc[name] = measure(args, budget) if name == "vllm" else measure(args)
        except Exception as err:  # one section's failure is a figure too; the others still run
            doc[name] = {"error": f"{type(err).__name__}: {str(err)[:400]}"}
        doc[name]["sectionSeconds"] = round(time.monotonic() - t0, 2)
    doc["elapsedSeconds"] = round(time.monotonic() - started, 1)
    return doc


def main(argv: list[str] | None = None) -> int:
    """Parse the options, measure, write the document."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the JSON here (default: stdout)")
    parser.add_argument("--model-gib", type=float, default=4.0, help="size of the random model (default 4)")
    parser.add_argument("--transfer-gib", type=float, default=8.0, help="GiB moved by sleep and wake (default 8)")
    parser.add_argument("--job-state-gib", type=float, default=2.0, help="a GPU job's state to checkpoint (default 2)")
    parser.add_argument("--budget-seconds", type=float, default=480.0, help="bound on the whole run (default 480)")
    parser.add_argument("--work", help="local scratch directory (default: a new temporary one, removed after)")
    args = parser.parse_args(argv)
    for name in ("model_gib", "transfer_gib", "job_state_gib", "budget_seconds"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name.replace('_', '-')} must be above 0, got {getattr(args, name)}")
    scratch = None
    if args.work is None:
        scratch = args.work = tempfile.mkdtemp(prefix="gpu-check-")
    try:
        doc = run(args)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    text = json.dumps(doc, indent=1) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    if doc["gpu"] is False:
        log(f"{doc['reason']}; nothing measured (the JSON says so)")
    else:
        log(f"done in {doc['elapsedSeconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
