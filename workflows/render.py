"""Render every manifest the library defines, and write them with a kustomization.yaml."""

from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from offhours.cronworkflows.gate import gate_cron_workflow
from offhours.cronworkflows.rbac import rbac_manifests
from offhours.scripts.policy.config import GateConfig, parse_config
from offhours.steps.library import steps_workflow_template
from offhours.workflows import job, llm_pipeline
from offhours.workflows.priority_class import priority_class


def example_gate_config() -> GateConfig:
    """Return the bundled example gate configuration (what `render` uses unless given one)."""
    text = resources.files("offhours.cronworkflows").joinpath("gate-config.example.yaml").read_text()
    return parse_config(yaml.safe_load(text))


def manifests(gate_config: GateConfig | None = None) -> dict[str, dict[str, Any]]:
    """Return each manifest of the library by its file name, in install order.

    The RBAC names the Deployments and namespaces of `gate_config` (default: the bundled example).
    """
    config = gate_config or example_gate_config()
    rbac = {f"{m['kind'].lower()}-{m['metadata']['name']}.yaml": m for m in rbac_manifests(config)}
    argo = {
        "workflowtemplate-offhours-steps.yaml": steps_workflow_template().to_dict(),
        "workflowtemplate-offhours-llm-pipeline.yaml": llm_pipeline.workflow_template().to_dict(),
        "workflowtemplate-offhours-job.yaml": job.workflow_template().to_dict(),
        "cronworkflow-offhours-gate.yaml": gate_cron_workflow().to_dict(),
    }
    # Namespaced explicitly (the RBAC spans two namespaces), so `kubectl apply -k DIR` needs no -n.
    for manifest in argo.values():
        manifest["metadata"] = {"name": manifest["metadata"].pop("name"), "namespace": config.workflow_namespace,
                                **manifest["metadata"]}
    return {"priorityclass-offhours-best-effort.yaml": priority_class(), **rbac, **argo}


def to_yaml(manifest: dict[str, Any]) -> str:
    """Serialise a manifest the way the library writes it (stable, so goldens compare as text)."""
    return yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False, width=120, allow_unicode=True)


def kustomization(files: list[str]) -> dict[str, Any]:
    """Return the kustomization that installs `files` (`kubectl apply --server-side -k DIR`)."""
    return {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": files}


def rendered_files(gate_config: GateConfig | None = None) -> dict[str, str]:
    """Return the text of every file `offhours render` writes, by file name."""
    docs = manifests(gate_config)
    files = {name: to_yaml(doc) for name, doc in docs.items()}
    files["kustomization.yaml"] = to_yaml(kustomization(list(docs)))
    return files


def write(out: Path, gate_config: GateConfig | None = None) -> list[Path]:
    """Write the manifests and kustomization.yaml into `out`; return the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in rendered_files(gate_config).items():
        path = out / name
        path.write_text(text)
        written.append(path)
    return written
