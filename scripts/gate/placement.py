"""The gate's placement steps: mark which serving replicas a lower removes, and take back what nothing can use.

Two hooks in the tick (marked `# hook: placement` in controller.py), the logic all here and in the pure
policy/placement.py:

- `mark_removals`, just before a lower of serving: the replicas whose removal frees whole nodes get the
  lowest `controller.kubernetes.io/pod-deletion-cost`, so the ReplicaSet controller deletes those. Advisory:
  any failure (no right to patch pods, a read refused) leaves the lower as it was before this existed (the
  ReplicaSet chooses) and says so; it never stops the lower, which the decision already made safe.
- `gang_check`, on the plan: a job is admitted only when every one of its pods fits on the free GPUs per node
  after the service's own scale-down (policy/placement.py `gang_admissions`); otherwise nothing is lent for it.
  It needs the nodes' GPUs: where the gate may not read nodes (its RBAC is namespaced; a `get nodes`
  ClusterRole is the operator's opt-in), the plan stays as it was, as before this existed, and the log says so.
- `park_unschedulable`, before the plan: an admitted job with a pod the scheduler found no node for, for
  longer than `UNSCHEDULABLE_BOUND_SECONDS` on the API server's clock, gets a `problem` naming that pod and
  the scheduler's words; the plan then stops it, parks it again (a gang that never ran whole loses no work;
  a part that ran resumes from its checkpoints) and gives its replicas back, as for any admitted job with a problem.

Without the right to read nodes (the gate's RBAC is namespaced), a node's GPUs are taken to be those its
pods in the serving and research namespaces hold: it can be found empty only when those are all replicas
being removed. GPU pods of other namespaces are not seen.
"""

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from offhours.scripts.cluster.base import Deployment
from offhours.scripts.policy.placement import (
    GATE_MARK_CEILING,
    Node,
    Shape,
    choose_removals,
    deletion_costs,
    free_gpus,
    gang_admissions,
    job_shape,
    shape_arguments,
    whole_nodes,
)
from offhours.scripts.policy.plan import ADMITTED, Job, Plan

# How long an admitted job's pod may stay unschedulable before its admission is undone: longer than the
# scheduler's retry of an unschedulable pod (at most 5 minutes by default, sooner on any cluster change)
# would waste lent GPUs for nothing; a tick or two of slack covers pods that wait for the serving pods
# being removed to end (their grace).
UNSCHEDULABLE_BOUND_SECONDS = 300.0


def mark_removals(cluster: Any, dep: Deployment, count: int, research_namespace: str) -> str:
    """Mark the `count` replicas a lower of `dep` should remove; return what was done, in one sentence."""
    try:
        replicas, costs = cluster.serving_replicas(dep)
        count = min(count, len(replicas))
        if count <= 0:
            return ""
        names = sorted({r.node for r in replicas})
        nodes = cluster.gpu_nodes(names)
        held = cluster.gpus_held((dep.namespace, research_namespace), names)
        seen = "" if nodes is not None else " (nodes not readable: their GPUs taken from the pods seen)"
        nodes = nodes or {}
        placed = [nodes.get(n) or Node(n, min(held.get(n, 0), 1024)) for n in names]
        free = free_gpus(placed, held)
        removal = choose_removals(placed, replicas, {dep.service: count}, free)
        writes = deletion_costs(removal, costs)
        # Old marks off first: while both exist, an old one could rank below a new one.
        for pod, cost in sorted(writes.items(), key=lambda kv: kv[1] is not None):
            if not cluster.set_deletion_cost(dep.namespace, pod, cost):
                return (f"may not patch pods in {dep.namespace} (no RBAC for pod-deletion-cost): the ReplicaSet "
                        f"chooses which {count} replica(s) go")
    except Exception as err:  # noqa: BLE001 - advisory: the lower goes ahead as it did before placement existed
        return f"could not mark the replicas to remove ({type(err).__name__}: {str(err)[:200]}): the ReplicaSet chooses"
    after = dict(free)
    for r in removal:
        after[r.node] += r.gpus
    return (f"marked {', '.join(r.name for r in removal)} to go first: {whole_nodes(placed, after)} whole node(s) "
            f"free after the lower{seen}")


