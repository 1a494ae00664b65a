"""Render every manifest the library defines, and write them with a kustomization.yaml."""

from pathlib import Path
from typing import Any

import yaml

from offhours.steps.library import steps_workflow_template
from offhours.workflows import job, llm_pipeline
from offhours.workflows.priority_class import priority_class


def manifests() -> dict[str, dict[str, Any]]:
    """Return each manifest of the library by its file name, in install order."""
    return {
        "priorityclass-offhours-best-effort.yaml": priority_class(),
        "workflowtemplate-offhours-steps.yaml": steps_workflow_template().to_dict(),
        "workflowtemplate-offhours-llm-pipeline.yaml": llm_pipeline.workflow_template().to_dict(),
        "workflowtemplate-offhours-job.yaml": job.workflow_template().to_dict(),
    }


def to_yaml(manifest: dict[str, Any]) -> str:
    """Serialise a manifest the way the library writes it (stable, so goldens compare as text)."""
    return yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False, width=120, allow_unicode=True)


def kustomization(files: list[str]) -> dict[str, Any]:
    """Return the kustomization that installs `files` (`kubectl apply --server-side -k DIR`)."""
    return {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": files}


def rendered_files() -> dict[str, str]:
    """Return the text of every file `offhours render` writes, by file name."""
    docs = manifests()
    files = {name: to_yaml(doc) for name, doc in docs.items()}
    files["kustomization.yaml"] = to_yaml(kustomization(list(docs)))
    return files


def write(out: Path) -> list[Path]:
    """Write the manifests and kustomization.yaml into `out`; return the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in rendered_files().items():
        path = out / name
        path.write_text(text)
        written.append(path)
    return written
