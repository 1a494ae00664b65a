"""A grace set in a WorkflowTemplate the workflow refers to, not in its own spec: the cap's reader follows it.

`own_grace` reads the workflow's spec alone. A tenant can create WorkflowTemplates in the research namespace
(composed pipelines are ones), so the template a workflow runs, or a step's `templateRef`, may set its pods'
grace itself (a podSpecPatch, which Argo applies after the workflow's own): the pod got a day to stop under
a 30 s cap. The gate now reads the namespace's WorkflowTemplates when a job that may be admitted refers to
one, and follows the references to the grace of every GPU pod (`cluster.template_grace`).
"""

from typing import Any

from offhours.scripts.names import ANNOTATION_WAITING_REASON

from .test_gate_controller import World, config

GPU = {"resources": {"limits": {"nvidia.com/gpu": "8"}}}
DAY_PATCH = '{"terminationGracePeriodSeconds": 86400}'


def refused_for(w: World, name: str, where: str, seconds: int) -> bool:
    """Whether `name` waits, its reason naming the template that sets its pods' grace and that grace."""
    reason = w.wf(name)["metadata"]["annotations"].get(ANNOTATION_WAITING_REASON, "")
    return reason.startswith("not admitted: its pods' grace period is set in a template it runs") and \
        f"{where}: {seconds} s" in reason


def _tenant_template(w: World, name: str, spec: dict[str, Any]) -> None:
    w.cluster.templates[("research", name)] = {"apiVersion": "argoproj.io/v1alpha1", "kind": "WorkflowTemplate",
                                               "metadata": {"name": name, "namespace": "research"}, "spec": spec}


def test_a_workflow_running_a_tenants_template_that_patches_a_days_grace_is_never_admitted() -> None:
    """The fault: `workflowTemplateRef` to the tenant's own WorkflowTemplate, whose podSpecPatch gives a day's grace."""
    w = World(config(maxGraceSeconds=30))
    w.park("mine", replicas=2)
    params = [{"name": p["name"]} for p in w.wf("mine")["spec"]["arguments"]["parameters"]]
    _tenant_template(w, "long-stop", {"entrypoint": "main", "podSpecPatch": DAY_PATCH, "arguments": {"parameters": params},
                                      "templates": [{"name": "main", "container": GPU}]})
    w.wf("mine")["spec"]["workflowTemplateRef"] = {"name": "long-stop"}
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("mine") == "parked" and w.replicas() == 8, w.log.getvalue()
    assert refused_for(w, "mine", "WorkflowTemplate long-stop spec.podSpecPatch", 86400)


def test_a_step_calling_a_tenants_template_that_patches_a_days_grace_is_never_admitted() -> None:
    """The fault: a workflow of its own templates, 20 s for every pod, one step a `templateRef` to a day's grace."""
    w = World(config(maxGraceSeconds=30))
    w.park("mine", replicas=2)
    _tenant_template(w, "long-stop", {"templates": [{"name": "train", "podSpecPatch": DAY_PATCH, "container": GPU}]})
    spec = w.wf("mine")["spec"]
    spec.pop("workflowTemplateRef")
    spec.update({"entrypoint": "main", "podSpecPatch": '{"terminationGracePeriodSeconds": 20}', "templates": [
        {"name": "main", "steps": [[{"name": "s", "templateRef": {"name": "long-stop", "template": "train"}}]]}]})
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("mine") == "parked" and w.replicas() == 8, w.log.getvalue()
    assert refused_for(w, "mine", "WorkflowTemplate long-stop template train.podSpecPatch", 86400)


