"""`offhours check`: verify an install on a live cluster, one line per check, each failure with its fix.

What it checks, in order (each line says ✓ or ✗; any ✗ makes the exit status 1):
the API server; Argo's CRDs and that their schema is Argo v4.0.5's; the serving and research
namespaces; the PriorityClass `offhours-best-effort`; the WorkflowTemplates; the ServiceAccounts;
what the gate's and the exit hook's ServiceAccounts may do, asked of the API server itself
(SubjectAccessReview); the admission policies, their bindings and the quotas as rendered (check_boundary.py);
the gate ConfigMap `offhours-gate-config`; each configured Deployment
present and ready; the metrics source reachable and returning vLLM series; the CronWorkflow
`offhours-gate` scheduled and its last run; where the optional web console is installed, that its
ServiceAccount has exactly the rights it uses (read its ConfigMaps, Deployments and workflows, review
tokens) and none it does not (pods, logs, secrets, any write), and that its NetworkPolicy is there.
"""

import argparse
import gzip
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from offhours.scripts.cli.check_boundary import boundary_checks
from offhours.scripts.cli.gate_health import TickFailure, Verdict, services_ticks, verdict
from offhours.scripts.cluster.handles import ApiError as ApiException
from offhours.scripts.cluster.handles import handles, subject_access_review
from offhours.scripts.config.loader import load_config, parse_config_text
from offhours.scripts.inputs.text import package_bytes
from offhours.scripts.names import (
    ARGO_GROUP,
    ARGO_VERSION,
    CONSOLE,
    EXIT_HOOK_SERVICE_ACCOUNT,
    FINISHED_PHASES,
    GATE_CONFIG_KEY,
    GATE_CONFIG_MAP,
    GATE_CRON_WORKFLOW,
    GATE_SERVICE_ACCOUNT,
    JOB_TEMPLATE,
    LABEL_SERVICE,
    LEASE_NAME,
    PIPELINE_TEMPLATE,
    PRIORITY_CLASS,
    RESEARCH_SERVICE_ACCOUNT,
    STEPS_TEMPLATE,
    state_configmap_name,
)
from offhours.scripts.policy.config import ConfigError, GateConfig
from offhours.scripts.policy.target import guessed_resource

CONFIG_MAP, CONFIG_KEY, CRON_WORKFLOW = GATE_CONFIG_MAP, GATE_CONFIG_KEY, GATE_CRON_WORKFLOW
GATE_SA, EXIT_HOOK_SA, RESEARCH_SA = GATE_SERVICE_ACCOUNT, EXIT_HOOK_SERVICE_ACCOUNT, RESEARCH_SERVICE_ACCOUNT
TEMPLATES = (STEPS_TEMPLATE, PIPELINE_TEMPLATE, JOB_TEMPLATE)
ARGO_CRDS = {"workflows": "workflows.json.gz", "workflowtemplates": "workflowtemplates.json.gz",
             "cronworkflows": "cronworkflows.json.gz", "workflowtaskresults": None}
INSTALL = "offhours render --gate-config FILE --out build/manifests && kubectl apply --server-side -k build/manifests"
# What no ServiceAccount of the research namespace may do in the serving namespace (asked one by one).
SERVING_RESOURCES = (("apps", "deployments", ""), ("apps", "deployments", "scale"), ("", "pods", ""),
                     ("", "configmaps", ""), ("", "secrets", ""), ("coordination.k8s.io", "leases", ""),
                     ("autoscaling", "horizontalpodautoscalers", ""), ("", "events", ""))
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")
WRITES = ("create", "update", "patch", "delete")


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, whether it holds, what was seen, how to fix it."""

    name: str
    ok: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        """Return the report line."""
        from offhours.scripts.cli.text import printable

        mark = "✓" if self.ok else "✗"
        return printable(f"{mark} {self.name}: {self.detail}" + ("" if self.ok or not self.fix else f" — fix: {self.fix}"))


# How the local sandbox's emulated vLLM servers are started again (they run inside that command's process).
SANDBOX_METRICS_FIX = "the local sandbox's emulated vLLM servers are not running: start them again with `offhours demo`"


def _loopback(ip: str | None) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(ip or "").is_loopback
    except ValueError:
        return False


def metrics_fix(port: int, path: str, service: str, errors: list[str], local: bool) -> str:
    """Return the fix of a direct-metrics ✗: on the local sandbox (pods on loopback IPs) its emulator; else vLLM's."""
    refused = bool(errors) and all("refused" in e.lower() for e in errors)
    if local and refused:
        return SANDBOX_METRICS_FIX
    if refused:
        return f"nothing listens on port {port}: start vLLM (or fix metrics.port) in the pods labelled {LABEL_SERVICE}={service}"
    return f"serve vLLM's {path} on port {port} of each pod labelled {LABEL_SERVICE}={service}"