def unmark_removals(cluster: Any, dep: Deployment) -> str:
    """Take the gate's marks off `dep`'s replicas (a lower that did not land); return what was done, or "".

    Advisory, as the marks are: a failure is said, never raised. Costs others wrote are left alone.
    """
    try:
        _, costs = cluster.serving_replicas(dep)
        marked = sorted(pod for pod, cost in costs.items() if cost is not None and cost < GATE_MARK_CEILING)
        for pod in marked:
            cluster.set_deletion_cost(dep.namespace, pod, None)
    except Exception as err:  # noqa: BLE001 - advisory: the next lower's marks replace them
        return f"could not take the marks off ({type(err).__name__}: {str(err)[:200]})"
    return f"marks taken off {', '.join(marked)}: the lower did not land" if marked else ""


def park_unschedulable(cluster: Any, namespace: str, jobs: Sequence[Job], now: float,
                       bound: float | None = None) -> tuple[list[Job], list[str]]:
    """Return the jobs, each admitted one whose pod found no node for longer than `bound` given a problem, and why.

    `now` is the API server's time, as the pods' conditions are dated. A read that fails leaves the job as it is.
    `bound`: None, `UNSCHEDULABLE_BOUND_SECONDS` as it is when called.
    """
    bound = UNSCHEDULABLE_BOUND_SECONDS if bound is None else bound
    out: list[Job] = []
    why: list[str] = []
    admitted = {j.name: j.uid for j in jobs if j.state == ADMITTED and j.problem is None}  # its pods: owned by it
    try:
        pending = cluster.unschedulable_pods(namespace, admitted) if admitted else {}
    except Exception:  # noqa: BLE001 - advisory: the next tick reads again
        pending = {}
    for job in jobs:
        late = [(name, since, message) for name, since, message in pending.get(job.name, ()) if now - since > bound]
        if job.state != ADMITTED or job.problem is not None or not late:
            out.append(job)
            continue
        name, since, message = min(late, key=lambda p: p[1])
        problem = (f"its pod {name} found no node for {now - since:.0f} s (bound {bound:.0f} s): "
                   f"{message or 'the scheduler gave no reason'}")
        out.append(replace(job, problem=problem))
        why.append(f"workflow {namespace}/{job.name} was admitted but {problem}; stopped, parked again and its "
                   f"{job.replicas} replica(s) given back (it resumes from its checkpoints when admitted again)")
    return out, why


# How long a job admitted behind a waiting larger one may keep the head's nodes (the backfill bound): one
# reclaim check and a stop's grace, so the head waits at most that long for GPUs a smaller job took.
BACKFILL_BOUND_SECONDS = 300.0


def gang_check(cluster: Any, dep: Deployment, p: Plan, research_namespace: str) -> tuple[Plan, str]:
    """Return the plan with only the admissions whose pods all fit, and what was done (one sentence, or "")."""
    if not p.admit:
        return p, ""
    try:
        replicas, _ = cluster.serving_replicas(dep)
        if not replicas:
            return p, ""  # no replica bound to a node: nothing to place (and nothing a lower would free)
        names = sorted({r.node for r in replicas})
        nodes = cluster.gpu_nodes(names)
        if nodes is None:
            return p, "may not read nodes (no RBAC): admissions are not checked for whole-gang fit"
        held = cluster.gpus_held((dep.namespace, research_namespace), names)
        shapes: dict[str, Shape] = {}
        unread: list[str] = []
        for job in p.admit:
            wf = cluster.workflow(research_namespace, job.name) or {}
            shape = job_shape(shape_arguments(wf))
            if isinstance(shape, Shape):
                shapes[job.name] = shape
            else:
                unread.append(f"{job.name}: {shape}")
        placed = list(nodes.values())
        checked = gang_admissions(p, shapes, placed, replicas, free_gpus(placed, held), BACKFILL_BOUND_SECONDS)
    except Exception as err:  # noqa: BLE001 - advisory: the plan stands as it did before placement existed
        return p, f"could not check the admissions' fit ({type(err).__name__}: {str(err)[:200]})"
    dropped = [j.name for j in p.admit if j not in checked.admit]
    said = [f"not admitted, its pods would not all fit: {', '.join(dropped)}"] if dropped else []
    said += [f"shape not read ({'; '.join(unread)})"] if unread else []
    return checked, "; ".join(said)
