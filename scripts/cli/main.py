"""The `offhours` command line."""

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from offhours.scripts.cli import check, check_parameters, console, demo, jobs, schedule
from offhours.steps.contract import OFFHOURS_IMAGE

Command = Callable[[argparse.Namespace], int]
MIN_TICK_SECONDS = 5.0  # the gate never ticks more often than this, however many workflows end


def _render(args: argparse.Namespace) -> int:
    from offhours.scripts.policy.config import ConfigError
    from offhours.workflows.render import write

    try:
        text = Path(args.gate_config).read_text() if args.gate_config else None
        paths = write(Path(args.out), text, args.image, args.console)
    except OSError as err:
        print(f"render: cannot read {args.gate_config}: {err.strerror}", file=sys.stderr)
        return 2
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


def _validate(args: argparse.Namespace) -> int:
    import json

    from offhours.scripts.validate import load_documents, validate_documents

    docs, problems = load_documents(args.paths)
    problems += validate_documents(docs)
    failing = [p for p in problems if p.severity == "error" or args.strict]
    if args.output == "json":
        print(json.dumps([{"file": p.file, "document": p.document, "path": p.path, "severity": p.severity,
                           "message": p.message} for p in problems], indent=2))
    else:
        for problem in problems:
            print(problem)
    errors = sum(p.severity == "error" for p in problems)
    if problems:
        print(f"{errors} error(s), {len(problems) - errors} warning(s) in {len({p.file for p in problems})} file(s)"
              + (" (--strict: warnings fail)" if args.strict and len(problems) > errors else ""), file=sys.stderr)
    if failing:
        return 1
    print(f"ok: {len(docs)} document(s) valid", file=sys.stderr)
    return 0


def _gate(args: argparse.Namespace) -> int:
    from offhours.scripts.cluster.kube import KubeCluster, load_client_config
    from offhours.scripts.gate.controller import Gate, store_progress
    from offhours.scripts.metrics.sources import source_from_config
    from offhours.scripts.policy.config import ConfigError, load_config
    from offhours.scripts.gate.shutdown import GracefulStop

    try:
        config = load_config(args.config)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    load_client_config()
    cluster = KubeCluster()
    gate = Gate(config, cluster, source_from_config(config.metrics), progress=store_progress)
    deadline = time.monotonic() + args.for_seconds if args.for_seconds else None
    with GracefulStop().installed() as stop:  # a deleted gate pod finishes its tick and gives the Lease back
        while True:
            started = time.monotonic()
            with stop.tick():
                outcomes = gate.tick(dry_run=args.dry_run)
            failed = any(o.error for o in outcomes)
            next_tick = started + config.tick_seconds
            if stop.requested:
                print("SIGTERM: stopped after the tick, the Lease given back", file=sys.stderr)
            if stop.requested or args.once or args.dry_run or (deadline is not None and next_tick > deadline):
                return 1 if failed else 0
            # Between ticks, watch the workflows: a job that ended gets its replicas back to serving at once.
            time.sleep(max(0.0, started + MIN_TICK_SECONDS - time.monotonic()))
            cluster.wait_for_workflow_change(config.workflow_namespace, next_tick - time.monotonic())


def _return_gpus(args: argparse.Namespace) -> int:
    import os

    from offhours.scripts.cluster.base import ClusterError
    from offhours.scripts.cluster.kube import KubeCluster, load_client_config
    from offhours.scripts.gate.exit_hook import return_gpus

    namespace = args.namespace or os.environ.get("OFFHOURS_NAMESPACE")
    if not namespace:
        print("return-gpus: --namespace (or $OFFHOURS_NAMESPACE) is required", file=sys.stderr)
        return 2
    load_client_config()
    try:
        return_gpus(KubeCluster(), workflow_namespace=namespace, workflow_name=args.workflow_name,
                    status=args.status, failures=args.failures)
    except ClusterError as err:
        print(f"return-gpus: {err}", file=sys.stderr)
        return 1
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not 1 or more")
    return value


