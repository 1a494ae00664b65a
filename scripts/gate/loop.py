"""The gate's run loop: ticks until a deadline, once, or a SIGTERM; the exit code of the run.

`offhours gate` and the gate CronWorkflow's step (`offhours.cronworkflows.gate:gate_tick`) both
run `run_from_config`, which wires the configuration, the cluster and the load source to a `Gate`
and hands it to a `TickLoop`. The loop owns the rhythm, the gate owns one tick:

- a tick every `tickSeconds`; between two ticks the loop watches the workflows, so a job that
  ended gets its replicas back to serving at once, but never ticks more often than
  `MIN_TICK_SECONDS`, however many workflows end;
- between two ticks, every `reclaimCheckSeconds`, a reclaim check (scripts/gate/reclaim.py): a
  rise is seen within seconds, not at the next tick; a tick that did not run (the Lease was
  another's) is tried again at the next check, since the checks start from a tick's outcomes;
- with `seconds` (what each CronWorkflow run does) it stops before a tick that would start past
  the deadline, and goes on checking for a reclaim up to the deadline itself, so the next run's
  first tick follows the last check of this one; `once` and `dry_run` stop after one tick;
- a SIGTERM between ticks ends the loop at once (no Lease is held then); one during a tick lets
  the tick finish and give the Lease back, then ends the loop.

The exit code is 1 when the last tick failed for any service, else 0; 2 for a configuration that
cannot be used (nothing ran).
"""

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from offhours.scripts.gate.controller import Gate
from offhours.scripts.gate.log import Logger
from offhours.scripts.gate.reclaim import ReclaimCheck
from offhours.scripts.gate.return_watch import POLL_SECONDS, ReturnWatch
from offhours.scripts.gate.shutdown import GracefulStop, StopRequested

MIN_TICK_SECONDS = 5.0  # the gate never ticks more often than this, however many workflows end


@dataclass
class TickLoop:
    """Runs `gate`'s ticks until a deadline (`seconds`), after one (`once`, `dry_run`), or until a SIGTERM."""

    gate: Gate
    seconds: float | None = None  # stop before a tick that would start this long after the start; 0 or None: never
    once: bool = False
    dry_run: bool = False
    log: Logger = field(default_factory=lambda: Logger(sys.stderr))
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    stop: GracefulStop = field(default_factory=GracefulStop)
    watch: ReturnWatch | None = None  # times each reclaim's return path (scripts/gate/return_watch.py)

    def run(self) -> int:
        """Run ticks; return the exit code: 1 if the last tick failed for any service, else 0."""
        config, cluster = self.gate.config, self.gate.cluster
        deadline = self.monotonic() + self.seconds if self.seconds else None
        period = config.reclaim_check_seconds
        checks = ReclaimCheck(self.gate) if period > 0 and not (self.once or self.dry_run) else None
        with self.stop.installed() as stop:  # a deleted gate pod finishes its tick and gives the Lease back
            try:
                while True:
                    started = self.monotonic()
                    with stop.tick():
                        outcomes = self.gate.tick(dry_run=self.dry_run)
                    if self.watch is not None and not self.dry_run:  # hook: return phases
                        self.watch.passed(outcomes, started)
                    failed = any(o.error for o in outcomes)
                    next_tick = started + config.tick_seconds
                    if checks is not None and config.services and not outcomes:
                        # Skipped (the Lease another's: the last run's tick, the backstop's pass): the checks
                        # start from a tick's outcomes, so the tick is tried again at the next check.
                        next_tick = started + period
                    if stop.requested:
                        self.log.info("SIGTERM: stopped after the tick, the Lease given back")
                        return 1 if failed else 0
                    if self.once or self.dry_run or (checks is None and deadline is not None and next_tick > deadline):
                        return 1 if failed else 0
                    if checks is not None:
                        checks.remember(outcomes)
                    self.sleep(max(0.0, started + MIN_TICK_SECONDS - self.monotonic()))
                    next_check = started + period
                    while True:  # between two ticks: watch the workflows, check for a reclaim every `period`
                        if deadline is not None and self.monotonic() >= deadline - 1e-9:
                            return 1 if failed else 0
                        wake = next_tick if checks is None else min(next_tick, next_check)
                        wake = wake if deadline is None else min(wake, deadline)
                        if self.watch is not None and self.watch.following:  # hook: return phases
                            wake = min(wake, self.monotonic() + POLL_SECONDS)
                        changed = cluster.wait_for_workflow_change(config.workflow_namespace,
                                                                   max(0.0, wake - self.monotonic()))
                        if self.watch is not None and self.watch.following:  # hook: return phases
                            self.watch.poll()
                        now = self.monotonic()
                        if changed or now >= next_tick - 1e-9:
                            if deadline is not None and now > deadline:
                                return 1 if failed else 0
                            break  # a workflow ended, or it is time: a full tick
                        if checks is not None and now >= next_check - 1e-9:
                            next_check = now + period
                            with stop.tick():
                                acted = checks.run()
                            if self.watch is not None:  # hook: return phases
                                self.watch.passed(acted, now)
                            # A check acts on some services only: its faults add to the last tick's, never clear them.
                            failed = failed or any(o.error for o in acted)
                            if stop.requested:
                                self.log.info("SIGTERM: stopped after the reclaim, the Lease given back")
                                return 1 if failed else 0
            except StopRequested:  # between ticks: nothing is held, nothing is half written
                return 0


def serve_metrics_or_warn(render: Callable[[], str], port: int, log: Logger) -> bool:
    """Serve the histograms on `port`; a port that cannot be bound is one warning, never the gate's failure.

    The page is advisory: lending and returning GPUs must not stop because another process holds the port (pods
    sharing one network namespace, as on the local control plane, or a second gate process).
    """
    from offhours.scripts.gate.metrics_server import serve_metrics

    try:
        serve_metrics(render, port)
    except OSError as err:
        log.warning(f"the return path's metrics are not served: port {port}: {err.strerror or err}")
        return False
    return True


def run_from_config(config_path: str, seconds: float | None = None, dry_run: bool = False, *, once: bool = False,
                    metrics_port: int | None = None) -> int:
    """Load the gate configuration at `config_path`, connect to the cluster and run the loop; return the exit code.

    A configuration that does not validate is its message on stderr and exit 2; any other expected
    error (no Kubernetes configuration, an API server that answers with an error or not at all) is
    one line as for every `offhours` command (`cluster.errors.run_explained`), never a traceback.
    With `metrics_port`, the return path's histograms are served at /metrics on that port.
    """
    from offhours.scripts.cluster.errors import run_explained

    return run_explained("gate", lambda: _run(config_path, seconds, dry_run, once, metrics_port))


def _run(config_path: str, seconds: float | None, dry_run: bool, once: bool, metrics_port: int | None) -> int:
    from offhours.scripts.cluster.kube import KubeCluster, load_client_config
    from offhours.scripts.config.loader import load_config
    from offhours.scripts.gate.controller import store_progress
    from offhours.scripts.gate.return_metrics import ReturnMetrics
    from offhours.scripts.metrics.sources import source_from_config
    from offhours.scripts.policy.config import ConfigError

    try:
        config = load_config(config_path)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    load_client_config()
    gate = Gate(config, KubeCluster(), source_from_config(config.metrics), progress=store_progress)
    watch = ReturnWatch(gate, ReturnMetrics(s.name for s in config.services))
    if metrics_port is not None:
        serve_metrics_or_warn(watch.metrics.render, metrics_port, gate.log)
    return TickLoop(gate, seconds=seconds, once=once, dry_run=dry_run, watch=watch).run()
