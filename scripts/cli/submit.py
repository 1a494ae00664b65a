"""`offhours submit`: a research workflow from a WorkflowTemplate, parked until the gate admits it.

The service must be one of the gate configuration's: `--config`'s when given, else the one installed
on the cluster (the ConfigMap offhours-gate-config in the serving namespace); with neither readable,
a note says the service was not checked and the gate decides. The same configuration names the one
namespace the gate admits from (`workflowNamespace`): a submission to another is refused.
"""

import argparse
import sys
from typing import Any

from offhours.scripts.cli.namespaces import add_flags
from offhours.scripts.names import LABEL_REPLICAS, LABEL_RUN_ID, LABEL_SERVICE


def _gate(args: argparse.Namespace, core: Any, serving_namespace: str) -> tuple[set[str] | None, str | None, str]:
    """Return the services a submission may name and the namespace the gate admits from, and which configuration said so.

    (None, None, ''): not checked, with a note why.
    """
    from offhours.scripts.cli.installed_config import installed_gate_config
    from offhours.scripts.cli.text import printable

    if args.config:
        from offhours.scripts.config.loader import load_config

        config = load_config(args.config)
        return {s.name for s in config.services}, config.workflow_namespace, f"--config {args.config}"
    installed, why = installed_gate_config(core, serving_namespace)
    if installed is None:
        print(f"submit: note: the service is not checked ({printable(why)}); pass --config to check it here",
              file=sys.stderr)
        return None, None, ""
    return ({s.name for s in installed.services}, installed.workflow_namespace,
            f"the installed configuration, ConfigMap {serving_namespace}/offhours-gate-config")


def _refuse_a_live_run(run_id: str, where: Any, api: Any) -> None:
    """Raise SubmitError if a workflow of `run_id` is still running or parked (or that cannot be ruled out).

    One run never runs twice at once: the gate stops a second copy, but only after it was created and
    perhaps admitted. Refused here, nothing is created (the console's form refuses the same way).
    """
    from offhours.scripts.cluster.parked import SubmitError
    from offhours.scripts.pool.reader import PoolReader, PoolReadError
    from offhours.scripts.pool.views import live_copies, live_run_message

    try:
        pool = PoolReader(where.serving, where.research, api).runs()
    except PoolReadError as err:
        raise SubmitError(f"{run_id}: cannot check it for a live workflow ({err}); nothing was created") from None
    live = live_copies(pool, run_id)
    if live:
        raise SubmitError(live_run_message(run_id, live))


def _refuse_what_the_gate_never_admits(args: argparse.Namespace, cluster: Any, where: Any, body: dict[str, Any]) -> None:
    """Raise SubmitError with the gate's words if it would never admit `body` (its admission checks, the same code)."""
    from offhours.scripts.cli.installed_config import installed_gate_config
    from offhours.scripts.cli.submit_admission import never_admitted
    from offhours.scripts.cluster.parked import SubmitError
    from offhours.scripts.config.loader import load_config

    config = load_config(args.config) if args.config else installed_gate_config(cluster.core, where.serving)[0]
    if config is None:
        return  # nothing to check against: already noted by _gate
    try:
        templates = cluster.workflow_templates(where.research)
    except Exception:  # noqa: BLE001 - unreadable: the template's grace is not checked here; the gate still checks it
        templates = None
    problem = never_admitted(body, config, templates)
    if problem is not None:
        raise SubmitError(f"{problem}. Nothing was created")


def _template(cluster: Any, namespace: str, name: str) -> dict[str, Any]:
    """Read WorkflowTemplate `name`; SubmitError when it is not there (or unreadable), or lacks what offhours needs."""
    from offhours.scripts.cluster.errors import describe_api_error
    from offhours.scripts.cluster.handles import ApiError
    from offhours.scripts.cluster.parked import SubmitError
    from offhours.scripts.cluster.template_needs import template_refusal
    from offhours.scripts.names import ARGO_GROUP, ARGO_VERSION

    try:
        template = cluster.custom.get_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, namespace,
                                                               "workflowtemplates", name)
    except ApiError as err:
        if err.status == 404:
            raise SubmitError(f"no WorkflowTemplate {name!r} in namespace {namespace!r} (`argo template list -n "
                              f"{namespace}` lists them)") from None
        raise SubmitError(describe_api_error(f"get workflowtemplate {namespace}/{name}", err)) from None
    refusal = template_refusal(template)
    if refusal is not None:
        raise SubmitError(refusal)
    return dict(template)


