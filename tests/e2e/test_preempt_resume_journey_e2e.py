"""End to end: a researcher's job is preempted and resumes, seen from the CLI and from the web console.

`offhours submit` from the installed template → quiet load: the gate admits it and its training
starts → load rises: the gate reclaims, the job is stopped (its training checkpoints on SIGTERM) and
a parked copy waits → `offhours jobs` / `offhours why` show the preemption and why the copy waits →
load falls: the copy is admitted and its training starts at exactly the step the stopped run
checkpointed → the web console (read as its read-only ServiceAccount, in a real headless Chromium)
shows the preemption and the resume on the job page and the lent replica on the pool page →
`offhours cancel` → `offhours usage --csv` counts the run's GPU-hours used, lost to the preemption
and lent.

Every expected value is computed from the cluster's objects (the workflows, the gate's state
ConfigMap, the Deployment) at the moment of the check, independently of the read model's code.

Real: API server, scheduler, Argo controller, the gate (its ServiceAccount's token), the reference
job and the exit hooks (local processes of the pod runner), the console (Flask) and Chromium.
Stand-ins: kwok nodes, the vLLM servers (emulated metrics).
"""

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client, config
from selenium.webdriver.common.by import By

from offhours.scripts.console.app import create_app
from offhours.scripts.console.source import PoolSource
from offhours.scripts.policy.plan import lends_nothing_now
from offhours.scripts.pool.reader import PoolReader
from tests.support.browser import chromium, serving

from .conftest import RESEARCH, SERVING, wait
from .runner import LocalPodRunner
from .test_gate_e2e import TOTAL_GPUS, _tick, gate_setup  # noqa: F401 - gate_setup is a fixture used here
from .test_researcher_journey_e2e import (  # noqa: F401 - cli and console_reader are fixtures used here
    NS,
    TAG_WARNING,
    Cli,
    cli,
    console_reader,
    get_wf,
    job_params,
    seconds,
    stamp,
    table,
)

GPUS = 4  # 1 replica of chat, 4 GPUs per replica (the e2e serving Deployment)
FINISHED = ("Succeeded", "Failed", "Error")


def notes(wf: dict[str, Any]) -> dict[str, str]:
    return dict(wf["metadata"].get("annotations") or {})


def first_pod_start(wf: dict[str, Any]) -> str | None:
    starts = [n["startedAt"] for n in (wf.get("status") or {}).get("nodes", {}).values()
              if n["type"] == "Pod" and n.get("startedAt")]
    return min(starts, key=seconds) if starts else None


def gpu_seconds(wf: dict[str, Any]) -> float:
    """What Argo measured on the GPUs, else the exit hook's record (kwok: a stopped pod's GPU time is not measured)."""
    return float((wf.get("status") or {}).get("resourcesDuration", {}).get("nvidia.com/gpu",
                                                                           notes(wf).get("offhours.io/gpu-seconds", 0)))


def gpus_returned(wf: dict[str, Any]) -> str | None:
    """When its GPUs went back as the cluster shows it: the exit hook's mark, or its training pod's end if later."""
    work = [n for n in (wf.get("status") or {}).get("nodes", {}).values() if n["type"] == "Pod"
            and (n.get("templateRef") or {}).get("template", n.get("templateName")) not in ("check-parameters",
                                                                                            "return-gpus")]
    if any(n.get("phase") in ("Pending", "Running") for n in work):
        return None
    ends = [n["finishedAt"] for n in work if n.get("finishedAt")]
    return max([notes(wf)["offhours.io/returned-at"], *ends], key=seconds)


