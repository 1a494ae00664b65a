"""A small pool with tenant-written annotations on one workflow: what the usage, CLI and console tests feed in."""

from datetime import datetime
from typing import Any

from offhours.scripts.pool.model import Pool, build_pool
from tests.support.access import may_all
from tests.support.pool_fixture import NOW, SERVING, chat_state, deployment, state_configmap, ts, workflow


def pool_of(*workflows: dict[str, Any]) -> Pool:
    return build_pool([state_configmap("chat", chat_state())], [deployment("chat", 8, 8, gpus=4)], list(workflows),
                      SERVING, now=NOW)


def running(annotations: dict[str, str]) -> dict[str, Any]:
    """`train`: 2 replicas x 4 GPUs of chat, admitted and running for the last 110 minutes."""
    return workflow("train", "chat", 2, "admitted", "Running", created=120, started=110,
                    annotations={"offhours.io/admitted-at": ts(110), **annotations})


def parked(annotations: dict[str, str]) -> dict[str, Any]:
    """`sweep`: parked (suspended, never admitted) for the last hour."""
    return workflow("sweep", "chat", 2, "parked", created=60, suspend=True, annotations=annotations)


class Reader:
    """A pool reader that returns one fixed pool."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self.access = may_all()  # the CLI's caller may act on every job: these tests are about what it prints

    def read(self, now: datetime | None = None, require_workflows: bool = False) -> Pool:
        return self._pool