def test_an_offhours_step_called_without_the_grace_argument_is_never_admitted_under_a_cap_below_its_default() -> None:
    """The fault: a DAG task calls offhours-steps' sft and passes no grace: its pod gets the step's default, 120 s."""
    from offhours.scripts.names import GRACE_PARAMETER
    from offhours.workflows.compose import Pipeline

    p = Pipeline("sft-pipeline")
    p.step("sft", image="ghcr.io/lab/train:3", command=["python", "-m", "sft"], gpus=8)
    spec = p.workflow().to_dict()["spec"]
    for template in spec["templates"]:
        for task in (template.get("dag") or {}).get("tasks", []):
            args = (task.get("arguments") or {}).get("parameters", [])
            args[:] = [a for a in args if a["name"] != GRACE_PARAMETER]
    spec["arguments"]["parameters"] = [{"name": "service", "value": "chat"}, {"name": "replicas", "value": "2"}]
    w = World(config(maxGraceSeconds=30))
    w.park("defaulted", replicas=2)
    w.wf("defaulted")["spec"] = {**spec, "suspend": True}
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("defaulted") == "parked" and w.replicas() == 8, w.log.getvalue()
    assert refused_for(w, "defaulted", "WorkflowTemplate offhours-steps template sft.podSpecPatch (its "
                       f"{GRACE_PARAMETER})", 120)


def test_a_composed_pipeline_passing_the_grace_on_is_admitted_with_one_template_read_a_tick() -> None:
    """No false refusal: the library's steps called with the workflow's grace, which the gate caps at admission."""
    from offhours.workflows.compose import Pipeline

    p = Pipeline("sft-pipeline")
    p.step("sft", image="ghcr.io/lab/train:3", command=["python", "-m", "sft"], gpus=8)
    spec = p.workflow().to_dict()["spec"]
    spec["arguments"]["parameters"] = [{"name": "service", "value": "chat"}, {"name": "replicas", "value": "2"}]
    w = World(config(maxGraceSeconds=30))
    w.park("composed", replicas=2)
    w.wf("composed")["spec"] = {**spec, "suspend": True}
    for _ in range(7):
        before = sum(c == "list-workflowtemplates" for c in w.cluster.calls)
        w.tick(chat=1)
        assert sum(c == "list-workflowtemplates" for c in w.cluster.calls) - before <= 1
    assert w.state("composed") == "admitted" and w.replicas() == 6, w.log.getvalue()


def test_a_template_reference_changed_between_the_list_and_the_admission_is_not_admitted() -> None:
    """The fault: the tick judged offhours-job; the workflow the admission resumes runs the tenant's day-long one."""
    w = World(config(maxGraceSeconds=30))
    w.park("late", replicas=2)
    params = [{"name": p["name"]} for p in w.wf("late")["spec"]["arguments"]["parameters"]]
    _tenant_template(w, "long-stop", {"entrypoint": "main", "podSpecPatch": DAY_PATCH, "arguments": {"parameters": params},
                                      "templates": [{"name": "main", "container": GPU}]})
    listed = w.cluster.jobs

    def jobs_then_edit(namespace: str, service: str):  # type: ignore[no-untyped-def]
        out = listed(namespace, service)
        w.wf("late")["spec"]["workflowTemplateRef"] = {"name": "long-stop"}
        return out

    w.cluster.jobs = jobs_then_edit  # type: ignore[method-assign]
    for _ in range(7):
        w.wf("late")["spec"]["workflowTemplateRef"] = {"name": "offhours-job"}  # what each list sees
        w.tick(chat=1)
    assert w.state("late") == "parked" and w.wf("late")["spec"].get("suspend") is True, w.log.getvalue()
    assert "the WorkflowTemplates it refers to changed since the tick read it" in w.log.getvalue()
    w.cluster.jobs = listed  # type: ignore[method-assign]
    w.tick(chat=1)  # the list sees long-stop now: refused there for its grace, nothing lent to it
    assert w.state("late") == "parked" and w.replicas() == 8, w.log.getvalue()
    assert refused_for(w, "late", "WorkflowTemplate long-stop spec.podSpecPatch", 86400)


def test_a_template_past_the_bound_of_one_read_is_not_admitted() -> None:
    """Fault: a tenant's thousands of WorkflowTemplates; the gate reads the first 500 by name, no more."""
    from offhours.scripts.cluster.template_grace import MAX_TEMPLATES

    w = World(config(maxGraceSeconds=30))
    for i in range(MAX_TEMPLATES):
        _tenant_template(w, f"a-{i:04d}", {"templates": []})
    w.park("mine", replicas=2)
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("mine") == "parked" and w.replicas() == 8, w.log.getvalue()
    reason = w.wf("mine")["metadata"]["annotations"][ANNOTATION_WAITING_REASON]
    assert "runs WorkflowTemplate offhours-job, which is not in its namespace (or not among the first 500" in reason
