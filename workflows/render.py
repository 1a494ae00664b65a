"""Render every manifest an install needs, and write them with a kustomization.yaml.

The set is complete for an empty cluster (`kubectl apply --server-side -k DIR`): the serving and
research namespaces, the PriorityClass, the RBAC, the gate's ConfigMap (the gate configuration
given to `offhours render --gate-config`, else the bundled example), the WorkflowTemplates in the
research namespace, the gate's CronWorkflow and the backstop's CronJob (with its RBAC) in the serving
namespace. The offhours image (the
launcher, the parameter check, the exit hook, the gate) is fixed here, never a workflow parameter.
With `console`, the web console's optional install (scripts/console/manifests.py: its ServiceAccount,
read-only Roles, Deployment and Service) is added to the same set and kustomization.
"""

from pathlib import Path
from typing import Any

import yaml

from offhours.cronworkflows.admission import admission_manifests
from offhours.cronworkflows.gate import gate_cron_workflow
from offhours.cronworkflows.rbac import pool_nodes_rbac, rbac_manifests
from offhours.scripts.backstop.manifests import backstop_manifests
from offhours.scripts.cluster.log_archive import archiving, repository_configmap
from offhours.scripts.config.loader import parse_config_text
from offhours.scripts.inputs.text import package_text
from offhours.scripts.names import GATE_CONFIG_KEY, GATE_CONFIG_MAP, LABEL_MANAGED, LOG_ARCHIVE_CONFIGMAP, OFFHOURS_IMAGE
from offhours.scripts.policy.config import GateConfig
from offhours.steps.library import steps_workflow_template
from offhours.workflows import llm_pipeline, single_job
from offhours.workflows.priority_class import priority_class

# `render --log-archive`: (s3://BUCKET/PREFIX, endpoint host[:port] or "", Secret name or "", plain HTTP)
LogArchiveFlags = tuple[str, str, str, bool]


def example_gate_config_text() -> str:
    """Return the text of the bundled example gate configuration."""
    return package_text("offhours.cronworkflows", "gate-config.example.yaml")


def parse_gate_config_text(text: str, source: str = "gate config") -> GateConfig:
    """Parse and validate the text of a gate configuration; a ConfigError names what is wrong."""
    return parse_config_text(text, source)


def example_gate_config() -> GateConfig:
    """Return the bundled example gate configuration (what `render` uses unless given one)."""
    return parse_gate_config_text(example_gate_config_text())


def _namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _config_map(namespace: str, text: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": GATE_CONFIG_MAP, "namespace": namespace, "labels": {LABEL_MANAGED: "true"}},
            "data": {GATE_CONFIG_KEY: text}}


def _namespaced(manifest: dict[str, Any], namespace: str) -> dict[str, Any]:
    manifest["metadata"] = {"name": manifest["metadata"].pop("name"), "namespace": namespace, **manifest["metadata"]}
    return manifest


def manifests(config_text: str | None = None, image: str = OFFHOURS_IMAGE,
              console: bool = False, log_archive: LogArchiveFlags | None = None) -> dict[str, dict[str, Any]]:
    """Return each manifest of an install by its file name, in install order.

    `config_text` is the gate configuration (YAML text; default: the bundled example): its
    namespaces, Deployments and services shape the RBAC, and it is installed as the gate's
    ConfigMap. `image` is the offhours image. With `console`, the web console's manifests come
    last. With `log_archive`, Argo keeps every research pod's main log in that S3 location (a stopped attempt's
    too, read back by `offhours logs`). A bad configuration raises ConfigError; a bad archive, ArchiveError.
    """
    text = example_gate_config_text() if config_text is None else config_text
    config = parse_gate_config_text(text)
    serving, research = config.namespace, config.workflow_namespace
    boundary = admission_manifests(config)  # first: a configuration it would leave unbounded is refused
    rbac = {f"{m['kind'].lower()}-{m['metadata']['namespace']}-{m['metadata']['name']}.yaml": m
            for m in rbac_manifests(config)}
    rbac.update({f"{m['kind'].lower()}-{m['metadata']['name']}.yaml": m for m in pool_nodes_rbac(config)})
    research_templates = {
        "workflowtemplate-offhours-steps.yaml": steps_workflow_template(image).to_dict(),
        "workflowtemplate-offhours-llm-pipeline.yaml": llm_pipeline.workflow_template().to_dict(),
        "workflowtemplate-offhours-job.yaml": single_job.workflow_template().to_dict(),
    }
    # Namespaced explicitly (the install spans two namespaces), so `kubectl apply -k DIR` needs no -n.
    docs = {
        f"namespace-{serving}.yaml": _namespace(serving),
        f"namespace-{research}.yaml": _namespace(research),
        "priorityclass-offhours-best-effort.yaml": priority_class(),
        **rbac,
        f"configmap-{GATE_CONFIG_MAP}.yaml": _config_map(serving, text),
        **{name: _namespaced(doc, research) for name, doc in research_templates.items()},
        "cronworkflow-offhours-gate.yaml": _namespaced(gate_cron_workflow(image=image).to_dict(), serving),
        # Serving's baseline back when no gate tick renews the lending: a plain CronJob, no Argo.
        **backstop_manifests(config, image),
        # The tenant boundary kube-apiserver enforces: admission policies, their bindings, the workflow quota.
        **boundary,
    }
    if log_archive is not None:  # Argo's log archiving: the research templates name offhours' artifact repository
        archive = repository_configmap(research, *log_archive)
        for name in ("workflowtemplate-offhours-llm-pipeline.yaml", "workflowtemplate-offhours-job.yaml"):
            docs[name]["spec"] = archiving(docs[name]["spec"])
        docs[f"configmap-{research}-{LOG_ARCHIVE_CONFIGMAP}.yaml"] = archive
    if console:
        from offhours.scripts.console.manifests import console_manifests

        docs.update(console_manifests(config, image))  # its file names never clash: all name offhours-console
    return docs


def to_yaml(manifest: dict[str, Any]) -> str:
    """Serialise a manifest the way the library writes it (stable, so goldens compare as text)."""
    return yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False, width=120, allow_unicode=True)


def kustomization(files: list[str]) -> dict[str, Any]:
    """Return the kustomization that installs `files` (`kubectl apply --server-side -k DIR`)."""
    return {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": files}


def rendered_files(config_text: str | None = None, image: str = OFFHOURS_IMAGE,
                   console: bool = False, log_archive: LogArchiveFlags | None = None) -> dict[str, str]:
    """Return the text of every file `offhours render` writes, by file name."""
    docs = manifests(config_text, image, console, log_archive)
    files = {name: to_yaml(doc) for name, doc in docs.items()}
    files["kustomization.yaml"] = to_yaml(kustomization(list(docs)))
    return files


def write(out: Path, config_text: str | None = None, image: str = OFFHOURS_IMAGE,
          console: bool = False, log_archive: LogArchiveFlags | None = None) -> list[Path]:
    """Write the manifests and kustomization.yaml into `out`; return the paths written."""
    files = rendered_files(config_text, image, console, log_archive)  # before mkdir: a bad configuration writes nothing
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        path = out / name
        path.write_text(text)
        written.append(path)
    return written
