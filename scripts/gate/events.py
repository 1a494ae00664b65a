"""The reasons of the Events the gate records, each on the serving Deployment it concerns.

`kubectl get events --field-selector reason=GPUsLent` (or a dashboard, an alert) finds them by
these strings, so they never change. The exit hook records no Event: it has no rights on serving
(it runs in the research namespace), it only labels its own workflow.
"""

from offhours.scripts.cluster.base import HOLD_REASON

GPUS_LENT = "GPUsLent"
"""A tick lent more of the Deployment's replicas to research jobs than were lent before it."""

GPUS_RECLAIMED = "GPUsReclaimed"
"""A tick took lent replicas back for serving, or reclaimed (its action) with nothing left lent."""

# The gate's RBAC names the one counted hold Event of each Deployment (cronworkflows/rbac.py), so
# the string lives with the other object names in cluster/base.py.
GATE_HOLD = HOLD_REASON
"""A tick left what is lent as it was: one Event per Deployment, its count raised at each repeat."""

REPLICAS_ADOPTED = "ReplicasAdopted"
"""Someone else set the replicas (or the autoscaler's maxReplicas): the gate took that value as the new baseline."""

GATE_TICK_FAILED = "GateTickFailed"
"""A Warning: the service's tick failed (observing, deciding or acting); enough in a row restore its baseline."""

REASONS = (GPUS_LENT, GPUS_RECLAIMED, GATE_HOLD, REPLICAS_ADOPTED, GATE_TICK_FAILED)
"""Every reason the gate records."""

AGGREGATED = frozenset({GATE_HOLD})
"""The reasons recorded as one Event per Deployment whose count rises, since they repeat every tick while nothing changes."""
