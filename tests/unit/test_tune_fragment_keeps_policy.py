"""The gate config `tune` writes is the policy it replayed: every setting of the service, the chosen knobs in it.

The fragment carried the capacity, the GPUs per replica and the knobs swept; a service's floor
(minReplicas), its lending step, cold start, grace cap, deployment, time-of-day look-ahead and
lending window were left out, so the gate reading the fragment ran a policy tune never replayed
(a window-only service lent around the clock, a floor of 3 replicas fell to the default 1).
"""

import dataclasses
from datetime import time

from offhours.scripts.config.loader import parse_config
from offhours.scripts.policy.config import Capacity, Schedule, ServicePolicy
from offhours.scripts.simulate.fleet import Fleet, ServiceSpec
from offhours.scripts.simulate.tune import Candidate, FoldScore, Knobs, Rise, ServiceTuning, config_fragment, rolling_folds

_SCORE = (FoldScore(0.5, 0, 0, 0, 0, 1.0),)


def _tuning(name: str, knobs: Knobs) -> ServiceTuning:
    chosen = Candidate(knobs, _SCORE)
    return ServiceTuning(name, [chosen], chosen, True, Rise(0.2, 0, 5.0), rolling_folds(3)[:1], [0.2], chosen, chosen)


def test_the_fragment_reads_back_as_the_policy_replayed_with_the_chosen_knobs() -> None:
    policies = [
        ServicePolicy("chat", Capacity(10.0, None, 800.0), deployment="chat-vllm", gpus_per_replica=2,
                      min_replicas=3, max_waiting_per_replica=2.5, max_lend_step=1, cold_start_seconds=600.0,
                      max_grace_seconds=45.0, time_of_day_days=7,
                      schedule=Schedule("window", time(22, 0), time(6, 0), "Europe/Berlin")),
        ServicePolicy("embed", Capacity(None, 5000.0, None), schedule=Schedule(timezone="Asia/Tokyo")),
    ]
    fleet = Fleet(services=tuple(ServiceSpec(p, 8, 1.0) for p in policies))
    chosen = {"chat": Knobs(0.5, "trend+volatility", 1, 1800.0), "embed": Knobs(0.85, "none", 0, 900.0)}
    fragment = config_fragment([_tuning(p.name, chosen[p.name]) for p in policies], fleet)
    read = parse_config(fragment)
    for policy in policies:
        assert read.service(policy.name) == chosen[policy.name].apply(policy), policy.name


def test_a_policy_of_defaults_stays_a_short_fragment() -> None:
    """Settings at their defaults are not spelt out: the fragment says what was tuned and what differs."""
    policy = ServicePolicy("chat", Capacity(10.0))
    fleet = Fleet(services=(ServiceSpec(policy, 4, 1.0),))
    knobs = Knobs(0.6, "trend", 0, 900.0)
    fragment = config_fragment([_tuning("chat", knobs)], fleet)
    assert set(fragment["services"]["chat"]) == {"capacity", "gpusPerReplica", "headroom", "trend", "lendHysteresis",
                                                 "stabilizationSeconds", "volatilityHeadroomMax"}
    assert parse_config(fragment).service("chat") == dataclasses.replace(knobs.apply(policy))
