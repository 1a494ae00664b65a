"""`offhours rerun RUN`: submit a new run with exactly the parameters and image references RUN ran with.

Read from RUN's provenance record (`offhours.scripts.runtime.provenance`), the one its first workflow
carries: every parameter as submitted (defaults included), each image by the digest its pods first
reported where one was. Only the run id is new. A run without a record, or whose record is not its own
(oversized, malformed, another run's), is refused with one line and nothing is created; so is anything
`offhours submit` refuses (the same checks, the same words).
"""

import argparse
import re
import secrets
import sys
from collections.abc import Sequence
from typing import Any

from offhours.scripts.cli.namespaces import add_flags
from offhours.scripts.cluster.workflow import run_identity
from offhours.scripts.names import ANNOTATION_PROVENANCE, LABEL_RUN_ID
from offhours.scripts.runtime.provenance import Provenance, ProvenanceError, decode

MAX_RUN_ID = 50
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")


class RerunError(ValueError):
    """The run cannot be run again; says why and that nothing was created."""


def run_record(workflows: Sequence[dict[str, Any]], run: str) -> Provenance:
    """Return the provenance of `run`: its first workflow's record, with the digests its copies' records add.

    `workflows`: those labelled with the run (or named so). Refused: none found, no record, a record that is
    not this run's: a run never reads another run's provenance.
    """
    if not workflows:
        raise RerunError(f"no workflow of run {run}: nothing to run again (`offhours jobs --all` lists them)")
    ordered = sorted(workflows, key=lambda w: (str(w["metadata"].get("creationTimestamp") or ""), w["metadata"]["name"]))
    first = ordered[0]
    own = run_identity(first).run_id or run
    text = (first["metadata"].get("annotations") or {}).get(ANNOTATION_PROVENANCE)
    if not text:
        raise RerunError(f"run {own} has no provenance record on its first workflow {first['metadata']['name']} "
                         "(submitted otherwise than by `offhours submit`, or before it recorded one): its parameters "
                         "cannot be known exactly; nothing was created")
    try:
        record = decode(str(text), own)
    except ProvenanceError as err:
        raise RerunError(f"{err}; nothing was created") from None
    # The digests its pods reported are on its copies' records (a copy's first report is the run's first).
    for wf in ordered[1:]:
        try:
            later = decode(str((wf["metadata"].get("annotations") or {}).get(ANNOTATION_PROVENANCE)), own)
        except ProvenanceError:
            continue  # a copy without a record of its own adds nothing; the first workflow's stays
        record = record.with_digests(later.digests)
    return record


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


def _workflows_of(cluster: Any, namespace: str, name: str) -> list[dict[str, Any]]:
    """Return the workflows of run `name`, or of the run of the workflow named `name`."""
    found: list[dict[str, Any]] = cluster.list_workflows(namespace, f"{LABEL_RUN_ID}={name}") \
        if _LABEL_VALUE.fullmatch(name) else []
    if found:
        return found
    wf = cluster.workflow(namespace, name)
    run = run_identity(wf).run_id if wf is not None else None
    return cluster.list_workflows(namespace, f"{LABEL_RUN_ID}={run}") if run else ([wf] if wf is not None else [])


def _rerun(args: argparse.Namespace) -> int:
    from offhours.scripts.cli.connect import connect
    from offhours.scripts.cli.namespaces import of_args
    from offhours.scripts.cli.submit import _gate, _refuse_a_live_run, _refuse_what_the_gate_never_admits
    from offhours.scripts.cli.text import printable
    from offhours.scripts.cluster.kube import KubeCluster
    from offhours.scripts.cluster.parked import SubmitError, misplaced_namespace, parked_workflow
    from offhours.scripts.names import ARGO_GROUP, ARGO_VERSION
    from offhours.scripts.policy.config import ConfigError

    try:
        where = of_args(args)
        cluster = KubeCluster(connect())
        record = run_record(_workflows_of(cluster, where.research, args.run), args.run)
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
    except (RerunError, SubmitError, ConfigError) as err:
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