def _simulate(args: argparse.Namespace) -> int:
    import dataclasses

    from offhours.scripts.simulate.fleet import FleetError, default_fleet, generated_jobs, load_fleet, load_jobs
    from offhours.scripts.simulate.report import simulate, text_table, write_json, write_plot
    from offhours.scripts.simulate.trace import TraceError, load_trace

    try:
        trace = load_trace(args.trace)
        fleet = load_fleet(args.fleet) if args.fleet else default_fleet(trace)
        jobs = load_jobs(args.jobs) if args.jobs else generated_jobs(fleet)
    except (TraceError, FleetError) as err:
        print(err, file=sys.stderr)
        return 2
    known = {s.name for s in fleet.services}
    unknown = sorted({j.service for j in jobs} - known)
    if unknown:
        print(f"jobs: service(s) {', '.join(unknown)} not in the fleet ({', '.join(sorted(known))})", file=sys.stderr)
        return 2
    if args.price is not None:
        fleet = dataclasses.replace(fleet, gpu_hour_price=args.price)
    for out in filter(None, (args.json, args.plot)):  # e.g. build/, which git ignores
        Path(out).parent.mkdir(parents=True, exist_ok=True)
    result = simulate(trace, fleet, jobs, workers=args.workers)
    print(text_table(result, fleet.gpu_hour_price))
    if args.json:
        write_json(result, Path(args.json))
    if args.plot:
        write_plot(result, Path(args.plot))
    return 0


def _report(args: argparse.Namespace) -> int:
    import json

    from offhours.scripts.cli.errors import default_namespace
    from offhours.scripts.cluster.base import ClusterError
    from offhours.scripts.cluster.kube import KubeCluster, load_client_config
    from offhours.scripts.policy.config import ConfigError, load_config
    from offhours.scripts.pool.usage import render_table, usage

    gpus: dict[str, int] = {}
    namespace = args.namespace
    if args.config:
        try:
            config = load_config(args.config)
        except ConfigError as err:
            print(err, file=sys.stderr)
            return 2
        gpus = {s.name: s.gpus_per_replica for s in config.services}
        namespace = namespace or config.workflow_namespace
    load_client_config()
    try:
        workflows = KubeCluster().list_workflows(namespace or default_namespace())
    except ClusterError as err:
        print(f"report: {err}", file=sys.stderr)
        return 1
    rows = usage(workflows, gpus)
    print(render_table(rows, args.price))
    if args.json:
        Path(args.json).write_text(json.dumps([{
            "service": r.service, "month": r.month, "jobs": len(r.run_ids), "workflows": r.workflows,
            "preemptions": r.preemptions, "gpuHoursUsed": r.gpu_hours_used, "gpuHoursLent": r.gpu_hours_lent,
            "equivalentGpus": r.equivalent_gpus(), "saving": r.gpu_hours_used * args.price} for r in rows], indent=2))
    return 0


def _submit(args: argparse.Namespace) -> int:
    from offhours.scripts.cli.errors import default_namespace
    from offhours.scripts.cluster.kube import KubeCluster, load_client_config
    from offhours.scripts.policy.config import ConfigError, load_config
    from offhours.scripts.cluster.parked import GROUP, VERSION, SubmitError, parked_workflow, parse_params

    try:
        params = parse_params(args.param or [])
        services = {s.name for s in load_config(args.config).services} if args.config else None
        load_client_config()
        args.namespace = args.namespace or default_namespace()
        cluster = KubeCluster()
        template = cluster.custom.get_namespaced_custom_object(GROUP, VERSION, args.namespace, "workflowtemplates",
                                                               args.template)
        body = parked_workflow(template, params, args.namespace, args.priority, services)
    except (SubmitError, ConfigError) as err:
        print(f"submit: {err}", file=sys.stderr)
        return 2
    created = cluster.custom.create_namespaced_custom_object(GROUP, VERSION, args.namespace, "workflows", body)
    print(f"{created['metadata']['name']} parked: the gate admits it when {body['metadata']['labels']['offhours.io/service']}"
          f" can lend {body['metadata']['labels']['offhours.io/replicas']} replica(s)")
    return 0


