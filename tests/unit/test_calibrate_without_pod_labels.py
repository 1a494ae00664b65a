"""Series with neither an `instance` nor a `pod` label cannot be told apart by pod: no capacity per replica from them.

All of them were read as one pod, so calibrate divided the whole service's throughput while any
of its queues waited by one replica: a capacity per replica as many times too high as the service
had replicas, which would have the gate lend that many times too much.
"""

import numpy as np

from offhours.scripts.history.calibrate import estimate
from offhours.scripts.history.read import COLUMNS, NO_POD, ServiceHistory


def _service(pod: str, steps: int = 60) -> ServiceHistory:
    return ServiceHistory("chat", pod_work={pod: {c: np.full(steps, 600.0) for c in COLUMNS}},
                          pod_covered={pod: np.ones(steps, dtype=np.bool_)}, saturated={pod: np.ones(steps, dtype=np.bool_)},
                          complete=True)


def test_series_without_a_pod_label_give_no_estimate() -> None:
    est = estimate(_service(NO_POD), 60.0)
    assert est.rates is None
    assert "instance" in est.note and "pod" in est.note and "configured capacity stands" in est.note


def test_a_labelled_pod_still_gives_its_estimate() -> None:
    est = estimate(_service("chat-0:8000"), 60.0)
    assert est.rates is not None and est.rates["requests"] == 10.0