def tick_fix(health: "Verdict", namespace: str, last_run: str) -> str:
    """Return the fix of failing ticks: the gate's runs when none ticks, the metrics' without load data, else its logs."""
    if health.stale and not health.failing:
        return (f"argo -n {namespace} list shows the gate's runs: one stuck Pending or Running holds the next ones back "
                "(concurrencyPolicy Forbid), or none starts (Argo's controller down)")
    said = health.newest_failure.lower()
    if "refused" in said or "no pod answered" in said or "metrics" in said or "load data" in said:
        return (f"the gate reads no load for {', '.join(health.failing)}: see the metrics line above; "
                f"argo -n {namespace} logs {last_run} shows each tick")
    return f"argo -n {namespace} logs {last_run} shows each tick"


def _absent(err: ApiException) -> bool:
    return err.status == 404


def _vendored_schema(file: str) -> dict[str, Any]:
    raw = package_bytes("offhours.schemas", "argo", file)
    return dict(json.loads(gzip.decompress(raw)))


def _schema_of(crd: Any) -> dict[str, Any] | None:
    version = next((v for v in crd.get("spec", {}).get("versions", []) if v.get("name") == ARGO_VERSION), None)
    return None if version is None else version.get("schema", {}).get("openAPIV3Schema")


def _numbers_as_read(value: Any) -> Any:
    """Return `value` with whole floats as ints: the client reads a schema's `minimum: 1` back as 1.0."""
    if isinstance(value, dict):
        return {k: _numbers_as_read(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers_as_read(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _canonical(value: Any) -> str:
    return json.dumps(_numbers_as_read(value), sort_keys=True, separators=(",", ":"))


@dataclass
class Checker:
    """Runs the checks against one cluster (an ApiClient) for one gate configuration."""

    api: Any
    config: GateConfig | None
    config_file: str | None = None
    research_namespace: str | None = None  # -n: the research namespace to check instead of the configuration's

    def __post_init__(self) -> None:
        apis = handles(self.api)
        self.core, self.apps, self.custom, self.ext = apis.core, apis.apps, apis.custom, apis.ext
        self.auth, self.sched, self.net, self.version = apis.authz, apis.sched, apis.net, apis.version

    # -- the checks ------------------------------------------------------------------------
    def api_server(self) -> Iterator[Check]:
        """Check that the API server answers."""
        version = self.version.get_code()
        yield Check("Kubernetes API", True, f"reachable, {version.git_version}")

    def crds(self) -> Iterator[Check]:
        """Check Argo's CRDs and that their schema is Argo v4.0.5's."""
        for plural, vendored in ARGO_CRDS.items():
            name = f"{plural}.argoproj.io"
            try:
                crd = self.api.sanitize_for_serialization(self.ext.read_custom_resource_definition(name))
            except ApiException as err:
                if not _absent(err):
                    raise
                yield Check(f"CRD {name}", False, "missing", "install Argo Workflows v4.0.5 (its CRDs and controller)")
                continue
            established = any(c.get("type") == "Established" and c.get("status") == "True"
                              for c in crd.get("status", {}).get("conditions", []))
            schema = _schema_of(crd)
            if not established or schema is None:
                yield Check(f"CRD {name}", False, "not established, or no v1alpha1 version",
                            "install Argo Workflows v4.0.5's CRDs")
            elif vendored is None:
                yield Check(f"CRD {name}", True, "established, v1alpha1")
            elif _canonical(schema) != _canonical(_vendored_schema(vendored)["openAPIV3Schema"]):
                yield Check(f"CRD {name}", False, "schema differs from Argo v4.0.5's (another Argo version?)",
                            "install the CRDs of Argo v4.0.5's release (manifests/base/crds/full)")
            else:
                yield Check(f"CRD {name}", True, "established, v1alpha1, Argo v4.0.5 schema")

    def namespaces(self, config: GateConfig) -> Iterator[Check]:
        """Check the serving and research namespaces."""
        for role, ns in (("serving", config.namespace), ("research", config.workflow_namespace)):
            try:
                self.core.read_namespace(ns)
                yield Check(f"namespace {ns}", True, f"exists ({role})")
            except ApiException as err:
                if not _absent(err):
                    raise
                yield Check(f"namespace {ns}", False, f"missing ({role})", f"kubectl create namespace {ns}")

    def priority_class(self) -> Iterator[Check]:
        """Check the PriorityClass of research pods."""
        try:
            pc = self.sched.read_priority_class(PRIORITY_CLASS)
        except ApiException as err:
            if not _absent(err):
                raise
            yield Check(f"PriorityClass {PRIORITY_CLASS}", False, "missing", INSTALL)
            return
        ok = pc.value < 0 and pc.preemption_policy == "Never"
        yield Check(f"PriorityClass {PRIORITY_CLASS}", ok, f"value {pc.value}, preemptionPolicy {pc.preemption_policy}",
                    f"kubectl delete priorityclass {PRIORITY_CLASS}, then {INSTALL}")

    def templates(self, config: GateConfig) -> Iterator[Check]:
        """Check the WorkflowTemplates."""
        ns = config.workflow_namespace
        for name in TEMPLATES:
            try:
                self.custom.get_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, ns, "workflowtemplates", name)
                yield Check(f"WorkflowTemplate {ns}/{name}", True, "installed")
            except ApiException as err:
                if not _absent(err):
                    raise
                yield Check(f"WorkflowTemplate {ns}/{name}", False, "missing", INSTALL)

    def service_accounts(self, config: GateConfig) -> Iterator[Check]:
        """Check the gate's, the exit hook's and research pods' ServiceAccounts."""
        for ns, name in ((config.namespace, GATE_SA), (config.workflow_namespace, EXIT_HOOK_SA),
                         (config.workflow_namespace, RESEARCH_SA)):
            try:
                self.core.read_namespaced_service_account(name, ns)
                yield Check(f"ServiceAccount {ns}/{name}", True, "exists")
            except ApiException as err:
                if not _absent(err):
                    raise
                yield Check(f"ServiceAccount {ns}/{name}", False, "missing", INSTALL)

    def _allowed(self, user: str, namespace: str, group: str, resource: str, verb: str, subresource: str = "",
                 name: str = "") -> bool:
        review = subject_access_review(user, ["system:serviceaccounts", f"system:serviceaccounts:{user.split(':')[2]}"],
                                       namespace, group, resource, verb, subresource, name)
        return bool(self.auth.create_subject_access_review(review).status.allowed)

    def rbac(self, config: GateConfig) -> Iterator[Check]:
        """Ask the API server what the gate's, the exit hook's and research pods' ServiceAccounts may do."""
        serving, research = config.namespace, config.workflow_namespace
        gate = f"system:serviceaccount:{serving}:{GATE_SA}"
        targets = [(s.scale_target.group, guessed_resource(s.scale_target.kind), s.scale_target.name)
                   for s in config.services]
        needs: list[tuple[str, str, str, str, str, str]] = []  # namespace, group, resource, subresource, verb, name
        for group, resource, name in targets:
            needs += [(serving, group, resource, "scale", v, name) for v in ("get", "patch", "update")]
            needs += [(serving, group, resource, "", "get", name)]
        needs += [(serving, "apps", "deployments", "", v, "") for v in ("get", "list", "watch")]
        needs += [(serving, "", "pods", "", "list", ""), (serving, "", "events", "", "create", ""),
                  (serving, "coordination.k8s.io", "leases", "", "update", LEASE_NAME)]
        needs += [(serving, "", "configmaps", "", v, state_configmap_name(s.name)) for s in config.services
                  for v in ("get", "update", "delete")]
        needs += [(serving, "", "configmaps", "", "list", "")]  # a removed service's record is found by listing
        needs += [(research, ARGO_GROUP, "workflows", "", v, "") for v in
                  ("get", "list", "watch", "patch", "create", "delete")]
        needs += [(research, ARGO_GROUP, "workflowtemplates", "", "list", "")]  # arguments checked before admission
        missing = [f"{v} {r}{'/' + sub if sub else ''}{' ' + n if n else ''} in {ns}"
                   for ns, g, r, sub, v, n in needs if not self._allowed(gate, ns, g, r, v, sub, n)]
        yield Check(f"RBAC {serving}/{GATE_SA}", not missing,
                    "may scale its targets and manage research workflows" if not missing
                    else f"lacks {len(missing)} right(s): {'; '.join(missing[:4])}", INSTALL)
        patching = [f"{r} {n}" for g, r, n in targets if self._allowed(gate, serving, g, r, "patch", "", n)]
        yield Check(f"RBAC {serving}/{GATE_SA} cannot rewrite pods", not patching,
                    "no `patch` of its scale targets" if not patching else
                    f"may patch {', '.join(patching)} (and so rewrite their pod template)",
                    f"remove `patch` on those resources from the gate's Roles in {serving}")
        hook = f"system:serviceaccount:{research}:{EXIT_HOOK_SA}"
        hook_missing = [v for v in ("get", "patch") if not self._allowed(hook, research, ARGO_GROUP, "workflows", v)]
        yield Check(f"RBAC {research}/{EXIT_HOOK_SA}", not hook_missing,
                    "may get and patch its workflow" if not hook_missing
                    else f"lacks {', '.join(hook_missing)} on workflows in {research}", INSTALL)
        for sa in (EXIT_HOOK_SA, RESEARCH_SA):
            user = f"system:serviceaccount:{research}:{sa}"
            rights = [f"{v} {r}{'/' + sub if sub else ''}" for g, r, sub in SERVING_RESOURCES for v in VERBS
                      if self._allowed(user, serving, g, r, v, sub)]
            yield Check(f"RBAC {research}/{sa} has no right in {serving}", not rights,
                        "none" if not rights else f"may {'; '.join(rights[:4])}" + (" …" if len(rights) > 4 else ""),
                        f"remove the RoleBindings in {serving} that name {research}/{sa}")

    def console(self, config: GateConfig) -> Iterator[Check]:
        """Where the console is installed: its rights are what it uses and no more; its NetworkPolicy exists."""
        serving, research = config.namespace, config.workflow_namespace
        try:
            self.core.read_namespaced_service_account(CONSOLE, serving)
        except ApiException as err:
            if not _absent(err):
                raise
            yield Check("console", True, f"not installed in {serving} (optional: offhours render --console)")
            return
        user = f"system:serviceaccount:{serving}:{CONSOLE}"
        needs = [(serving, "", "configmaps", "", v) for v in ("get", "list")]
        needs += [(serving, "apps", "deployments", "", v) for v in ("get", "list")]
        needs += [(research, ARGO_GROUP, "workflows", "", "list"),
                  ("", "authentication.k8s.io", "tokenreviews", "", "create"),
                  ("", "authorization.k8s.io", "subjectaccessreviews", "", "create")]
        missing = [f"{v} {r} in {ns or 'the cluster'}" for ns, g, r, sub, v in needs
                   if not self._allowed(user, ns, g, r, v, sub)]
        yield Check(f"RBAC {serving}/{CONSOLE}", not missing,
                    "may read the pool and review readers' tokens" if not missing
                    else f"lacks {len(missing)} right(s): {'; '.join(missing[:4])}", INSTALL + " (rendered with --console)")
        unused = [(ns, "", "pods", "", v) for ns in sorted({serving, research}) for v in ("get", "list")]
        unused += [(ns, "", "pods", "log", "get") for ns in sorted({serving, research})]
        unused += [(ns, "", "secrets", "", v) for ns in sorted({serving, research}) for v in ("get", "list")]
        unused += [(serving, g, r, sub, v) for g, r, sub in (("", "configmaps", ""), ("apps", "deployments", ""),
                                                              ("apps", "deployments", "scale")) for v in WRITES]
        unused += [(research, ARGO_GROUP, "workflows", "", v) for v in WRITES]
        extra = [f"{v} {r}{'/' + sub if sub else ''} in {ns}" for ns, g, r, sub, v in unused
                 if self._allowed(user, ns, g, r, v, sub)]
        yield Check(f"RBAC {serving}/{CONSOLE} has no right it does not use", not extra,
                    "no pods, logs, secrets or writes" if not extra
                    else f"may {'; '.join(extra[:4])}" + (" …" if len(extra) > 4 else ""),
                    f"remove those rules from the Roles bound to {serving}/{CONSOLE}")
        try:
            self.net.read_namespaced_network_policy(CONSOLE, serving)
            yield Check(f"NetworkPolicy {serving}/{CONSOLE}", True, "exists")
        except ApiException as err:
            if not _absent(err):
                raise
            yield Check(f"NetworkPolicy {serving}/{CONSOLE}", False, "missing: any pod may reach the console",
                        INSTALL + " (rendered with --console)")

    def config_map(self) -> Iterator[Check]:
        """Check the gate's ConfigMap in the serving namespace; adopt its configuration when none was given."""
        ns = self.config.namespace if self.config else None
        where = f"{ns}/{CONFIG_MAP}"
        fix = (f"kubectl -n {ns} create configmap {CONFIG_MAP} --from-file={CONFIG_KEY}=gate-config.yaml "
               "--dry-run=client -o yaml | kubectl apply -f -")
        try:
            cm = self.core.read_namespaced_config_map(CONFIG_MAP, ns)
        except ApiException as err:
            if not _absent(err):
                raise
            yield Check(f"ConfigMap {where}", False, "missing", fix)
            return
        text = (cm.data or {}).get(CONFIG_KEY)
        if text is None:
            yield Check(f"ConfigMap {where}", False, f"has no key {CONFIG_KEY}", fix)
            return
        try:
            installed = parse_config_text(text, f"ConfigMap {where}")
        except ConfigError as err:
            yield Check(f"ConfigMap {where}", False, f"{CONFIG_KEY} is invalid: {str(err).splitlines()[0]}", fix)
            return
        if self.config_file and installed != self.config:
            yield Check(f"ConfigMap {where}", False, f"differs from {self.config_file}", fix.replace(
                "gate-config.yaml", self.config_file))
            return
        self.config = installed
        yield Check(f"ConfigMap {where}", True, f"valid, {len(installed.services)} service(s)")

    def deployments(self, config: GateConfig) -> Iterator[Check]:
        """Check each configured scale target: present, one the gate may scale (as the gate judges it), ready.

        And, where it carries Argo CD's or Flux's marks, what their sync must leave to the gate.
        """
        from offhours.scripts.cluster.base import ClusterError
        from offhours.scripts.cluster.kube import KubeCluster
        from offhours.scripts.cluster.scale_target import gitops_advice, gitops_tool

        cluster = KubeCluster(self.api, retries=1)
        for s in config.services:
            ref = s.scale_target
            where = f"{ref.kind} {config.namespace}/{ref.name}"
            field = "scaleTargetRef" if not ref.is_deployment else "deployment"
            try:
                target = cluster.find_deployment(config.namespace, ref.text)
            except ClusterError as err:
                yield Check(where, False, f"refused (service {s.name}): {err}", f"fix services.{s.name}.{field} in the config")
                continue
            if target is None:
                yield Check(where, False, f"missing (service {s.name})",
                            f"deploy {ref.name} in {config.namespace}, or fix services.{s.name}.{field} in the config")
                continue
            served, rendered = cluster.resource_of(ref), guessed_resource(ref.kind)
            if served != rendered:
                yield Check(f"{where} RBAC", False, f"the API serves kind {ref.kind} as {served}, the rendered RBAC "
                            f"names {rendered}: the gate may not scale it",
                            f"add a Role in {config.namespace} granting get on {served} and get/patch/update on "
                            f"{served}/scale (name {ref.name}) to {GATE_SA} and patch to offhours-backstop")
            if ref.is_deployment:
                dep = self.apps.read_namespaced_deployment(ref.name, config.namespace)
                want, ready = dep.spec.replicas or 0, dep.status.ready_replicas or 0
                detail = f"{ready}/{want} replicas ready"
            else:
                want, ready = target.replicas, len(cluster.ready_pods(target))
                detail = f"{want} replicas, {ready} ready pod(s) (selector {target.selector})"
            yield Check(where, ready >= want and want > 0, detail,
                        f"kubectl -n {config.namespace} describe {ref.kind.lower()} {ref.name}")
            tool = gitops_tool(target.labels, target.annotations)
            if tool is not None:
                # Not provable from here (the sync's settings live with the tool): said, not failed.
                yield Check(f"{where} GitOps", True, f"synced by {tool}: its sync reverts a lend unless told to leave "
                            f"replicas alone: {gitops_advice(tool, ref)}")

    def metrics(self, config: GateConfig) -> Iterator[Check]:
        """Check the metrics source answers with vLLM series for every service."""
        m = config.metrics
        if m.source == "prometheus":
            from offhours.scripts.metrics.prometheus import PrometheusError, read_services

            try:
                services = read_services(m.prometheus_url or "", m.service_label, m.window, m.extra_selector,
                                         m.prometheus_timeout_seconds)
            except PrometheusError as err:
                yield Check(f"metrics (Prometheus {m.prometheus_url})", False, str(err),
                            "fix metrics.prometheus.url, or let the gate's namespace reach Prometheus")
                return
            absent = [s.name for s in config.services if s.name not in services]
            yield Check(f"metrics (Prometheus {m.prometheus_url})", not absent,
                        "vLLM series for every service" if not absent else
                        f"no vLLM series with {m.service_label}= {', '.join(absent)}",
                        f"scrape the vLLM pods with the label {m.service_label}=<service>")
            return
        from offhours.scripts.metrics.scrape import Target, metrics_url, scrape

        for s in config.services:
            pods = self.core.list_namespaced_pod(config.namespace, label_selector=f"{LABEL_SERVICE}={s.name}").items
            ready = [p for p in pods if p.status.pod_ip and any(c.type == "Ready" and c.status == "True"
                                                                for c in p.status.conditions or [])]
            result = scrape([Target(p.metadata.name, metrics_url(p.status.pod_ip, m.port, m.path)) for p in ready],
                            m.scrape_timeout_seconds, m.concurrency)
            ok = bool(ready) and not result.errors
            detail = (f"{len(result.readings)}/{len(ready)} ready pod(s) return vLLM series" if ready
                      else f"no ready pod labelled {LABEL_SERVICE}=" + s.name)
            if result.errors:
                detail += "; " + "; ".join(list(result.errors.values())[:2])  # each error begins with its pod's name
            local = bool(ready) and all(_loopback(p.status.pod_ip) for p in ready)
            yield Check(f"metrics of {s.name} (direct :{m.port}{m.path})", ok, detail,
                        metrics_fix(m.port, m.path, s.name, list(result.errors.values()), local))

    def cron_workflow(self, config: GateConfig) -> Iterator[Check]:
        """Check the gate's CronWorkflow is scheduled, and its last run."""
        ns = config.namespace
        try:
            cron = self.custom.get_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, ns, "cronworkflows",
                                                            CRON_WORKFLOW)
        except ApiException as err:
            if not _absent(err):
                raise
            yield Check(f"CronWorkflow {ns}/{CRON_WORKFLOW}", False, "missing", INSTALL)
            return
        if cron.get("spec", {}).get("suspend"):
            yield Check(f"CronWorkflow {ns}/{CRON_WORKFLOW}", False, "suspended: the gate does not run",
                        f"kubectl -n {ns} patch cronworkflow {CRON_WORKFLOW} --type=merge "
                        "-p '{\"spec\":{\"suspend\":false}}'")
            return
        runs = self.custom.list_namespaced_custom_object(
            ARGO_GROUP, ARGO_VERSION, ns, "workflows",
            label_selector=f"workflows.argoproj.io/cron-workflow={CRON_WORKFLOW}")["items"]
        finished = [w for w in runs if w.get("status", {}).get("phase") in FINISHED_PHASES]
        schedules = cron.get("spec", {}).get("schedules") or [cron.get("spec", {}).get("schedule")]
        if not finished:
            # The first run may be the one that never ends (stuck Pending): the ticks say whether the gate works.
            health = self.gate_ticks(config)
            yield Check(f"CronWorkflow {ns}/{CRON_WORKFLOW}", health.ok,
                        f"scheduled ({', '.join(map(str, schedules))}); no finished run yet; {health.detail}",
                        tick_fix(health, ns, runs[0]["metadata"]["name"] if runs else "RUN"))
            return
        last = max(finished, key=lambda w: w["status"].get("finishedAt") or "")
        phase = last["status"]["phase"]
        run = f"last run {last['metadata']['name']} {phase} at {last['status'].get('finishedAt')}"
        if phase != "Succeeded":
            yield Check(f"CronWorkflow {ns}/{CRON_WORKFLOW}", False, f"scheduled; {run}: {last['status'].get('message', '')}",
                        f"argo -n {ns} logs {last['metadata']['name']}")
            return
        health = self.gate_ticks(config)
        yield Check(f"CronWorkflow {ns}/{CRON_WORKFLOW}", health.ok, f"scheduled; {run}; {health.detail}",
                    tick_fix(health, ns, last["metadata"]["name"]))

    def gate_ticks(self, config: GateConfig) -> Verdict:
        """Judge the gate by its ticks: each service's state record and the gate's GateTickFailed Events."""
        from offhours.scripts.names import EVENT_GATE_TICK_FAILED, STATE_KEY
        from offhours.scripts.pool.model import parse_time

        records: dict[str, dict[str, Any] | None] = {}
        for s in config.services:
            try:
                cm = self.core.read_namespaced_config_map(state_configmap_name(s.name), config.namespace)
                state = json.loads((cm.data or {}).get(STATE_KEY) or "null")
            except ApiException as err:
                if not _absent(err):
                    raise
                state = None
            except (ValueError, RecursionError):
                state = None  # a record that is not JSON is no record: the gate starts over from it
            records[s.name] = state if isinstance(state, dict) else None
        deployments = {(s.scale_target.kind, s.scale_target.name): s.name for s in config.services}
        events = self.core.list_namespaced_event(config.namespace, field_selector=f"reason={EVENT_GATE_TICK_FAILED}").items
        failures = [TickFailure(parse_time(e.last_timestamp or e.event_time or e.first_timestamp),
                                deployments[(e.involved_object.kind, e.involved_object.name)], e.message or "")
                    for e in events if e.involved_object is not None
                    and (e.involved_object.kind, e.involved_object.name) in deployments]
        # Aged on the API server's clock, as the gate renews it: this machine's clock may be hours off.
        return verdict(services_ticks(records), failures, self._server_time())

    def _server_time(self) -> float | None:
        """Return the `Date` of the API server's last answer, or None (then no lease is aged)."""
        from offhours.scripts.cluster.clock import parse_http_date

        getheader = getattr(getattr(self.api, "last_response", None), "getheader", None)
        return parse_http_date(getheader("Date")) if callable(getheader) else None

    def run(self) -> Iterator[Check]:
        """Yield every check; stop early only when the API server cannot be reached."""
        yield from self.api_server()
        yield from self.crds()
        yield from self.config_map()
        config = self.config
        assert config is not None
        if self.research_namespace:
            import dataclasses

            config = self.config = dataclasses.replace(config, workflow_namespace=self.research_namespace)
        yield from self.namespaces(config)
        yield from self.priority_class()
        yield from self.templates(config)
        yield from self.service_accounts(config)
        yield from self.rbac(config)
        yield from (Check(*line) for line in boundary_checks(self.api, config, INSTALL))
        yield from self.console(config)
        yield from self.deployments(config)
        yield from self.metrics(config)
        yield from self.cron_workflow(config)


def check(api: Any, config_file: str | None, out: Callable[[str], None] = print,
          research_namespace: str | None = None) -> int:
    """Run every check, print one line each; return 1 if any failed."""
    from offhours.workflows.render import example_gate_config

    config = load_config(config_file) if config_file else example_gate_config()
    failed = 0
    for result in Checker(api, config, config_file, research_namespace).run():
        out(result.line())
        failed += not result.ok
    out(f"{failed} check(s) failed" if failed else "all checks passed")
    return 1 if failed else 0


def _main(args: argparse.Namespace) -> int:
    from offhours.scripts.cli.connect import connect

    return check(connect(args.kubeconfig), args.config, research_namespace=args.namespace)


def register(subparsers: Any) -> None:
    """Add `offhours check` to the command line."""
    parser = subparsers.add_parser("check", help="verify an offhours install on the cluster: one line per check, "
                                   "each ✗ with its fix; exit 1 on any ✗")
    parser.add_argument("--config", help="gate configuration the install should match (default: the ConfigMap "
                        "offhours-gate-config in the bundled example's serving namespace)")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    parser.add_argument("-n", "--namespace", help="research (workflow) namespace to check (default: the gate "
                        "configuration's workflowNamespace: an install is checked against its configuration)")
    parser.set_defaults(func=_main)
