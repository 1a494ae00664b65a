"""Per-service policy knobs chosen by cross-validation over rolling folds of days, never worse than the defaults.

Folds (`rolling_folds`): a window of whole days to fit on, the days right after it to validate on, for
every start of the window (a 14-day trace: fit on 7 days, validate on the next 2, six folds). Every
candidate setting is replayed once through the simulator over the whole trace (the gate's own `decide`
and `plan`, its state carried from day to day as the gate carries it), and each fold's validation days
are accounted apart: the share of the fixed reference lent, the minutes with queueing delay above the
target, SLO-minutes and preemptions.

Delay is told apart by its cause (scripts/simulate/precedent.py, defined before any result was seen):
delay that a rise without precedent in the fold's fitting days explains is reported apart, always beside
the total. Such a rise costs about one reaction time whatever the knobs (a headroom fitted on those days
never stood for it), so it does not count against the delay budget and cannot drive the headroom up; any
other delay does.

The choice: among the settings within the budget on every fold (delay-minutes outside rises without
precedent on the validation days), the best worst-fold share; settings within `SHARE_TOLERANCE` of it are
not told apart and the safest wins (the look-ahead that follows recent rises first, then the larger
headroom, window and hysteresis). The defaults (the shipped policy's knobs) are always replayed beside it:
a setting worse than the defaults on any fold, by more than `REFUSE_MARGIN` of share or by more delay-minutes
outside unprecedented rises than the budget, is refused, and the defaults are recommended instead.
"""

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from offhours.scripts.config.loader import policy_settings
from offhours.scripts.policy.config import ServicePolicy
from offhours.scripts.simulate.engine import reaction_minutes, service_demand, service_rates
from offhours.scripts.simulate.fleet import Fleet, JobSpec, ServiceSpec
from offhours.scripts.simulate.parallel import map_replays
from offhours.scripts.simulate.precedent import (
    PRECEDENT_FACTOR,
    attributed_delay,
    largest_rise_ratio,
    rise_events,
    rise_ratios,
    without_precedent,
)
from offhours.scripts.simulate.report import simulate
from offhours.scripts.simulate.trace import Trace, TraceError

DAY = 1440
HEADROOMS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.85, 1.0)
LOOK_AHEAD = ("none", "trend", "trend+volatility")
HYSTERESIS = (0, 1)  # added to the configured lendHysteresis
STABILIZATION = (1.0, 2.0)  # times the configured stabilizationSeconds
SHARE_TOLERANCE = 0.01  # worst-fold shares closer than this are not told apart: the safer setting wins
REFUSE_MARGIN = 0.03  # a setting lending this much less of the reference than the defaults on a fold is refused
LOOK_AHEAD_SAFETY = {"none": 0, "trend": 1, "trend+volatility": 2}
VOLATILITY = {"volatility_headroom_max": 1.0, "volatility_lookback_seconds": 21600.0}


@dataclass(frozen=True)
class Knobs:
    """One candidate setting of a service's policy knobs."""

    headroom: float
    look_ahead: str
    lend_hysteresis: int
    stabilization_seconds: float

    def apply(self, policy: ServicePolicy) -> ServicePolicy:
        """Return `policy` with these knobs."""
        on = "volatility" in self.look_ahead
        return dataclasses.replace(policy, headroom=self.headroom, trend=self.look_ahead != "none",
                                   lend_hysteresis=self.lend_hysteresis, stabilization_seconds=self.stabilization_seconds,
                                   volatility_headroom_max=VOLATILITY["volatility_headroom_max"] if on else 0.0,
                                   volatility_lookback_seconds=(VOLATILITY["volatility_lookback_seconds"] if on
                                                                else policy.volatility_lookback_seconds))

    def fragment(self) -> dict[str, Any]:
        """Return the gate config keys these knobs set (schemas/gate-config.schema.json)."""
        keys: dict[str, Any] = {"headroom": self.headroom, "trend": self.look_ahead != "none",
                                "lendHysteresis": self.lend_hysteresis, "stabilizationSeconds": self.stabilization_seconds}
        if "volatility" in self.look_ahead:
            keys.update(volatilityHeadroomMax=VOLATILITY["volatility_headroom_max"],
                        volatilityLookbackSeconds=VOLATILITY["volatility_lookback_seconds"])
        else:
            keys["volatilityHeadroomMax"] = 0.0
        return keys

    def label(self) -> str:
        """Return a short description for the frontier table."""
        return (f"headroom {self.headroom:g}, {self.look_ahead}, hysteresis {self.lend_hysteresis}, "
                f"stabilisation {self.stabilization_seconds:g} s")

    @staticmethod
    def of(policy: ServicePolicy) -> "Knobs":
        """Return the knobs a policy has now (look-ahead read from its terms)."""
        look = "none" if not policy.trend else ("trend+volatility" if policy.volatility_headroom_max > 0 else "trend")
        return Knobs(policy.headroom, look, policy.lend_hysteresis, policy.stabilization_seconds)


