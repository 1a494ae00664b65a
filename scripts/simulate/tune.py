"""Per-service policy knobs chosen on some days of a trace and checked on later days the choice never saw.

For each service: the trace's first two thirds (whole days) are the fitting days, the rest the
validation days. Candidates are replayed through the simulator (the gate's own `decide` and `plan`)
in two sweeps: headroom x look-ahead terms at the configured hysteresis and stabilisation, then
hysteresis x stabilisation around the best of the first, never below the configured ones (a
shorter window or less hysteresis lends faster after a fall, which is only as safe as the
rises the history happened to hold). The choice must keep at most `max_delay_minutes` minutes
of queueing delay above the target on the fitting days, and also when they are replayed with the
cold start doubled (a margin: a setting that only just keeps up with the rises it saw fails on
the next, larger one), and its headroom must cover a rise larger than any the fitting days held
(`RISE_MARGIN` times their largest rise within one reaction time): a fixed headroom covers a step up
to itself and no further, and a setting whose headroom is below the largest rise it was fitted on
kept up with that rise only by the rounding of replicas and where the rise fell. Only the
volatility term widens the headroom after volatile hours, so a setting with it is judged by its
replays alone. Among those, the settings within `SHARE_TOLERANCE` of the most lending
one differ by less than a fitting period tells apart, and the safest of them is chosen (the
look-ahead that follows recent rises first, then the larger headroom, window and hysteresis).
On the second bundled trace, whose largest rise (+116%, against +57% on the fitting days) lies in
its validation days, the most lending setting with only the cold-start margin had 11 minutes of
delay there (headroom 0.5 without look-ahead); the one chosen with the rise margin too, none. Its
validation days are reported beside it, as is the frontier of every candidate seen.

What no history can foresee is said, not hidden: the largest rise of the load within one reaction
time relative to its level before it; a rise beyond it is not covered by anything the history
taught, and an unprecedented step costs up to one reaction time of delay.
"""

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from offhours.scripts.config.loader import policy_settings
from offhours.scripts.policy.config import ServicePolicy
from offhours.scripts.simulate.engine import cold_start_minutes, reaction_minutes, service_demand, service_rates
from offhours.scripts.simulate.fleet import Fleet, JobSpec, ServiceSpec
from offhours.scripts.simulate.parallel import map_replays
from offhours.scripts.simulate.report import simulate
from offhours.scripts.simulate.trace import Trace, TraceError, days_of

HEADROOMS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.85, 1.0)
LOOK_AHEAD = ("none", "trend", "trend+volatility")
HYSTERESIS = (0, 1, 2)  # added to the configured lendHysteresis
STABILIZATION = (1.0, 2.0)  # times the configured stabilizationSeconds
SHARE_TOLERANCE = 0.02  # fitting-days shares closer than this are not told apart: the safer setting wins
LOOK_AHEAD_SAFETY = {"none": 0, "trend": 1, "trend+volatility": 2}
VOLATILITY = {"volatility_headroom_max": 1.0, "volatility_lookback_seconds": 21600.0}
LEVEL_FLOOR = 0.05  # a rise from below 5% of the median need (while it serves any) has no meaningful ratio
RISE_MARGIN = 1.5  # a headroom without the volatility term must cover half as much again as the fitting days' largest rise


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
class Score:
    """What one candidate gave and risked on some days."""

    share_of_reference: float
    delay_minutes: int
    slo_minutes: int
    preemptions: int
    gpu_hours_lent: float


@dataclass(frozen=True)
class Candidate:
    """A setting with its score on the fitting days and on the validation days."""

    knobs: Knobs
    fit: Score
    validation: Score
    margin_delay_minutes: int | None = None  # fitting days with the cold start doubled; None: not replayed


@dataclass(frozen=True)
class Rise:
    """The largest rise of the need within one reaction time, relative to the level before it."""

    ratio: float  # e.g. 1.5: the need grew to 2.5x its level
    minute: int  # where the rise starts
    reaction_minutes: float


