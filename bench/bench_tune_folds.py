"""Benchmark: `tune`'s rolling-fold cross-validation on the shipped traces, the recommendation against the defaults.

For m-small and m-mid on their default fleets (4 services, generated job queue): the folds, and per service the
recommended setting, the cross-validation's best, whether it was refused as worse than the defaults on a fold,
and each fold's validation figures for the recommendation and the defaults (share of the fixed reference,
delay-minutes with the part rises without precedent explain, SLO-minutes, preemptions). Also the wall time.
Writes bench/results/tune_folds.json.
"""

import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results" / "tune_folds.json"
WORKERS = 2


def _folds(candidate: Any) -> list[dict[str, Any]]:
    return [dataclasses.asdict(f) for f in candidate.folds]


def main() -> None:
    """Tune each shipped trace, write the tables."""
    from offhours.scripts.simulate.fleet import default_fleet, generated_jobs
    from offhours.scripts.simulate.precedent import MIN_RISE, PRECEDENT_FACTOR
    from offhours.scripts.simulate.trace import load_trace
    from offhours.scripts.simulate.tune import REFUSE_MARGIN, SHARE_TOLERANCE, tune

    out: dict[str, Any] = {"refuseMargin": REFUSE_MARGIN, "shareTolerance": SHARE_TOLERANCE,
                           "precedentFactor": PRECEDENT_FACTOR, "minRise": MIN_RISE, "delayBudgetMinutes": 0,
                           "traces": {}}
    for name in ("m-small", "m-mid"):
        trace = load_trace(name)
        fleet = default_fleet(trace)
        t0 = time.perf_counter()
        tunings = tune(trace, fleet, generated_jobs(fleet), 0, workers=WORKERS)
        seconds = time.perf_counter() - t0
        out["traces"][name] = {
            "seconds": round(seconds, 1),
            "folds": [{"fit": list(f.fit), "validation": list(f.validation)} for f in tunings[0].folds],
            "services": [{"service": t.service, "recommended": dataclasses.asdict(t.chosen.knobs),
                          "best": dataclasses.asdict(t.best.knobs), "defaults": dataclasses.asdict(t.defaults.knobs),
                          "refused": t.refused, "withinBudget": t.within_budget, "precedent": t.fit_rises,
                          "recommendedFolds": _folds(t.chosen), "defaultsFolds": _folds(t.defaults),
                          "settingsReplayed": len(t.candidates)} for t in tunings]}
        print(name, f"{seconds:.0f} s", [(t.service, t.chosen.knobs.label(), bool(t.refused)) for t in tunings])
    out["includes"] = ("each fold's figures are its validation days' only, from one whole-trace replay per setting "
                       "(the gate's state carried across days); share: of the fixed reference over those days")
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