@dataclass(frozen=True)
class Fold:
    """Whole days [first, last) to fit on and the days after them to validate on."""

    fit: tuple[int, int]
    validation: tuple[int, int]


@dataclass(frozen=True)
class FoldScore:
    """What one setting gave and risked on one fold's validation days."""

    share_of_reference: float
    delay_minutes: int
    delay_without_precedent: int  # of delay_minutes: those only a rise without precedent in the fitting days explains
    slo_minutes: int
    preemptions: int
    gpu_hours_lent: float

    @property
    def delay_with_precedent(self) -> int:
        """The delay-minutes the setting answers for."""
        return self.delay_minutes - self.delay_without_precedent


@dataclass(frozen=True)
class Candidate:
    """A setting with its score on each fold's validation days."""

    knobs: Knobs
    folds: tuple[FoldScore, ...]

    @property
    def worst_share(self) -> float:
        """The lowest share over the folds."""
        return min(f.share_of_reference for f in self.folds)

    @property
    def worst_delay(self) -> int:
        """The most delay-minutes outside rises without precedent on one fold."""
        return max(f.delay_with_precedent for f in self.folds)


@dataclass(frozen=True)
class Rise:
    """The largest rise of the need within one reaction time, relative to the level before it."""

    ratio: float  # e.g. 1.5: the need grew to 2.5x its level
    minute: int  # where the rise starts
    reaction_minutes: float


@dataclass
class ServiceTuning:
    """One service's cross-validation: every candidate, the recommendation, the defaults beside it."""

    service: str
    candidates: list[Candidate]
    chosen: Candidate  # what is recommended: the best, or the defaults where the best was refused
    within_budget: bool  # some setting kept the budget on every fold
    rise: Rise  # the largest of the whole trace, reported
    folds: list[Fold]
    fit_rises: list[float]  # per fold, the largest rise of its fitting days: the precedent
    defaults: Candidate
    best: Candidate  # the cross-validation's choice before the comparison with the defaults
    refused: list[str] = field(default_factory=list)  # why `best` was not recommended (empty: it was)


