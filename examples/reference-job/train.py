"""offhours reference job: a small, deterministic training loop that follows the preemptible contract.

It fits a linear model to synthetic data with minibatch SGD in NumPy on CPU. Every step's batch
comes from the seed and the step number alone, so a run stopped and resumed any number of times
ends bit-identical to an uninterrupted one. It checkpoints every --every steps and on SIGTERM,
then exits 75 (preempted, resumable); on start it resumes from the newest complete checkpoint.

    OFFHOURS_CHECKPOINT_URI=file:///tmp/ckpt python train.py --steps 2000 --every 100

Stoppable from its first instruction: SIGTERM is blocked before anything else is imported and
taken by the handler once it is installed, so a stop during start-up is a preemption (exit 75)
too. It prints `ready` once the handler is in place, `started` as the very first thing.
"""

import signal

signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # held until the handler is installed
print("started", flush=True)

import argparse  # noqa: E402 - after the signal is held
import io  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from offhours.scripts.runtime.checkpoint import (  # noqa: E402
    PREEMPTED_EXIT_CODE,
    CheckpointError,
    CheckpointStore,
    PreemptionSignal,
)

DIM = 64


def batch(seed: int, step: int, size: int = 32) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, step])
    truth = np.random.default_rng([seed, 0xC0FFEE]).normal(size=DIM)
    x = rng.normal(size=(size, DIM))
    return x, x @ truth + 0.01 * rng.normal(size=size)


def dump(step: int, weights: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, step=np.int64(step), weights=weights)
    return buf.getvalue()


def load(data: bytes) -> tuple[int, np.ndarray]:
    with np.load(io.BytesIO(data)) as z:
        return int(z["step"]), z["weights"].copy()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--every", type=int, default=100, help="checkpoint interval in steps")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--step-seconds", type=float, default=0.0, help="sleep per step (to emulate real work)")
    parser.add_argument("--log", help="append each executed step number here (to measure redone work)")
    parser.add_argument("--out", help="write the final weights here (.npy)")
    args = parser.parse_args(argv)

    stop = PreemptionSignal.install()  # a SIGTERM held since the first line lands here
    print("ready", flush=True)
    try:
        return train(args, stop)
    except CheckpointError as err:
        # A storage outage past the store's retries is no fault of the job: 75 has the step retried
        # from its last checkpoint. Anything else (a bad URI, no rights) would only fail again.
        print(f"checkpoint store: {err}", flush=True)
        return PREEMPTED_EXIT_CODE if err.retryable else 1


def train(args: argparse.Namespace, stop: PreemptionSignal) -> int:
    """Resume from the newest complete checkpoint and train to the end, or until SIGTERM."""
    store = CheckpointStore.from_env()
    latest = store.latest()
    step, weights = load(latest.data) if latest else (0, np.zeros(DIM))
    log = open(args.log, "a") if args.log else None
    print(f"start at step {step} of {args.steps}", flush=True)
    while step < args.steps:
        x, y = batch(args.seed, step)
        weights = weights - args.lr * (2.0 / len(y)) * x.T @ (x @ weights - y)
        if log:
            log.write(f"{step}\n")
            log.flush()
        if args.step_seconds:
            time.sleep(args.step_seconds)
        step += 1
        if step % args.every == 0 or stop.requested:
            store.save(step, dump(step, weights))
        if stop.requested:
            print(f"SIGTERM: checkpointed at step {step}; exiting {PREEMPTED_EXIT_CODE} (resumable)", flush=True)
            return PREEMPTED_EXIT_CODE
    if args.out:
        np.save(args.out, weights)
    x, y = batch(args.seed, 10**9)  # a batch no step trained on
    print(f"done: {step} steps, held-out loss {float(np.mean((x @ weights - y) ** 2)):.2e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
