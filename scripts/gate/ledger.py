"""The gate's ledger: every object it lowered is written down before the lower, and given back whatever the config says.

`policy.ownership` decodes an entry; this module keeps the ledger in step with the gate's serving writes
(`before_lower`, `after_write`); `gate.release.return_stranded` gives back, once a tick, what no configured
service owns any more (`owned_by_tick`): a service renamed, moved to another scale target or removed.
"""

from collections.abc import Mapping

from offhours.scripts.gate.observe import describe
from offhours.scripts.gate.snapshot import Observed
from offhours.scripts.gate.tick_state import GateParts
from offhours.scripts.policy.ownership import LedgerRefusal, Lent, decode


class OwedElsewhere(RuntimeError):
    """A lower refused: the object still owes replicas lent under another service's name (returned first)."""


def before_lower(gate: GateParts, obs: Observed, baseline: int, read: int, value: int) -> None:
    """Write the lower into the ledger before it is made (a failure: no lower, as without its record).

    An entry of this object under another service's name is a lend not yet given back (the stranded
    return's): lowering on top of it would let this service's baseline forget it, so the lower is refused.
    """
    ns, uid = gate.config.namespace, obs.dep.uid
    text = gate.cluster.ledger(ns).get(uid)
    if text is not None:
        try:
            earlier = decode(uid, text)
        except LedgerRefusal as err:
            raise OwedElsewhere(f"{obs.dep.ref}: the ledger's entry of it is unreadable ({err}): not lowered") from None
        if earlier.service != obs.policy.name or earlier.target != obs.dep.text:
            raise OwedElsewhere(f"{obs.dep.ref} still owes {earlier.baseline} replicas lent for service "
                                f"{earlier.service}: given back before it is lowered again")
    entry = Lent(ns, obs.dep.text, uid, obs.policy.name, baseline, value, read)
    gate.cluster.write_ledger_entry(ns, uid, entry.to_json())


def after_write(gate: GateParts, obs: Observed, baseline: int | None, now_at: int) -> None:
    """Settle the ledger once a serving write is answered: the object at `now_at`; at its baseline, no entry.

    Best effort: an entry left in flight still reads right (`ownership.owed` takes both values as the gate's).
    """
    ns, uid = gate.config.namespace, obs.dep.uid
    try:
        if baseline is None or now_at >= baseline:
            gate.cluster.write_ledger_entry(ns, uid, None)
        else:
            gate.cluster.write_ledger_entry(ns, uid, Lent(ns, obs.dep.text, uid, obs.policy.name, baseline,
                                                          now_at).to_json())
    except Exception as err:  # noqa: BLE001 - the entry in flight is still read right
        gate.log.warning(f"could not settle the ledger's entry of {obs.dep.ref}: {describe(err)}", obs.policy.name)


def owned_by_tick(gate: GateParts, entry: Lent, observed: Mapping[str, tuple[str, str]]) -> bool:
    """Whether a configured service's tick owns this entry: the service it was lent for still names this object.

    `observed`: service -> (target text, UID) as this tick read it. A configured service whose read failed
    owns the entry while its configuration may still name the object (a labelled Deployment, or that name):
    its fail-safe gives back what its record says, and the next tick that reads it decides.
    """
    if entry.namespace != gate.config.namespace:
        return False
    if entry.service in observed:
        return observed[entry.service] == (entry.target, entry.uid)
    return any(p.name == entry.service and p.deployment in (None, entry.target) for p in gate.config.services)