def parser() -> argparse.ArgumentParser:
    """Build the argument parser of `offhours`."""
    root = argparse.ArgumentParser(
        prog="offhours",
        description="Lend idle LLM-inference GPUs to research jobs; give them back when traffic returns.",
    )
    sub = root.add_subparsers(dest="command", required=True)

    render = sub.add_parser("render", help="write every manifest of the library and a kustomization.yaml")
    render.add_argument("--out", required=True, help="folder to write into (created if missing)")
    render.add_argument("--gate-config", help="gate configuration: installed as the gate's ConfigMap; its "
                        "Deployments and namespaces shape the RBAC (default: the bundled example)")
    render.add_argument("--image", default=OFFHOURS_IMAGE, help="offhours image of the launcher, the parameter "
                        f"check, the exit hook and the gate (default: {OFFHOURS_IMAGE})")
    render.add_argument("--console", action="store_true", help="also the web console: its Deployment, Service, "
                        "ServiceAccount and read-only Roles (in the serving namespace)")
    render.set_defaults(func=_render)

    validate = sub.add_parser("validate", help="check Argo manifests: v4.0.5 CRD schemas and reference lint")
    validate.add_argument("paths", nargs="+", help="YAML/JSON files or folders (multi-document YAML allowed)")
    validate.add_argument("--strict", action="store_true", help="fail on warnings too (likely mistakes Argo accepts)")
    validate.add_argument("-o", "--output", choices=["text", "json"], default="text", help="text (default) or JSON")
    validate.set_defaults(func=_validate)

    gate = sub.add_parser("gate", help="lend idle serving replicas to parked research jobs; reclaim them on load")
    gate.add_argument("--config", required=True, help="gate configuration (YAML, schemas/gate-config.schema.json)")
    gate.add_argument("--once", action="store_true", help="run one tick and exit")
    gate.add_argument("--for", dest="for_seconds", type=float, metavar="SECONDS",
                      help="tick every tickSeconds until SECONDS have passed, then exit (what each CronWorkflow run does)")
    gate.add_argument("--dry-run", action="store_true", help="print the plan of one tick; change nothing")
    gate.set_defaults(func=_gate)

    submit = sub.add_parser("submit", help="create a research workflow from a template, parked until the gate "
                            "admits it")
    submit.add_argument("template", help="WorkflowTemplate name, e.g. offhours-llm-pipeline or offhours-job")
    submit.add_argument("-p", "--param", action="append", help="workflow parameter name=value (repeatable)")
    submit.add_argument("-n", "--namespace", help="workflow namespace (default: the kubeconfig context's, else the "
                        "gate config's research namespace)")
    submit.add_argument("--priority", type=int, default=0, help="admission priority (higher first)")
    submit.add_argument("--config", help="gate configuration: the service must be one of its services")
    submit.set_defaults(func=_submit)

    sim = sub.add_parser("simulate", help="replay a traffic trace through the gate's policy; compare with the "
                         "fixed nightly window and an oracle (default: the bundled 14-day trace)")
    sim.add_argument("--trace", help="per-minute CSV: minute,requests,input_tokens,output_tokens (default: bundled)")
    sim.add_argument("--fleet", help="fleet file (YAML/JSON, schemas/fleet.schema.json); default: calibrated fleet")
    sim.add_argument("--jobs", help="research jobs file (schemas/jobs.schema.json); default: a generated queue")
    sim.add_argument("--price", type=float, help="GPU-hour price for the saving (default: the fleet's, 2.0)")
    sim.add_argument("--json", help="write the reports as JSON here")
    sim.add_argument("--plot", help="write a PNG of load, capacity in service and GPUs lent here")
    sim.add_argument("--workers", type=_positive_int, help="processes for the services' replays (default: one per "
                     "CPU for 8 services or more, else 1; the result is the same for any number)")
    sim.set_defaults(func=_simulate)

    rep = sub.add_parser("report", help="GPU-hours lent and used, jobs, preemptions and saving, per service and "
                         "month, from the cluster's offhours workflows")
    rep.add_argument("--namespace", help="workflow namespace (default: the config's, else the kubeconfig "
                     "context's, else the bundled gate config's)")
    rep.add_argument("--config", help="gate configuration (for GPUs per replica and the namespace)")
    rep.add_argument("--price", type=float, default=2.0, help="GPU-hour price for the saving (default 2.0)")
    rep.add_argument("--json", help="write the rows as JSON here")
    rep.set_defaults(func=_report)

    check.register(sub)
    demo.register(sub)
    check_parameters.register(sub)

    ret = sub.add_parser("return-gpus", help="exit hook: mark a finished workflow as having returned its replicas "
                         "(the gate scales serving back)")
    ret.add_argument("--workflow", "--workflow-name", dest="workflow_name", required=True)
    ret.add_argument("--status", required=True, help="{{workflow.status}}")
    ret.add_argument("--failures", default="[]", help="{{workflow.failures}}")
    ret.add_argument("--namespace", help="namespace of the workflow (default: $OFFHOURS_NAMESPACE)")
    ret.set_defaults(func=_return_gpus)

    jobs.register(sub)
    console.register(sub)
    schedule.register(sub)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `offhours` command line; return its exit code."""
    from offhours.scripts.cli.errors import run_command

    args = parser().parse_args(argv)
    func: Command = args.func
    return run_command(func, args)


if __name__ == "__main__":
    sys.exit(main())
