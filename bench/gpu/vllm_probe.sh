#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: measure a real vLLM's start and check the metrics the gate reads.
#
# Installs vLLM from PyPI into a fresh virtual environment, builds a tiny Llama-shaped model with
# random weights and a small tokenizer locally (nothing is downloaded from a model hub), starts
# `vllm serve` on it twice (cold: empty compilation caches; warm: the caches of the first start),
# sends a minute of load, saves the /metrics page, reads it with the gate's own parser, and times
# sleep/wake where the installed vLLM supports sleep mode. Everything lands in $OUT (default
# bench/results/gpu): metrics.txt, vllm_probe.json, the server logs.
#
# Usage: bench/gpu/vllm_probe.sh            (VLLM_VERSION=0.12.0 PORT=8000 OUT=... to change)
# It needs network access to PyPI for the install, a GPU with >= 8 GiB free, and about 10 minutes.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${OUT:-$REPO/bench/results/gpu}"
VLLM_VERSION="${VLLM_VERSION:-0.12.0}"
PORT="${PORT:-8000}"
WORK="$(mktemp -d)"
mkdir -p "$OUT"
trap 'kill "${SERVER:-0}" 2>/dev/null || true; rm -rf "$WORK"' EXIT

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m venv "$WORK/venv"
. "$WORK/venv/bin/activate"
pip install -q "vllm==$VLLM_VERSION"
pip install -q --no-deps -e "$REPO"  # the gate's parser, to read the page as the gate does
python -c 'import vllm; print(vllm.__version__)' | tee "$OUT/vllm_version.txt"

# A tiny model with random weights: 2 layers, hidden 256, a 1,000-token word-level vocabulary.
python - "$WORK/model" <<'PY'
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

path = sys.argv[1]
words = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(997)]
tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
fast.save_pretrained(path)
config = LlamaConfig(vocab_size=len(words), hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=1024,
                     bos_token_id=1, eos_token_id=2, torch_dtype="bfloat16")
LlamaForCausalLM(config).save_pretrained(path, safe_serialization=True)
PY

export VLLM_CACHE_ROOT="$WORK/vllm-cache"  # empty for the cold start, reused by the warm one
SLEEP_FLAG=""
if vllm serve --help=all 2>/dev/null | grep -q -- "--enable-sleep-mode"; then SLEEP_FLAG="--enable-sleep-mode"; fi

start_server() {  # $1: log name; prints the seconds from process start to /health answering 200
  local t0 now
  t0=$(date +%s.%N)
  VLLM_SERVER_DEV_MODE=1 vllm serve "$WORK/model" --served-model-name tiny --port "$PORT" --max-model-len 512 \
    --gpu-memory-utilization 0.2 $SLEEP_FLAG >"$OUT/server-$1.log" 2>&1 &
  SERVER=$!
  until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; do
    kill -0 "$SERVER" 2>/dev/null || { echo "vllm serve exited: see $OUT/server-$1.log" >&2; exit 1; }
    sleep 0.2
  done
  now=$(date +%s.%N)
  python -c "print(round($now - $t0, 2))"
}

stop_server() { kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; SERVER=; }

COLD=$(start_server cold)
stop_server
WARM=$(start_server warm)

# A minute of load: 8 clients, short prompts, 64 tokens each.
python - "$PORT" <<'PY'
import concurrent.futures, json, sys, time, urllib.request
port = sys.argv[1]
def one(i):
    body = json.dumps({"model": "tiny", "prompt": " ".join(f"w{(i * 7 + k) % 997}" for k in range(32)),
                       "max_tokens": 64, "ignore_eos": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body, {"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=60).status
end, n = time.time() + 60, 0
with concurrent.futures.ThreadPoolExecutor(8) as pool:
    while time.time() < end:
        n += sum(1 for s in pool.map(one, range(n, n + 32)) if s == 200)
print(f"{n} requests served", file=sys.stderr)
PY
curl -sf "http://127.0.0.1:$PORT/metrics" >"$OUT/metrics.txt"

SLEEP=null WAKE=null
if [ -n "$SLEEP_FLAG" ]; then
  t0=$(date +%s.%N); curl -sf -X POST "http://127.0.0.1:$PORT/sleep?level=1" >/dev/null; t1=$(date +%s.%N)
  curl -sf -X POST "http://127.0.0.1:$PORT/wake_up" >/dev/null; t2=$(date +%s.%N)
  SLEEP=$(python -c "print(round($t1 - $t0, 2))"); WAKE=$(python -c "print(round($t2 - $t1, 2))")
fi
stop_server

# Every series the gate reads, with the names and labels its parser expects.
python - "$OUT" "$COLD" "$WARM" "$SLEEP" "$WAKE" <<'PY'
import json, sys
from pathlib import Path
from offhours.scripts.metrics.vllm import read_pod_text

out, cold, warm, sleep, wake = sys.argv[1:]
text = Path(out, "metrics.txt").read_text()
pod = read_pod_text(text)  # raises, naming what is missing, if a series the gate needs is not there
wanted = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
          "vllm:request_success_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total"]
present = {name: any(line.startswith(name + "{") for line in text.splitlines()) for name in wanted}
labels = all('model_name="tiny"' in line and "engine=" in line for line in text.splitlines()
             if line.startswith(tuple(wanted)))
result = {"vllm_version": Path(out, "vllm_version.txt").read_text().strip(),
          "gpu": Path(out, "gpu.txt").read_text().strip(),
          "start_to_ready_cold_s": float(cold), "start_to_ready_warm_s": float(warm),
          "sleep_s": None if sleep == "null" else float(sleep), "wake_s": None if wake == "null" else float(wake),
          "series_present": present, "labels_model_name_and_engine": labels, "parsed": repr(pod)}
Path(out, "vllm_probe.json").write_text(json.dumps(result, indent=2) + "\n")
print(json.dumps(result, indent=2))
assert all(present.values()) and labels, "a series the gate reads is missing or labelled otherwise"
PY
