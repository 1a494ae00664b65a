"""The long fault campaign: the state machine of tests/support/campaign.py for 10,000+ steps.

The offline suite runs it with a small fixed budget (tests/unit/test_campaign.py); this runs it until
`--steps` steps (rules) have been survived, in examples of `--per-example` steps each, with a fresh
random seed that is written down. Writes bench/results/campaign.json: steps and ticks survived,
examples, wall time, the seed, any failure (the falsifying steps and a reproduction blob) and the
invariants checked after every step, in words.
"""

import argparse
import json
import platform
import random
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results" / "campaign.json"


def main() -> int:
    from hypothesis import HealthCheck, Phase, seed, settings
    from hypothesis.stateful import run_state_machine_as_test

    from tests.support.campaign import GateCampaign

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--per-example", type=int, default=50)
    parser.add_argument("--seed", type=int, default=random.SystemRandom().randrange(2**32))
    args = parser.parse_args()
    failures: list[dict[str, str]] = []
    started = time.perf_counter()
    rounds = 0
    while GateCampaign.total_steps < args.steps and not failures:
        rounds += 1
        examples = max(1, (args.steps - GateCampaign.total_steps) // args.per_example)

        @seed(args.seed + rounds)
        def campaign() -> None:
            run_state_machine_as_test(GateCampaign, settings=settings(
                max_examples=examples, stateful_step_count=args.per_example, deadline=None, database=None,
                phases=[Phase.generate, Phase.shrink], print_blob=True, suppress_health_check=list(HealthCheck)))

        try:
            campaign()
        except Exception as err:  # noqa: BLE001 - a failure is the result: recorded, then reported
            for one in (err.exceptions if isinstance(err, ExceptionGroup) else [err]):
                where = traceback.extract_tb(one.__traceback__)[-1]
                failures.append({"error": f"{type(one).__name__}: {one}"[:3000],
                                 "at": f"{Path(where.filename).name}:{where.lineno} {where.name}",
                                 "steps": [n for n in getattr(one, "__notes__", []) if n.startswith("state.")
                                           or "reproduce_failure" in n]})
    invariants = {name: " ".join((getattr(GateCampaign, name).__doc__ or "").split())
                  for name in ("serving_within_reaction_time", "never_more_lent_than_baseline_minus_min",
                               "gate_owns_only_its_delta", "no_work_lost_or_duplicated",
                               "a_fault_in_one_service_never_changes_another")}
    result = {
        "machine": f"{platform.machine()} {platform.python_version()}",
        "seed": args.seed,
        "steps_survived": GateCampaign.total_steps if not failures else None,
        "steps_run": GateCampaign.total_steps,
        "examples": GateCampaign.examples,
        "steps_per_example": args.per_example,
        "seconds": round(time.perf_counter() - started, 1),
        "failures": failures,
        "invariants": invariants,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "invariants"}, indent=2))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
