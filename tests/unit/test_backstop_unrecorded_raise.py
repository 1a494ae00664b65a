"""The backstop's raise when neither of its record writes lands (a webhook's 403, the API failing meanwhile).

The gate notes a raise it could not record on its Lease, so that no tick takes it for an owner's change;
the backstop, holding the Lease while it runs, notes its own the same way: otherwise the next gate tick
reads its raise as someone else's, and the baseline grows by what had been lent, for good.
"""

from offhours.scripts.cluster.base import ClusterError

from .test_backstop import LEASE, backstop
from .test_gate_controller import World


def test_an_unrecorded_backstop_raise_is_not_taken_for_an_owners_change() -> None:
    w = World()
    w.lend(2)  # baseline 8, 4 lent
    w.cluster.fail_next["write-state"] = [ClusterError("configmaps: HTTP 403 Forbidden (webhook)") for _ in range(2)]
    done = backstop(w, LEASE + 1)
    assert [(d.service, d.value) for d in done] == [("chat", 8)] and w.replicas() == 8
    w.now += LEASE + 1
    w.tick()  # the gate is back, its writes land again
    assert w.record().baseline == 8, w.log.getvalue()
