"""The bound on one tick's API calls (issue 31 §6), shared by the bounded-work test and the campaign.

A tick's calls are reads per service (lists, not gets, whatever tenants made), writes per service and per admission
of the gate (which its record bounds), and three budgets a tick for all services together: originals of parked
copies read, waiting reasons written, and stops of workflows the gate did not admit (two calls each: the parked
copy and the stop).
"""

from typing import Any

# Per service: Deployment, autoscaler, record, workflows, pods; the record's intent, lower and final writes; the
# serving writes; the Events; the templates list.
PER_SERVICE = 16
# Per admission of the gate (recorded, or made this tick): its admit or adopt, its stop and copy, how it ended.
PER_ADMISSION = 4
FIXED = 8  # the Lease (take, renew, release), its notes, the records' list, the GPU quota


def tick_call_bound(services: int, admissions: int, reads: int, writes: int, stops: int) -> int:
    """The most API calls one tick may make, given its services, the gate's admissions and its budgets."""
    return PER_SERVICE * services + PER_ADMISSION * admissions + reads + writes + 2 * stops + FIXED


def gate_call_bound(gate: Any, services: int, admissions: int) -> int:
    """`tick_call_bound` with the budgets `gate` runs with."""
    return tick_call_bound(services, admissions, gate.advisory_reads_per_tick, gate.advisory_writes_per_tick,
                           gate.research_writes_per_tick)
