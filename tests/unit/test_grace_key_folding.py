"""A grace key spelt with a letter Go's JSON decoding folds to ASCII (the Kelvin sign, the long s).

Argo applies a podSpecPatch and decodes the pod spec with Go's encoding/json, which matches a field
name by Unicode simple case folding: `terminationGracePeriod\u017feconds` (a long s) and the Kelvin sign U+212A
are the ASCII field to it. Python's `str.lower` leaves them as they are; `str.casefold` folds them.
"""

from typing import Any

import pytest

from offhours.scripts.cluster.grace import own_grace

from .test_gate_controller import World, config

LONG_S = "terminationGracePeriod\u017feconds"


@pytest.mark.parametrize("key", [LONG_S, "TERMINATIONGRACEPERIOD\u017fECONDS", "TERMINATIONGRACEPERIODSECOND\u017f"],
                         ids=["long s", "upper", "last letter"])
@pytest.mark.parametrize("where", ["patch", "manifest"])
def test_a_grace_key_go_folds_to_the_field_reads_as_that_grace(key: str, where: str) -> None:
    """The fault: a grace key with a long s read as no grace at all, while Argo's pod gets a day to stop."""
    if where == "patch":
        spec: dict[str, Any] = {"workflowTemplateRef": {"name": "offhours-job"}, "podSpecPatch": f'{{"{key}": 86400}}'}
    else:
        spec = {"entrypoint": "main", "podSpecPatch": '{"terminationGracePeriodSeconds": 10}', "templates": [
            {"name": "main", "resource": {"action": "create", "manifest": f'{{"kind": "Pod", "spec": {{"{key}": 86400}}}}'}}]}
    found = own_grace({"spec": spec})
    assert found is not None and found[0] == 86400.0


def test_a_workflow_patching_its_pods_grace_under_a_folded_key_is_never_admitted() -> None:
    """The fault: the offhours template run with a workflow-wide patch whose grace key has a long s was admitted."""
    w = World(config(maxGraceSeconds=30))
    w.park("folded", replicas=2)
    w.wf("folded")["spec"]["podSpecPatch"] = f'{{"{LONG_S}": 86400}}'
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("folded") == "parked" and w.replicas() == 8, w.log.getvalue()