def _submit(args: argparse.Namespace) -> int:
    from offhours.scripts.cli.connect import connect
    from offhours.scripts.cli.namespaces import of_args
    from offhours.scripts.cli.schedule import MAX_PRIORITY
    from offhours.scripts.cluster.kube import KubeCluster
    from offhours.scripts.cluster.parked import SubmitError, misplaced_namespace, parked_workflow, parse_params
    from offhours.scripts.names import ARGO_GROUP, ARGO_VERSION
    from offhours.scripts.policy.config import ConfigError

    try:
        if abs(args.priority) > MAX_PRIORITY:
            raise SubmitError(f"--priority {args.priority}: expected -{MAX_PRIORITY} to {MAX_PRIORITY}")
        params = parse_params(args.param or [])
        where = of_args(args)  # a wrong --config is named before any cluster is looked for
        cluster = KubeCluster(connect())
        services, admits_from, said = _gate(args, cluster.core, where.serving)
        # The gate admits the workflows of one namespace: parked anywhere else, a job waits for ever.
        misplaced = misplaced_namespace(where.described(), where.research, admits_from, said, "submit")
        if misplaced is not None:
            raise SubmitError(misplaced)
        template = _template(cluster, where.research, args.template)
        body = parked_workflow(template, params, where.research, args.priority, services)
        _refuse_a_live_run(str(body["metadata"]["labels"][LABEL_RUN_ID]), where, cluster.api)
        _refuse_what_the_gate_never_admits(args, cluster, where, body)
    except (SubmitError, ConfigError) as err:
        print(f"submit: {err}", file=sys.stderr)
        return 2
    created = cluster.custom.create_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, where.research, "workflows", body)
    from offhours.scripts.cli.text import printable

    for warning in mutable_image_warnings(body):
        print(f"submit: warning: {printable(warning)}", file=sys.stderr)

    print(f"{created['metadata']['name']} parked in namespace {where.research}: the gate admits it when "
          f"{printable(body['metadata']['labels'][LABEL_SERVICE])}"
          f" can lend {body['metadata']['labels'][LABEL_REPLICAS]} replica(s)")
    return 0


def mutable_image_warnings(body: dict[str, Any]) -> list[str]:
    """Return a warning for each image of the parked workflow `body` given by a mutable tag (from its record)."""
    from offhours.scripts.names import ANNOTATION_PROVENANCE
    from offhours.scripts.runtime.provenance import ProvenanceError, decode, mutable_tag_warning

    meta = body["metadata"]
    try:
        record = decode(meta["annotations"][ANNOTATION_PROVENANCE], meta["labels"][LABEL_RUN_ID])
    except (KeyError, ProvenanceError):
        return []
    return [w for name in record.images if (w := mutable_tag_warning(name, record.parameters.get(name, "")))]


def register(subparsers: Any) -> None:
    """Add `submit` to the `offhours` command."""
    submit = subparsers.add_parser("submit", help="create a research workflow from a template, parked until the gate "
                                   "admits it")
    submit.add_argument("template", help="WorkflowTemplate name, e.g. offhours-llm-pipeline or offhours-job")
    submit.add_argument("-p", "--param", action="append", help="workflow parameter name=value (repeatable)")
    add_flags(submit)
    submit.add_argument("--priority", type=int, default=0, help="admission priority (higher first)")
    submit.add_argument("--config", help="gate configuration: the service must be one of its services (default: the "
                        "configuration installed on the cluster)")
    submit.set_defaults(func=_submit)
