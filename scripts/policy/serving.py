"""The serving decision as one value in, one out: what the gate's reconcile, its reclaim check and the simulator call.

`decide` takes a dozen arguments; assembled by hand in three places they drifted apart (a check that counted
failed ticks, a simulator with another clock). Here they are two values: the gate's rules (from its
configuration) and what one service's decision reads at one moment.
"""

from dataclasses import dataclass, replace

from offhours.scripts.policy.capacity import Load
from offhours.scripts.policy.config import GateConfig, ServicePolicy
from offhours.scripts.policy.decide import Decision, ServiceState, decide
from offhours.scripts.policy.forecast import return_seconds
from offhours.scripts.policy.window import Opening, opening_at

# A reclaim check between ticks never fires the fail-safe (after N failed *ticks*, reclaim everything).
NEVER = 1 << 30


@dataclass(frozen=True)
class Rules:
    """The gate-wide settings a serving decision reads."""

    tick_seconds: float
    max_age_seconds: float
    failed_ticks_before_reclaim: int

    @classmethod
    def of(cls, config: GateConfig) -> "Rules":
        """Return the rules of a gate configuration."""
        return cls(float(config.tick_seconds), config.metrics.max_age_seconds, config.failed_ticks_before_reclaim)

    def for_checks(self) -> "Rules":
        """Return the rules of a check between ticks: a failed reading there is no failed tick."""
        return Rules(self.tick_seconds, self.max_age_seconds, NEVER)


@dataclass(frozen=True)
class ServingInput:
    """What one service's serving decision reads at one moment."""

    policy: ServicePolicy
    baseline: int
    lent: int
    load: Load | None
    load_error: str | None
    state: ServiceState
    floor: int | None = None  # the look-ahead's floor on the replicas needed soon (None: off, or no reading)
    # What the lending window allows (None: from the policy's schedule at `now`, with its return bound).
    window: Opening | None = None


def window_opening(rules: Rules, policy: ServicePolicy, now: float) -> Opening:
    """Return what `policy`'s lending window allows at `now`: its end met with the return bound, a tick apart."""
    return opening_at(policy.schedule, now, return_seconds(policy), rules.tick_seconds)


def serving_decision(rules: Rules, given: ServingInput, now: float) -> Decision:
    """Decide the replicas a service lends after this moment (the one call of `decide` of every caller).

    Past the window's last lend (`Opening.lend` false) a lend holds: what is lent stays until the return
    for the end must begin (`Opening.keep` false), then everything is reclaimed.
    """
    window = given.window if given.window is not None else window_opening(rules, given.policy, now)
    decision = decide(now=now, policy=given.policy, baseline=given.baseline, lent=given.lent, load=given.load,
                      load_error=given.load_error, lending_allowed=window.keep, max_age_seconds=rules.max_age_seconds,
                      failed_ticks_before_reclaim=rules.failed_ticks_before_reclaim, state=given.state,
                      forecast_required=given.floor, tick_seconds=rules.tick_seconds)
    if decision.action == "lend" and not window.lend:
        return replace(decision, action="hold", target_lent=decision.lent, ceiling=0,
                       reason=f"{decision.reason}; the lending window ends too soon for a new lend to run "
                              "before its return must begin")
    return decision
