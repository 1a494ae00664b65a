"""The GPU quota the gate keeps in the research namespace equals what it has lent there, on serving's side of time.

Invariants: after a full tick the quota is the GPUs lent whose scale-down has landed; a reclaim lowers it right
after serving's raise and before any stop; a reclaim check between ticks never raises it.
"""

from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.policy.quota import Lending, landed_gpus, reclaimed_gpus, wanted_gpu_quota
from tests.unit.test_gate_controller import World as _World


def World(gpu_quota: bool = True) -> _World:  # noqa: N802 - the controller tests' world, quota kept or opted out
    import dataclasses

    w = _World()
    w.gate.config = dataclasses.replace(w.gate.config, research=dataclasses.replace(w.gate.config.research,
                                                                                      gpu_quota=gpu_quota))
    return w

lendings = st.builds(Lending, st.integers(1, 8), st.one_of(st.none(), st.integers(0, 20)), st.integers(0, 24),
                     st.integers(0, 24), st.integers(0, 24))


@given(st.lists(lendings, max_size=4), st.one_of(st.none(), st.integers(-1, 200)))
def test_a_full_pass_sets_what_has_landed_and_a_partial_one_only_lowers(ls: list[Lending], current: int | None) -> None:
    full = wanted_gpu_quota(current, ls, complete=True)
    landed = sum(landed_gpus(x) for x in ls)
    assert (current if full is None else full) == landed
    for x in ls:  # never more than serving gave up, by what it is set to and by what it runs
        if x.baseline is not None:
            assert landed_gpus(x) <= x.gpus_per_replica * max(0, x.baseline - x.serving_pods)
            assert landed_gpus(x) <= x.gpus_per_replica * max(0, x.baseline - x.at)
    partial = wanted_gpu_quota(current, ls, complete=False)
    if partial is not None and current is not None and current >= 0:
        assert partial < current and partial == max(0, current - sum(reclaimed_gpus(x) for x in ls))


def test_lending_raises_the_quota_only_after_the_scale_down_landed_and_a_reclaim_lowers_it_before_stops() -> None:
    w = World()
    assert w.tick() and w.cluster.gpu_quotas["research"] == 0  # nothing lent: research may start no GPU pod
    w.lend(2)  # chat: 8 -> 4 replicas of 4 GPUs, two jobs admitted
    assert w.cluster.gpu_quotas["research"] == 16
    calls = w.cluster.calls
    lowered = max(i for i, c in enumerate(calls) if c.startswith("set-gpu-quota research 16"))
    scaled = max(i for i, c in enumerate(calls) if c == "scale chat 4")
    assert scaled < lowered, "the quota rose before the scale-down it lends was written"
    start = len(calls)
    w.tick(chat=100.0)  # every replica needed back
    after = calls[start:]
    raise_at = next(i for i, c in enumerate(after) if c == "scale chat 8")
    quota_at = next(i for i, c in enumerate(after) if c.startswith("set-gpu-quota research"))
    stops = [i for i, c in enumerate(after) if c.startswith("stop")]
    assert raise_at < quota_at and all(quota_at < i for i in stops), after
    assert w.cluster.gpu_quotas["research"] == 0


def test_a_quota_that_cannot_be_written_is_a_warning_and_the_tick_goes_on() -> None:
    from offhours.scripts.cluster.base import ClusterError

    w = World()
    w.cluster.fail_next["set-gpu-quota"] = [ClusterError("HTTP 403 Forbidden")]
    out = w.tick()
    assert not any(o.failed for o in out.values())
    assert "could not keep the GPU quota of research" in w.log.getvalue()


def test_the_quotas_are_on_by_default_and_each_has_its_opt_out() -> None:
    from offhours.cronworkflows.admission import admission_manifests
    from offhours.scripts.names import WORKFLOW_QUOTA
    from offhours.scripts.policy.config import DEFAULT_MAX_WORKFLOWS
    from offhours.workflows.render import parse_gate_config_text

    from .test_admission_policies import CONFIG

    config = parse_gate_config_text(CONFIG)
    assert config.research.gpu_quota and config.research.max_workflows == DEFAULT_MAX_WORKFLOWS
    quota = admission_manifests(config)[f"resourcequota-lab-{WORKFLOW_QUOTA}.yaml"]
    assert quota["spec"]["hard"] == {"count/workflows.argoproj.io": str(DEFAULT_MAX_WORKFLOWS)}
    config = parse_gate_config_text(CONFIG + "research: {gpuQuota: false, maxWorkflows: null}\n")
    assert not config.research.gpu_quota and config.research.max_workflows is None
    assert not any(WORKFLOW_QUOTA in name for name in admission_manifests(config))


def test_with_the_gpu_quota_opted_out_the_gate_and_the_backstop_keep_no_quota() -> None:
    import io

    from offhours.scripts.backstop.restore import run_backstop

    from .test_backstop import LEASE

    w = World(gpu_quota=False)
    w.lend(2)
    run_backstop(w.cluster, "serving", clock=lambda: w.now + LEASE + 1, out=io.StringIO(), holder="b",
                 research_namespace="research")
    assert w.replicas() == 8 and "research" not in w.cluster.gpu_quotas