def rolling_folds(days: int) -> list[Fold]:
    """Every window of `days // 2` whole days, validated on the `max(1, days // 7)` days right after it."""
    if days < 3:
        raise TraceError(f"tuning needs at least 3 whole days (fit on some, validate on the ones after), it has {days}")
    fit, val = max(1, days // 2), max(1, days // 7)
    return [Fold((i, i + fit), (i + fit, i + fit + val)) for i in range(days - fit - val + 1)]


def largest_rise(trace: Trace, spec: ServiceSpec, fleet: Fleet) -> Rise:
    """Return the largest rise of the service's need within one reaction time, over the level where it starts."""
    need = service_demand(service_rates(trace, spec), spec)
    reaction = reaction_minutes(spec, fleet)
    horizon = max(1, int(math.ceil(reaction - 1e-9)))
    if need.shape[0] <= horizon:
        return Rise(0.0, 0, reaction)
    ratios = rise_ratios(need, horizon)[: need.shape[0] - horizon]
    at = int(np.argmax(ratios))
    return Rise(max(0.0, float(ratios[at])), at, reaction)


def fold_scores(series: dict[str, np.ndarray], name: str, folds: Sequence[Fold], horizon: int,
                target_seconds: float) -> tuple[FoldScore, ...]:
    """Account one service's whole-trace replay (`simulate`'s series) fold by fold, on each validation days."""
    lent, reference = series["gate:lent"], series["reference:lent"]
    wait, short, need = series[f"gate:wait:{name}"], series[f"gate:short:{name}"], series[f"need:{name}"]
    preempted = series["gate:preemptions"]
    delayed = wait > target_seconds
    events = rise_events(rise_ratios(need, horizon))
    out = []
    for fold in folds:
        fit = slice(fold.fit[0] * DAY, fold.fit[1] * DAY)
        v = slice(fold.validation[0] * DAY, fold.validation[1] * DAY)
        precedent = largest_rise_ratio(need[fit], horizon)
        apart = attributed_delay(delayed, without_precedent(events, precedent), horizon)
        ref = float(reference[v].sum())
        gpu_h = float(lent[v].sum()) / 60.0
        out.append(FoldScore(float(lent[v].sum()) / ref if ref > 0 else 0.0, int(delayed[v].sum()),
                             int(apart[v].sum()), int(short[v].sum()), int(preempted[v].sum()), gpu_h))
    return tuple(out)


def choose(candidates: Sequence[Candidate], max_delay_minutes: int) -> tuple[Candidate, bool]:
    """Return the best worst-fold share within the budget on every fold (the safest of near ties), and whether any was.

    Without a candidate within the budget: the least delayed on its worst fold (and False).
    """
    within = [c for c in candidates if c.worst_delay <= max_delay_minutes]
    if not within:
        return min(candidates, key=lambda c: (c.worst_delay, sum(f.delay_with_precedent for f in c.folds),
                                              -c.worst_share)), False
    best = max(c.worst_share for c in within)
    near = [c for c in within if c.worst_share >= best - SHARE_TOLERANCE]
    return max(near, key=lambda c: (LOOK_AHEAD_SAFETY.get(c.knobs.look_ahead, 0), c.knobs.headroom,
                                    c.knobs.stabilization_seconds, c.knobs.lend_hysteresis, c.worst_share)), True


def worse_than_defaults(candidate: Candidate, defaults: Candidate, max_delay_minutes: int) -> list[str]:
    """Return, per fold where `candidate` is worse than `defaults` by more than the margins, why (empty: nowhere)."""
    why = []
    for i, (c, d) in enumerate(zip(candidate.folds, defaults.folds)):
        if c.share_of_reference < d.share_of_reference - REFUSE_MARGIN:
            why.append(f"fold {i}: share {c.share_of_reference:.1%} against the defaults' {d.share_of_reference:.1%} "
                       f"(margin {REFUSE_MARGIN:.0%})")
        if c.delay_with_precedent > d.delay_with_precedent + max_delay_minutes:
            why.append(f"fold {i}: {c.delay_with_precedent} delay-minutes outside rises without precedent against "
                       f"the defaults' {d.delay_with_precedent} (budget {max_delay_minutes})")
    return why


def default_knobs(policy: ServicePolicy) -> Knobs:
    """Return the shipped defaults' knobs (scripts/policy/config.py), whatever the service configures."""
    return Knobs.of(ServicePolicy(policy.name, policy.capacity))


def tune(trace: Trace, fleet: Fleet, jobs: list[JobSpec], max_delay_minutes: int = 0,
         traces: dict[str, Trace] | None = None, workers: int | None = None,
         headrooms: Sequence[float] = HEADROOMS, look_ahead: Sequence[str] = LOOK_AHEAD,
         hysteresis: Sequence[int] = HYSTERESIS, stabilization: Sequence[float] = STABILIZATION) -> list[ServiceTuning]:
    """Cross-validate every service of `fleet` on `trace` (or its own trace in `traces`); replays run in parallel."""
    own = traces or {}
    folds = rolling_folds(trace.minutes // DAY)
    jobs_of = {s.name: [j for j in jobs if j.service == s.name] for s in fleet.services}
    whole = {s.name: own.get(s.name, trace) for s in fleet.services}
    grid = {}
    for spec in fleet.services:
        policy = spec.policy
        knobs = [Knobs(h, look, policy.lend_hysteresis + hy, policy.stabilization_seconds * st)
                 for h in headrooms for look in look_ahead for hy in hysteresis for st in stabilization]
        grid[spec.name] = list(dict.fromkeys([*knobs, default_knobs(policy)]))
    pairs = [(spec, k) for spec in fleet.services for k in grid[spec.name]]

    def task(i: int) -> Candidate:
        spec, knobs = pairs[i]
        tuned = dataclasses.replace(spec, policy=knobs.apply(spec.policy))
        one = dataclasses.replace(fleet, services=(tuned,))
        sim = simulate(whole[spec.name], one, jobs_of[spec.name], modes=("gate",), workers=1)
        horizon = max(1, math.ceil(reaction_minutes(tuned, fleet) - 1e-9))
        return Candidate(knobs, fold_scores(sim.series, spec.name, folds, horizon, fleet.delay_target_seconds))

    done = map_replays(task, len(pairs), workers)
    results = []
    for spec in fleet.services:
        candidates = [c for (s, _), c in zip(pairs, done) if s.name == spec.name]
        defaults = next(c for c in candidates if c.knobs == default_knobs(spec.policy))
        best, ok = choose(candidates, max_delay_minutes)
        refused = worse_than_defaults(best, defaults, max_delay_minutes)
        horizon = max(1, math.ceil(reaction_minutes(spec, fleet) - 1e-9))
        need = service_demand(service_rates(whole[spec.name], spec), spec)
        fit_rises = [largest_rise_ratio(need[f.fit[0] * DAY:f.fit[1] * DAY], horizon) for f in folds]
        results.append(ServiceTuning(spec.name, candidates, defaults if refused else best, ok,
                                     largest_rise(whole[spec.name], spec, fleet), folds, fit_rises, defaults, best,
                                     refused))
    return results


def config_fragment(tunings: Sequence[ServiceTuning], fleet: Fleet) -> dict[str, Any]:
    """Return every service's policy with its chosen knobs as a gate config document (its `services`).

    The whole policy that was replayed, not the knobs alone: a setting left out (a floor of
    replicas, a lending window, a cold start) would make the gate run a policy tune never saw.
    """
    services: dict[str, Any] = {}
    for spec, tuning in zip(fleet.services, tunings):
        services[spec.name] = {**policy_settings(spec.policy), **tuning.chosen.knobs.fragment()}
    return {"services": services}


def _cells(f: FoldScore) -> str:
    return (f"{f.share_of_reference:6.1%} {f.delay_minutes:5d} ({f.delay_without_precedent:3d}) {f.slo_minutes:5d} "
            f"{f.preemptions:6d}")


def text_report(tunings: Sequence[ServiceTuning], max_delay_minutes: int, delay_target_seconds: float) -> str:
    """Render each service's per-fold table, the recommended setting against the defaults, and what was told apart."""
    lines = []
    for t in tunings:
        fit_days = t.folds[0].fit[1] - t.folds[0].fit[0]
        val_days = t.folds[0].validation[1] - t.folds[0].validation[0]
        lines.append(f"{t.service}: {len(t.folds)} rolling folds (fit on {fit_days} days, validate on the {val_days} "
                     f"after); delay budget {max_delay_minutes} minute(s) with queueing delay > "
                     f"{delay_target_seconds:g} s outside rises without precedent, on every fold; "
                     f"{len(t.candidates)} settings replayed")
        lines.append(f"   recommended: {t.chosen.knobs.label()}")
        lines.append(f"   defaults:    {t.defaults.knobs.label()}")
        if t.best is not t.chosen:
            lines.append(f"   best by cross-validation: {t.best.knobs.label()}")
        lines.append(f"   {'fold':>4} {'fit':>6} {'valid':>6} {'precedent':>9}   "
                     f"{'recommended: share delay (apart)   SLO preempt':>46}   "
                     f"{'defaults: share delay (apart)   SLO preempt':>43}")
        for i, fold in enumerate(t.folds):
            lines.append(f"   {i:>4} {fold.fit[0]:>3}-{fold.fit[1] - 1:<2} {fold.validation[0]:>3}-"
                         f"{fold.validation[1] - 1:<2} {t.fit_rises[i]:>+9.0%}   {_cells(t.chosen.folds[i]):>46}   "
                         f"{_cells(t.defaults.folds[i]):>43}")
        lines.append(f"   {'worst':>4} {'':>6} {'':>6} {'':>9}   {t.chosen.worst_share:6.1%} "
                     f"{t.chosen.worst_delay:>5} outside{'':>20}{t.defaults.worst_share:6.1%} "
                     f"{t.defaults.worst_delay:>5} outside")
        if not t.within_budget:
            lines.append("   no setting met the budget on every fold: the least delayed is shown")
        for why in t.refused:
            lines.append(f"   REFUSED the best setting, worse than the defaults: {why}; the defaults are recommended")
        lines.append(f"   delay: all minutes above the target; (apart): of them, those only a rise without precedent "
                     f"explains: a rise within one reaction time ({t.rise.reaction_minutes:g} min) more than "
                     f"{PRECEDENT_FACTOR:g}x the largest of the fold's fitting days (precedent)")
        day, minute = divmod(t.rise.minute, DAY)
        lines.append(f"   largest rise of the whole trace within one reaction time: +{t.rise.ratio:.0%} of the level "
                     f"(day {day} {minute // 60:02d}:{minute % 60:02d}); a rise beyond any the history held costs up "
                     f"to one reaction time of delay, whatever the knobs")
        lines.append("")
    return "\n".join(lines)
