"""Two races of a stop's park, on both adapters (the Kubernetes one against a fake Argo API, and the in-memory one).

- The workflow the tick listed is deleted and another made under its name before the park reads it: the gate
  copied the newcomer (a workflow it never admitted) and wrote that copy into the stopped run's lineage.
- The API server made the copy but its answer was lost (a timeout): the retried create met the copy under its
  name, whose UID the gate could not yet know, took it for a decoy, and made a second copy of the same stop.
"""

import copy
from typing import Any

import pytest
import urllib3

from offhours.scripts.cluster.base import ClusterError
from offhours.scripts.names import LABEL_COPY_OF
from tests.unit.test_kube_park_copy import JOB, Kube, Memory, original


def copies(h: Kube | Memory) -> list[str]:
    return [n for n in h.names() if n != "train"]


@pytest.mark.parametrize("kind", [Kube, Memory])
def test_a_workflow_made_under_the_stopped_ones_name_is_not_copied(kind: type[Kube | Memory]) -> None:
    """Fault: the park read the workflow by name alone and copied whatever now bore it."""
    h = kind()
    newcomer = original()
    newcomer["metadata"]["uid"] = "u-newcomer"  # `train` was deleted and made again since the tick listed it
    h.add(newcomer)
    with pytest.raises(ClusterError, match="another workflow"):
        h.cluster.park_copy("research", JOB, (), "t0k3n")
    assert copies(h) == []


@pytest.mark.parametrize("kind", [Kube, Memory])
def test_the_copy_the_same_stop_made_under_its_name_is_found_by_its_token(kind: type[Kube | Memory]) -> None:
    """What the lost answer leaves: the copy, under its usual name, with this stop's token; it is the copy."""
    h = kind()
    h.add(original())
    first = h.cluster.park_copy("research", JOB, (), "t0k3n")
    assert h.cluster.park_copy("research", JOB, (), "t0k3n") == first  # its UID not yet recorded anywhere
    assert copies(h) == ["train-p1"]
    with_other_token = h.cluster.park_copy("research", JOB, (), "other")  # another stop's: not this one's copy
    assert with_other_token != first and len(copies(h)) == 2


def test_a_create_whose_answer_was_lost_makes_one_copy() -> None:
    """Fault: the Kubernetes adapter retried a create the server had done; the second try made a second copy."""
    h = Kube()
    h.add(original())
    h.cluster.sleep = lambda _s: None
    create = h.api.create_namespaced_custom_object
    lost: list[bool] = []

    def lossy(group: str, version: str, ns: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = create(group, version, ns, plural, copy.deepcopy(body))
        if not lost:
            lost.append(True)
            raise urllib3.exceptions.ReadTimeoutError(None, "/apis", "read timed out")  # type: ignore[arg-type]
        return answer

    h.api.create_namespaced_custom_object = lossy  # type: ignore[method-assign]
    made = h.cluster.park_copy("research", JOB, (), "t0k3n")
    assert copies(h) == ["train-p1"] and made.name == "train-p1"
    assert h.api.workflows["train-p1"]["metadata"]["labels"][LABEL_COPY_OF] == "u-train"
