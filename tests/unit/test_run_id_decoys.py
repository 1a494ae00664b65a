"""A run id is a tenant-written label: another tenant's workflow that copies mine must not cost me my run.

`_duplicates` keeps, per run, the admitted workflow and stops every other running one of that run without
a parked copy. The fault: a tenant whose own job was admitted earlier relabels it with my run id, and my
admitted run was stopped for good. The run of an admitted workflow is now the one the gate's record holds
from its admission, whatever its label says since.
"""

from offhours.scripts.names import LABEL_COPY_OF, LABEL_RUN_ID

from .test_gate_controller import World

LOW = 10.0  # requests per second: two replicas needed of 8


def test_an_admitted_decoy_does_not_get_my_admitted_run_stopped_without_a_copy() -> None:
    w = World()
    w.park("theirs")  # admitted first: the older of the two
    w.now += 1
    w.park("mine")
    for _ in range(7):
        w.tick(chat=LOW)
    assert w.state("theirs") == "admitted" and w.state("mine") == "admitted", w.log.getvalue()
    w.wf("theirs")["metadata"]["labels"][LABEL_RUN_ID] = "mine"  # kubectl label --overwrite on their own workflow
    w.tick(chat=LOW)
    uid = w.wf("mine")["metadata"]["uid"]
    copies = [wf for wf in w.cluster.workflows.values() if wf["metadata"]["labels"].get(LABEL_COPY_OF) == uid]
    assert w.state("mine") == "admitted" or copies, w.log.getvalue()

