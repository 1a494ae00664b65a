"""`offhours rerun RUN`: submit a new run with exactly the parameters and image references RUN ran with.

RUN is found by the one resolver of a job name (`offhours.scripts.cluster.resolve`), among the runs of
namespaces where the caller may create workflows (an access review, never a submitter label), as `cancel`,
`why` and `logs` find theirs. Read from RUN's provenance record (`offhours.scripts.runtime.provenance`): the
one its first workflow carries, or, when that workflow carries none (deleted, its copies left), the copy the
run's first step kept in its checkpoint store (`cli/provenance_source.py`): every parameter as submitted
(defaults included), each image by the digest its pods first reported where one was. Only the run id is new.
A run without a record, or whose record is not its own (oversized, malformed, another run's), is refused with
one line and nothing is created; so is anything `offhours submit` refuses (the same checks, the same words).
"""

import argparse
import secrets
import sys
from collections.abc import Callable, Sequence
from typing import Any

from offhours.scripts.cli.jobs import find_run
from offhours.scripts.cli.namespaces import Namespaces, add_flags
from offhours.scripts.cli.provenance_source import store_text, workflow_records
from offhours.scripts.cluster.access import RESUBMIT_JOB, AccessReviewer
from offhours.scripts.pool.model import Pool, RunView
from offhours.scripts.runtime.provenance import Provenance, ProvenanceError, decode

MAX_RUN_ID = 50


class RerunError(ValueError):
    """The run cannot be run again; says why and that nothing was created."""


def _none() -> tuple[str | None, str | None]:
    return None, None


def run_record(run: str, workflows: Sequence[tuple[str, str | None]],
               stored: Callable[[], tuple[str | None, str | None]] = _none) -> Provenance:
    """Return the provenance of `run`: its first workflow's record, with the digests its copies' records add.

    `workflows`: the run's workflows (name, provenance annotation or None), oldest first, as the resolver found
    them. `stored`: reads the record its store keeps (text or None, and why it could not be read), asked only
    when the first workflow carries none. Refused: no workflow, no record, a record that is not this run's: a
    run never reads another run's provenance.
    """
    if not workflows:
        raise RerunError(f"no workflow of run {run}: nothing to run again (`offhours jobs --all` lists them)")
    first, text = workflows[0]
    where = f"its first workflow {first}"
    if text is None:
        text, problem = stored()
        where = "its checkpoint store"
        if text is None and problem:
            raise RerunError(f"run {run} has no provenance record on its first workflow {first}, and its checkpoint "
                             f"store could not be read ({problem}): try again where the store is reachable; nothing "
                             "was created")
        if text is None:
            raise RerunError(f"run {run} has no provenance record on its first workflow {first} nor in its checkpoint "
                             "store (submitted otherwise than by `offhours submit`, or before it recorded one): its "
                             "parameters cannot be known exactly; nothing was created")
    try:
        record = decode(text, run)
    except ProvenanceError as err:
        raise RerunError(f"{err} (read from {where}); nothing was created") from None
    # The digests its pods reported are on its copies' records (a copy's first report is the run's first).
    for _, later_text in workflows[1:]:
        try:
            later = decode(str(later_text), run)
        except ProvenanceError:
            continue  # a copy without a record of its own adds nothing; the first record stays
        record = record.with_digests(later.digests)
    return record


def resolved_record(pool: Pool, name: str, where: Namespaces, access: AccessReviewer,
                    stored: Callable[[RunView], tuple[str | None, str | None]] = store_text) -> Provenance:
    """Return the record of the run `name` names, found by the one resolver among runs the caller may create in.

    CommandError (from `find_run`): no such run the caller may create workflows beside, or more than one.
    """
    run = find_run(pool, name, where, RESUBMIT_JOB, access)
    return run_record(run.run_id, workflow_records(run), lambda: stored(run))


def rerun_parameters(record: Provenance, run_id: str) -> dict[str, str]:
    """Return the parameters of the new run: the record's, images by their recorded digests, under `run_id`."""
    if run_id == record.run:
        raise RerunError(f"--run-id {run_id} is the run being run again: a rerun is a new run, give another id")
    params = record.pinned_parameters()
    params["run-id"] = run_id
    return params


def new_run_id(run: str) -> str:
    """Return a fresh run id for a rerun of `run` (a DNS label of at most MAX_RUN_ID characters)."""
    suffix = f"-r{secrets.token_hex(3)}"
    return f"{run[:MAX_RUN_ID - len(suffix)].rstrip('-')}{suffix}"


def _rerun(args: argparse.Namespace) -> int:
    from offhours.scripts.cli.connect import connect
    from offhours.scripts.cli.jobs import CommandError, _reader, read_pool
    from offhours.scripts.cli.namespaces import of_args
    from offhours.scripts.cli.submit import _gate, _refuse_a_live_run, _refuse_what_the_gate_never_admits
    from offhours.scripts.cli.text import printable
    from offhours.scripts.cluster.kube import KubeCluster
    from offhours.scripts.cluster.parked import SubmitError, misplaced_namespace, parked_workflow
    from offhours.scripts.names import ARGO_GROUP, ARGO_VERSION
    from offhours.scripts.policy.config import ConfigError

    try:
        where = of_args(args)
        reader = _reader(args)
        record = resolved_record(read_pool(args, reader=reader), args.run, where, reader.access)
        cluster = KubeCluster(connect())
        params = rerun_parameters(record, args.run_id or new_run_id(record.run))
        services, admits_from, said = _gate(args, cluster.core, where.serving)
        misplaced = misplaced_namespace(where.described(), where.research, admits_from, said, "rerun")
        if misplaced is not None:
            raise SubmitError(misplaced)
        template = cluster.custom.get_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, where.research,
                                                               "workflowtemplates", record.template)
        now = str((template.get("metadata") or {}).get("resourceVersion") or "")
        if record.template_version and now != record.template_version:
            print(f"rerun: note: WorkflowTemplate {printable(record.template)} changed since run {record.run} "
                  f"(resourceVersion {record.template_version}, now {now}): its steps may differ", file=sys.stderr)
        body = parked_workflow(template, params, where.research, args.priority, services)
        _refuse_a_live_run(params["run-id"], where, cluster.api)
        _refuse_what_the_gate_never_admits(args, cluster, where, body)
    except (RerunError, SubmitError, ConfigError, CommandError) as err:
        print(f"rerun: {printable(str(err))}", file=sys.stderr)
        return 2
    created = cluster.custom.create_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, where.research, "workflows", body)
    print(f"{created['metadata']['name']} parked in namespace {where.research}: run {params['run-id']}, a rerun of "
          f"{record.run} with its parameters and image references")
    return 0


def register(subparsers: Any) -> None:
    """Add `rerun` to the `offhours` command."""
    rerun = subparsers.add_parser("rerun", help="submit a new run with exactly the parameters and image digests of "
                                  "a run")
    rerun.add_argument("run", help="run id (or a workflow name of the run)")
    rerun.add_argument("--run-id", help="the new run's id (default: the run's id and a random suffix)")
    add_flags(rerun)
    rerun.add_argument("--priority", type=int, default=0, help="admission priority (higher first)")
    rerun.add_argument("--config", help="gate configuration: the service must be one of its services (default: the "
                       "configuration installed on the cluster)")
    rerun.set_defaults(func=_rerun)
