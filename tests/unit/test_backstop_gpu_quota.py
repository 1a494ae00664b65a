"""With no gate, the backstop restores serving and sets the research namespace's GPU quota to zero."""

import io

from offhours.scripts.backstop.restore import run_backstop

from .test_backstop import LEASE
from .test_gpu_quota import World


def test_restoring_serving_with_no_gate_zeroes_the_gpu_quota_and_a_current_lease_leaves_it() -> None:
    w = World()
    w.lend(2)
    assert w.cluster.gpu_quotas["research"] == 16
    run_backstop(w.cluster, "serving", clock=lambda: w.now + 1, out=io.StringIO(), holder="b",
                 research_namespace="research")
    assert w.cluster.gpu_quotas["research"] == 16  # the gate ticks: nothing expired, the loan stands
    w.cluster.clock = w.now + LEASE + 1
    out = io.StringIO()
    done = run_backstop(w.cluster, "serving", clock=lambda: w.now + LEASE + 1, out=out, holder="b",
                        research_namespace="research")
    assert done and w.replicas() == 8 and w.cluster.gpu_quotas["research"] == 0
    assert "GPU quota of research set to 0" in out.getvalue()
    calls = w.cluster.calls
    last = max(i for i, c in enumerate(calls) if c == "set-gpu-quota research 0")
    assert last > max(i for i, c in enumerate(calls) if c == "scale chat 8")  # serving first