@dataclass
class ServiceTuning:
    """One service's sweep: every candidate, the chosen one, whether it met the budget, the largest rise."""

    service: str
    candidates: list[Candidate]
    chosen: Candidate
    within_budget: bool
    rise: Rise
    fit_days: int
    validation_days: int
    current: Candidate | None = None
    notes: list[str] = field(default_factory=list)
    fit_rise: Rise | None = None  # the largest rise of the fitting days alone: what the choice's headroom must cover


def split_days(trace: Trace) -> tuple[int, int]:
    """Return (fitting days, validation days): the first two thirds of the whole days, the rest."""
    days = trace.minutes // 1440
    if days < 2:
        raise TraceError(f"{trace.name}: tuning needs at least 2 whole days (fit on some, check on others), "
                         f"it has {trace.minutes / 1440:.1f}")
    fit = max(1, (2 * days) // 3)
    return fit, days - fit


def largest_rise(trace: Trace, spec: ServiceSpec, fleet: Fleet) -> Rise:
    """Return the largest rise of the service's need within one reaction time, over the level where it starts."""
    need = service_demand(service_rates(trace, spec), spec)
    reaction = reaction_minutes(spec, fleet)
    horizon = max(1, int(math.ceil(reaction - 1e-9)))
    n = need.shape[0]
    if n <= horizon:
        return Rise(0.0, 0, reaction)
    ahead = np.lib.stride_tricks.sliding_window_view(need[1:], horizon).max(axis=1)[: n - horizon]
    level = need[: n - horizon]
    # The median of the minutes with any need: a service idle most of the day has a median of zero, and
    # a handful of requests would then be a level (the day's first minute a rise of thousands of percent).
    serving = need[need > 0]
    floor = LEVEL_FLOOR * max(float(np.median(serving)) if serving.size else 0.0, 1e-12)
    ratio = np.where(level > floor, ahead / np.maximum(level, floor) - 1.0, 0.0)
    at = int(np.argmax(ratio))
    return Rise(max(0.0, float(ratio[at])), at, reaction)


def covers(knobs: Knobs, fit_rise: float) -> bool:
    """Whether a setting's headroom stands for a rise `RISE_MARGIN` times the fitting days' largest (a ratio).

    A setting with the volatility term is judged by its replays: its headroom grows after volatile hours.
    """
    return "volatility" in knobs.look_ahead or knobs.headroom >= RISE_MARGIN * fit_rise - 1e-9


def choose(candidates: Sequence[Candidate], max_delay_minutes: int,
           fit_rise: float = 0.0) -> tuple[Candidate, bool]:
    """Return the candidate that lends most on the fitting days within the budget there, with the margins too.

    The margins: the budget kept with the cold start doubled, and a headroom that `covers` a rise
    larger than the fitting days' largest (`fit_rise`, relative to the level). Of those, the safest
    within `SHARE_TOLERANCE` of the most lending. Where no headroom covers the rise, those of the widest
    headroom within the budget under the cold-start margin stand for it. Without a candidate within the
    budget under the cold-start margin, the same among those within it;
    without any within the budget, the least delayed (and the second value is False).
    """
    def safest(pool: list[Candidate]) -> Candidate:
        best = max(c.fit.share_of_reference for c in pool)
        near = [c for c in pool if c.fit.share_of_reference >= best - SHARE_TOLERANCE]
        return max(near, key=lambda c: (LOOK_AHEAD_SAFETY.get(c.knobs.look_ahead, 0), c.knobs.headroom,
                                        c.knobs.stabilization_seconds, c.knobs.lend_hysteresis,
                                        -c.fit.slo_minutes, -c.fit.preemptions, c.fit.share_of_reference))

    within = [c for c in candidates if c.fit.delay_minutes <= max_delay_minutes]
    robust = [c for c in within if c.margin_delay_minutes is not None and c.margin_delay_minutes <= max_delay_minutes]
    covered = [c for c in robust if covers(c.knobs, fit_rise)]
    if not covered and robust:
        # No headroom covers the margin: the widest comes closest (a larger rise must never choose a leaner one).
        widest = max(c.knobs.headroom for c in robust)
        covered = [c for c in robust if c.knobs.headroom >= widest - 1e-9]
    if covered:
        return safest(covered), True
    if within:
        return safest(within), True
    return min(candidates, key=lambda c: (c.fit.delay_minutes, c.fit.slo_minutes, -c.fit.share_of_reference)), False


def frontier(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Return the candidates no other beats on the fitting days in both share and delay-minutes, by delay."""
    best: list[Candidate] = []
    for c in sorted(candidates, key=lambda c: (c.fit.delay_minutes, -c.fit.share_of_reference)):
        if not best or c.fit.share_of_reference > best[-1].fit.share_of_reference + 1e-12:
            best.append(c)
    return best


def _slower(spec: ServiceSpec, fleet: Fleet) -> ServiceSpec:
    """Return the service with its cold start doubled: the margin the choice must also keep."""
    return dataclasses.replace(spec, policy=dataclasses.replace(
        spec.policy, cold_start_seconds=2.0 * 60.0 * cold_start_minutes(spec, fleet)))


def _score(trace: Trace, fleet: Fleet, spec: ServiceSpec, jobs: list[JobSpec], knobs: Knobs,
           own: Trace | None) -> Score:
    tuned = dataclasses.replace(spec, policy=knobs.apply(spec.policy))
    one = dataclasses.replace(fleet, services=(tuned,))
    report = simulate(trace, one, jobs, modes=("gate",), workers=1,
                      traces={spec.name: own} if own is not None else None).reports["gate"]
    share = report.share_of_reference if math.isfinite(report.share_of_reference) else 0.0
    return Score(share, report.delay_minutes, report.slo_minutes, report.preemptions, report.gpu_hours_lent)


def tune(trace: Trace, fleet: Fleet, jobs: list[JobSpec], max_delay_minutes: int = 0,
         traces: dict[str, Trace] | None = None, workers: int | None = None,
         headrooms: Sequence[float] = HEADROOMS, look_ahead: Sequence[str] = LOOK_AHEAD,
         hysteresis: Sequence[int] = HYSTERESIS, stabilization: Sequence[float] = STABILIZATION) -> list[ServiceTuning]:
    """Tune every service of `fleet` on `trace` (or its own trace in `traces`); candidates run in parallel."""
    own = traces or {}
    fit_days, val_days = split_days(trace)
    segments = {name: (days_of(t, 0, fit_days), days_of(t, fit_days, fit_days + val_days))
                for name, t in {**{s.name: trace for s in fleet.services}, **own}.items()}
    base = segments[fleet.services[0].name] if fleet.services else (days_of(trace, 0, fit_days),) * 2
    jobs_of = {s.name: [j for j in jobs if j.service == s.name] for s in fleet.services}
    # The validation days start fit_days later: their lending windows fall at their own hours.
    later = fleet if fleet.start_time is None else dataclasses.replace(
        fleet, start_time=fleet.start_time + fit_days * 86400.0)
    # Measured on the fitting days alone: the validation days must not shape the choice they check.
    fit_rise = {s.name: largest_rise(segments[s.name][0] if s.name in own else base[0], s, fleet)
                for s in fleet.services}

    def run(pairs: list[tuple[ServiceSpec, Knobs]]) -> list[Candidate]:
        def task(i: int) -> Candidate:
            spec, knobs = pairs[i]
            fit, val = segments[spec.name]
            mine = spec.name in own
            scored = _score(base[0], fleet, spec, jobs_of[spec.name], knobs, fit if mine else None)
            margin = None
            if scored.delay_minutes <= max_delay_minutes:  # only a candidate that can be chosen needs its margin
                margin = _score(base[0], fleet, _slower(spec, fleet), jobs_of[spec.name], knobs,
                                fit if mine else None).delay_minutes
            return Candidate(knobs, scored, _score(base[1], later, spec, jobs_of[spec.name], knobs,
                                                   val if mine else None), margin)
        return map_replays(task, len(pairs), workers if workers is not None else None)

    first = [(spec, Knobs(h, look, spec.policy.lend_hysteresis, spec.policy.stabilization_seconds))
             for spec in fleet.services for h in headrooms for look in look_ahead]
    current = {spec.name: Knobs.of(spec.policy) for spec in fleet.services}
    first += [(spec, current[spec.name]) for spec in fleet.services if current[spec.name] not in {k for _, k in first}]
    seen: dict[str, dict[Knobs, Candidate]] = {s.name: {} for s in fleet.services}
    for (spec, knobs), cand in zip(first, run(first)):
        seen[spec.name][knobs] = cand
    second = []
    for spec in fleet.services:
        best, _ = choose(list(seen[spec.name].values()), max_delay_minutes, fit_rise[spec.name].ratio)
        policy = spec.policy
        second += [(spec, dataclasses.replace(best.knobs, lend_hysteresis=policy.lend_hysteresis + hy,
                                              stabilization_seconds=policy.stabilization_seconds * st))
                   for hy in hysteresis for st in stabilization]
    second = [(spec, k) for spec, k in second if k not in seen[spec.name]]
    for (spec, knobs), cand in zip(second, run(second)):
        seen[spec.name][knobs] = cand
    results = []
    for spec in fleet.services:
        candidates = list(seen[spec.name].values())
        chosen, ok = choose(candidates, max_delay_minutes, fit_rise[spec.name].ratio)
        whole = own.get(spec.name, trace)
        results.append(ServiceTuning(spec.name, candidates, chosen, ok, largest_rise(whole, spec, fleet), fit_days,
                                     val_days, seen[spec.name].get(current[spec.name]), fit_rise=fit_rise[spec.name]))
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


def _row(score: Score) -> str:
    return f"{score.share_of_reference:6.1%} {score.delay_minutes:6d} {score.slo_minutes:6d} {score.preemptions:7d}"


def text_report(tunings: Sequence[ServiceTuning], max_delay_minutes: int, delay_target_seconds: float) -> str:
    """Render the frontier of each service, the choice with its validation days, and the limit of what was seen."""
    lines = []
    head = (f"{'':68}{'fit: share  delay    SLO preempt':>34} {'margin':>7}   "
            f"{'validation: share  delay    SLO preempt':>41}")
    for t in tunings:
        lines.append(f"{t.service}: fit on days 0-{t.fit_days - 1}, validated on days {t.fit_days}-"
                     f"{t.fit_days + t.validation_days - 1}; delay budget {max_delay_minutes} minute(s) with queueing "
                     f"delay > {delay_target_seconds:g} s on the fitting days; {len(t.candidates)} settings replayed")
        lines.append(head)
        rows = frontier(t.candidates)
        if t.chosen not in rows:
            rows.append(t.chosen)
        if t.current is not None and t.current not in rows:
            rows.append(t.current)
        for c in rows:
            mark = "*" if c is t.chosen else ("c" if c is t.current else " ")
            margin = "-" if c.margin_delay_minutes is None else str(c.margin_delay_minutes)
            lines.append(f" {mark} {c.knobs.label():64} {_row(c.fit):>34} {margin:>7}   {_row(c.validation):>41}")
        verdict = "within the budget" if t.chosen.validation.delay_minutes <= max_delay_minutes else "OVER the budget"
        lines.append(f"   * chosen ({'' if t.within_budget else 'no setting met the budget on the fitting days; '}"
                     f"validation days {verdict}); c: the configured setting; margin: delay-minutes on the fitting "
                     "days with the cold start doubled")
        if t.fit_rise is not None:
            covered = "covered" if covers(t.chosen.knobs, t.fit_rise.ratio) else "NOT covered"
            lines.append(f"   largest rise on the fitting days: +{t.fit_rise.ratio:.0%} of the level; a headroom without "
                         f"the volatility term must cover {RISE_MARGIN:g}x it (+{RISE_MARGIN * t.fit_rise.ratio:.0%}): "
                         f"the chosen setting is {covered}")
        day, minute = divmod(t.rise.minute, 1440)
        lines.append(f"   largest rise seen within one reaction time ({t.rise.reaction_minutes:g} min): "
                     f"+{t.rise.ratio:.0%} of the level (day {day} {minute // 60:02d}:{minute % 60:02d}); "
                     f"rises beyond it are not covered: an unprecedented step costs up to one reaction time of delay")
        lines.append("")
    return "\n".join(lines)