def timeline(wfs: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """The moments of a run (its workflows oldest first) as the annotations, Argo's status and labels record them."""
    entries: list[tuple[str, str, str]] = []
    for index, wf in enumerate(wfs):
        meta, status, note = wf["metadata"], wf.get("status") or {}, notes(wf)
        name = meta["name"]
        entries.append((meta["creationTimestamp"], "submitted" if index == 0 else
                        f"parked again as {name} after preemption {note['offhours.io/preemptions']}", name))
        if "offhours.io/admitted-at" in note:
            entries.append((note["offhours.io/admitted-at"], "admitted" if index == 0 else "resumed (admitted)", name))
        if meta["labels"]["offhours.io/state"] != "parked" and first_pod_start(wf):
            entries.append((str(first_pod_start(wf)), "started", name))
        if "offhours.io/preempted-at" in note:
            entries.append((note["offhours.io/preempted-at"], "preempted: its replicas went back to serving", name))
        if "offhours.io/cancelled-at" in note:
            entries.append((note["offhours.io/cancelled-at"], "cancelled", name))
        if status.get("phase") in FINISHED and status.get("finishedAt"):
            entries.append((status["finishedAt"], f"finished ({status['phase']})", name))
        if "offhours.io/returned-at" in note and (returned := gpus_returned(wf)):
            entries.append((returned, "GPUs returned", name))
    return [(stamp(at), what, name) for at, what, name in sorted(entries, key=lambda e: seconds(e[0]))]


def lost_hours(wf: dict[str, Any]) -> float:
    """GPU-hours a preemption threw away: its GPUs from the start (no checkpoint is recorded on it) to the stop."""
    note = notes(wf)
    if wf["metadata"]["labels"]["offhours.io/state"] != "preempted":
        return 0.0
    since = max(seconds(t) for t in (first_pod_start(wf), note["offhours.io/admitted-at"]) if t)
    return max(0.0, seconds(note["offhours.io/preempted-at"]) - since) / 3600 * GPUS


def lent_hours(wf: dict[str, Any]) -> float:
    """GPU-hours lent: its GPUs from admission to the first of its return, its preemption, its end."""
    note, status = notes(wf), wf.get("status") or {}
    ends = [seconds(t) for t in (note.get("offhours.io/returned-at"), note.get("offhours.io/preempted-at"),
                                 status.get("finishedAt")) if t]
    return max(0.0, min(ends) - seconds(note["offhours.io/admitted-at"])) / 3600 * GPUS


def provenance_lines(wf: dict[str, Any], run: str, tmp: Path) -> list[str]:
    """What `offhours why` says of the run's provenance: the copy's record, its image by the digest its pod reported."""
    record = json.loads(notes(wf)["offhours.io/provenance"])
    ref = record["parameters"]["image"]
    return [f"provenance: template offhours-job at resourceVersion {record['template']['resourceVersion']}, "
            f"offhours {record['offhours']}",
            f"  image: {ref} (runs as offhours.local/reference-job@{record['digests'][ref]})",
            f"  checkpoint-uri: file://{tmp}/ckpt", f"  output-uri: file://{tmp}/out",
            f"  rerun with the same parameters and images: offhours rerun {run}"]


def train_output(runner: LocalPodRunner, workflow: str) -> str:
    """What the job step's pod of `workflow` printed so far (the runner's record of its main container)."""
    return "".join(line for (ns, pod), lines in list(runner.outputs.items())
                   if ns == RESEARCH and pod.startswith(f"{workflow}-job-") for line in list(lines))


def evicted(core: client.CoreV1Api, pod: str) -> list[str]:
    """Reasons of the Events recorded on a research pod."""
    return [e.reason for e in core.list_namespaced_event(RESEARCH, field_selector=f"involvedObject.name={pod}").items]


def ended(api: client.ApiClient, name: str) -> Callable[[], dict[str, Any] | None]:
    return lambda: (lambda w: w if (w.get("status") or {}).get("phase") in FINISHED else None)(get_wf(api, name))


def test_researcher_sees_a_preemption_and_the_resume_from_the_cli_and_the_console(
        api: client.ApiClient, gate_setup: dict[str, Any], runner: LocalPodRunner,  # noqa: F811
        cli: Cli, tmp_path: Path, console_reader: str) -> None:  # noqa: F811
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    load = gate_setup["load"]
    load.rps = 5.0  # quiet: chat needs 1 of its 16 replicas
    _tick(gate_setup)  # the emulated servers' first reading (a tick without a rate yet)

    # 1. Submitted from the installed template; the gate admits it; its training starts.
    out, err = cli("submit", "offhours-job", "-n", RESEARCH, *job_params("resume", tmp_path))
    name = out.split()[0]
    assert (out, err) == (f"{name} parked in namespace {RESEARCH}: the gate admits it when chat can lend 1 replica(s)\n",
                          f"submit: warning: {TAG_WARNING}\n")
    copy = f"{name}-p1"
    for _ in range(6):
        if _tick(gate_setup).plan.admit:
            break
    assert get_wf(api, name)["metadata"]["labels"]["offhours.io/state"] == "admitted", gate_setup["log"].getvalue()
    wait("the job's training to start", lambda: re.search(r"start at step 0 of 100000\n", train_output(runner, name)),
         timeout=90)
    wait("a periodic checkpoint", lambda: (tmp_path / "ckpt").exists() and any((tmp_path / "ckpt").rglob("*")),
         timeout=30)

    # 2. Load rises: one tick reclaims the replica, stops the job and parks a copy of it.
    load.rps = 150.0
    tick = _tick(gate_setup)
    assert (tick.decision.action, tick.plan.lent_after) == ("reclaim", 0), gate_setup["log"].getvalue()
    original, parked = get_wf(api, name), get_wf(api, copy)
    assert (original["spec"]["shutdown"], original["metadata"]["labels"]["offhours.io/state"]) == ("Stop", "preempted")
    assert "offhours.io/preempted-at" in notes(original)
    assert parked["spec"]["suspend"] is True
    assert ({k: parked["metadata"]["labels"][k] for k in ("offhours.io/state", "offhours.io/run-id", "offhours.io/copy-of")}
            == {"offhours.io/state": "parked", "offhours.io/run-id": "resume",
                "offhours.io/copy-of": original["metadata"]["uid"]})
    assert (notes(parked)["offhours.io/preemptions"], notes(parked)["offhours.io/parked-from"]) == ("1", name)
    # Right away (the gate has written no reason on the copy yet): the CLI computes it from the gate's state.
    state = json.loads(core.read_namespaced_config_map("offhours-state-chat", SERVING).data["state.json"])
    required, baseline = state["lastDecision"]["required"], state["baseline"]
    assert (baseline, state["lastDecision"]["lent"]) == (16, 0) and required > 16
    out, _ = cli("jobs", *NS)
    assert [{k: v for k, v in r.items() if k not in ("AGE", "GPU-HOURS")} for r in table(out)] == [
        {"NAME": copy, "RUN": "resume", "SERVICE": "chat", "STATE": "preempted→waiting", "QUEUE": "1", "GPUS": "4",
         "PREEMPTIONS": "1"}]
    out, _ = cli("why", "resume", *NS)
    assert out.splitlines()[0] == (
        f"preempted 1 time(s), parked to resume from its last checkpoint; waiting: chat needs {required} of its "
        f"{baseline} replicas; 0 are lendable and this job needs 1; first in the queue (computed from ConfigMap "
        "offhours-state-chat: the gate has not recorded a reason on this job)")

    # 3. The stopped job ends (its training checkpointed on SIGTERM), its exit hook marks it returned.
    stopped = wait(f"{name} to end", ended(api, name), timeout=90)
    assert (stopped["status"]["phase"], stopped["status"]["message"]) == ("Failed", "Stopped with strategy 'Stop'")
    hook = wait("its exit hook", lambda: [r for r in runner.ran if r.pod.startswith(f"{name}-")
                                          and not r.pod.startswith(copy) and r.argv[:2] == ["offhours", "return-gpus"]],
                timeout=90)
    assert hook[0].exit_code == 0, hook[0].output
    original = wait("the returned mark", lambda: (lambda w: w if "offhours.io/returned-at" in notes(w) else None)(
        get_wf(api, name)), timeout=30)
    assert original["metadata"]["labels"]["offhours.io/state"] == "preempted"  # the exit hook keeps it
    # Serving took its replica back: the scheduler evicted the job's pod for it (kwok has no exec for Argo to
    # signal the container), the runner SIGTERMed the training, which may exit after the workflow ended.
    train = wait("the stopped training to exit", lambda: [r for r in runner.ran if r.pod.startswith(f"{name}-job-")],
                 timeout=30)
    assert len(train) == 1 and train[0].exit_code == 75, [(r.pod, r.exit_code, r.output[-300:]) for r in train]
    assert "Preempted" in evicted(core, train[0].pod)
    checkpointed = [int(s) for s in re.findall(r"SIGTERM: checkpointed at step (\d+)", train[0].output)]
    assert len(checkpointed) == 1 and checkpointed[0] > 0, train[0].output[-500:]

    # Still busy: the next tick writes on the copy why it waits.
    tick = _tick(gate_setup)
    # (its reason: the load, or partial data while the replica just given back has no reading yet)
    assert (tick.decision.action, tick.plan.lent_after) == ("hold", 0), gate_setup["log"].getvalue()
    # (the sentence names no load figure: one load change must not rewrite every parked job)
    reason = f"waiting: chat {lends_nothing_now(tick.decision)}; position 1 in the queue"
    parked = get_wf(api, copy)
    assert (notes(parked)["offhours.io/waiting-reason"], notes(parked)["offhours.io/queue-position"]) == (reason, "1")
    used = gpu_seconds(original) + gpu_seconds(parked)
    out, err = cli("jobs", *NS)
    assert err == ""
    assert [{k: v for k, v in r.items() if k != "AGE"} for r in table(out)] == [
        {"NAME": copy, "RUN": "resume", "SERVICE": "chat", "STATE": "preempted→waiting", "QUEUE": "1", "GPUS": "4",
         "PREEMPTIONS": "1", "GPU-HOURS": f"{used / 3600:.2f}"}]
    out, _ = cli("why", copy, *NS)
    checkpoint_line = next((line for line in out.splitlines() if line.startswith("last checkpoint: ")), "")
    assert out.splitlines() == [
        f"preempted 1 time(s), parked to resume from its last checkpoint; {reason}", "", "timeline:",
        *[f"  {at}  {what}  [{wf}]" for at, what, wf in timeline([original, parked])], "",
        checkpoint_line, f"GPU-hours: {used / 3600:.2f} over 2 workflow(s)", "",
        *provenance_lines(parked, "resume", tmp_path)]
    # The gate recorded no checkpoint on it, but its training saved one on SIGTERM: `why` reads the store.
    assert re.fullmatch(r"last checkpoint: \S+ \S+ \(\S+ ago, read from its checkpoint store\)", checkpoint_line), out

    # Load falls: the copy is admitted and its training starts where the stopped run checkpointed.
    load.rps = 5.0
    for _ in range(6):
        if _tick(gate_setup).plan.admit:
            break
    parked = get_wf(api, copy)
    assert parked["metadata"]["labels"]["offhours.io/state"] == "admitted" and not parked["spec"].get("suspend")
    assert apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 15
    resumed = wait("the copy's training to start", lambda: re.search(r"start at step (\d+) of 100000\n",
                                                                      train_output(runner, copy)), timeout=90)
    assert int(resumed.group(1)) == checkpointed[0], train_output(runner, copy)
    wait("the copy to run", lambda: get_wf(api, copy).get("status", {}).get("phase") == "Running", timeout=30)
    out, _ = cli("jobs", *NS)
    assert [{k: v for k, v in r.items() if k not in ("AGE", "GPU-HOURS")} for r in table(out)] == [
        {"NAME": copy, "RUN": "resume", "SERVICE": "chat", "STATE": "running", "QUEUE": "-", "GPUS": "4",
         "PREEMPTIONS": "1"}]

    # 4. The web console, reading the cluster as its read-only ServiceAccount, in a real Chromium.
    reader = PoolReader(SERVING, RESEARCH, api_client=config.new_client_from_config(console_reader))
    app = create_app(PoolSource(reader, interval=0.0))  # every page reads the cluster again
    with serving(app) as url, chromium() as browser:
        browser.get(f"{url}/jobs/{copy}")
        heading = browser.find_element(By.TAG_NAME, "h1").text
        sentence = browser.find_element(By.ID, "sentence").text
        fields = {f: browser.find_element(By.CSS_SELECTOR, f'td[data-field="{f}"]').text
                  for f in ("gpus", "preemptions", "gpu_hours", "last_checkpoint")}
        moments = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#timeline li")]
        original, parked = get_wf(api, name), get_wf(api, copy)
        used = gpu_seconds(original) + gpu_seconds(parked)
        assert heading == "resume running"
        started = first_pod_start(parked)
        assert started and sentence.startswith(f"running since {stamp(started)} on 4 GPUs of chat ("), sentence
        # The last checkpoint is the run's own store's (the stopped run checkpointed there), never an annotation's.
        assert fields["last_checkpoint"].endswith("Z (read from its checkpoint store)"), fields
        assert {k: v for k, v in fields.items() if k != "last_checkpoint"} == {
            "gpus": "4", "preemptions": "1", "gpu_hours": f"{used / 3600:.2f}"}
        assert moments == [f"{at} {what} {wf}" for at, what, wf in timeline([original, parked])]
        whats = [what for _, what, _ in timeline([original, parked])]
        assert {"preempted: its replicas went back to serving", f"parked again as {copy} after preemption 1",
                "resumed (admitted)"} <= set(whats)
        assert whats.index("preempted: its replicas went back to serving") < whats.index("resumed (admitted)")

        browser.get(f"{url}/")
        pool = {f: browser.find_element(By.CSS_SELECTOR, f'#service-chat td[data-field="{f}"]').text
                for f in ("baseline", "replicas", "required", "lent", "lendable", "gpus_lent")}
        decision = browser.find_element(By.CSS_SELECTOR, "#service-chat .decision").text
        state = json.loads(core.read_namespaced_config_map("offhours-state-chat", SERVING).data["state.json"])
        last, dep = state["lastDecision"], apps.read_namespaced_deployment("chat", SERVING)
        admitted = [w for w in (original, parked) if w["metadata"]["labels"]["offhours.io/state"] == "admitted"]
        assert last["lent"] == sum(int(w["metadata"]["labels"]["offhours.io/replicas"]) for w in admitted) == 1
        assert pool == {"baseline": str(state["baseline"]), "replicas": str(dep.spec.replicas),
                        "required": str(last["required"]), "lent": str(last["lent"]),
                        "lendable": str(max(0, state["baseline"] - last["required"] - last["lent"])),
                        "gpus_lent": str(last["lent"] * GPUS)}
        assert (dep.spec.replicas, state["baseline"] - last["lent"]) == (15, 15)
        assert decision.startswith("Last decision (") and decision.endswith(f"): {last['action']}: {last['reason']}")

        browser.get(f"{url}/queue")
        row = {f: browser.find_element(By.CSS_SELECTOR, f'tr[data-run="resume"] td[data-field="{f}"]').text
               for f in ("state", "position", "gpus", "preemptions", "gpu_hours", "reason")}
        used = gpu_seconds(get_wf(api, name)) + gpu_seconds(get_wf(api, copy))
        assert row == {"state": "running", "position": "-", "gpus": "4", "preemptions": "1",
                       "gpu_hours": f"{used / 3600:.2f}", "reason": ""}

    # 5. The researcher stops the run; its GPU-hours: used, lost to the preemption, lent.
    assert cli("cancel", "resume", "--yes", *NS) == (f"{copy}: stopping (exit handlers run; its GPUs go back to chat)\n",
                                                     "")
    wait(f"{copy} to end", ended(api, copy), timeout=90)
    hook = wait("the copy's exit hook", lambda: [r for r in runner.ran if r.pod.startswith(f"{copy}-")
                                                 and r.argv[:2] == ["offhours", "return-gpus"]], timeout=90)
    assert hook[0].exit_code == 0, hook[0].output
    wait("the copy's returned mark", lambda: "offhours.io/returned-at" in notes(get_wf(api, copy)), timeout=30)
    # The gate gives the replica back to serving; the scheduler evicts the job's pod for it (kwok has no exec
    # for Argo to signal the container), so its training gets SIGTERM, checkpoints and exits.
    _tick(gate_setup)
    assert apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 16
    resumed_run = wait("the resumed training to exit", lambda: [r for r in runner.ran
                                                                if r.pod.startswith(f"{copy}-job-")], timeout=30)
    assert len(resumed_run) == 1 and resumed_run[0].exit_code == 75, [(r.pod, r.exit_code) for r in resumed_run]
    assert "Preempted" in evicted(core, resumed_run[0].pod)
    starts = re.findall(r"start at step (\d+) of 100000", resumed_run[0].output)
    assert [int(s) for s in starts] == checkpointed  # no step lost, none repeated

    original, parked = get_wf(api, name), get_wf(api, copy)
    used = gpu_seconds(original) / 3600 + gpu_seconds(parked) / 3600  # summed per workflow, as the report does
    lost = lost_hours(original) + lost_hours(parked)
    lent = lent_hours(original) + lent_hours(parked)
    assert lost > 0 and lent > lost
    assert cli("usage", "--csv", *NS) == (
        "service,runs,gpu_hours_used,gpu_hours_lost_to_preemption,gpu_hours_lent\n"
        f"chat,1,{used:.2f},{lost:.2f},{lent:.2f}\n", "")
    out, _ = cli("usage", "--by", "label:offhours.io/state", "--csv", *NS)
    assert out.splitlines()[1:] == [
        f"preempted,1,{gpu_seconds(original) / 3600:.2f},{lost:.2f},{lent_hours(original):.2f}",
        f"returned,1,{gpu_seconds(parked) / 3600:.2f},0.00,{lent_hours(parked):.2f}"]
    ledger = gate_setup["ledger"]  # through the preemption and the resume, no GPU was promised twice
    assert ledger.samples > 20 and ledger.peak <= TOTAL_GPUS, (ledger.peak, ledger.worst)
    out, _ = cli("why", "resume", *NS)
    assert out.splitlines()[0] == (f"cancelled at {stamp(parked['status']['finishedAt'])} after "
                                   f"{(gpu_seconds(original) + gpu_seconds(parked)) / 3600:.2f} GPU-hours and "
                                   "1 preemption(s)")
