"""`offhours logs RUN`: the main logs of every attempt of a run, streamed and bounded, from the pods or the log archive.

A run stopped for reclaim goes on as a parked copy that resumes from the checkpoint: each copy is an
attempt, and each pod's log is printed under a header naming the workflow, the pod and the attempt. A pod
that is gone (deleted when its workflow was stopped) is read back from Argo's log archive when `render
--log-archive` configured one (cluster/log_archive.py). Every log is copied as it arrives (log_stream.py): at
most LOG_BYTES of it (the API server and S3 are asked for no more), within LOG_SECONDS, one chunk in memory.
"""

import argparse
import os
import sys
from collections.abc import Iterator
from typing import Any

from offhours.scripts.cli.jobs import CommandError, _common, _guarded, _namespaces, _reader, find_run, read_pool
from offhours.scripts.cli.log_stream import CHUNK_BYTES, LOG_BYTES, LOG_SECONDS, Copied, bounded_chunks, copy_log
from offhours.scripts.cli.text import printable
from offhours.scripts.cluster.access import READ_LOGS
from offhours.scripts.cluster.base import MAX_WORKFLOW_PODS
from offhours.scripts.cluster.log_archive import Archived, ArchiveError, ArchiveReader, archive_of
from offhours.scripts.names import LOG_ARCHIVE_CONFIGMAP

API_SECONDS = (10, 30)  # connect and read timeouts of one log request (the whole read is LOG_SECONDS)
PAGE_PODS = 250  # pods per page of an attempt's pod listing (MAX_WORKFLOW_PODS at most in all)


def step_matches(pod: dict[str, Any], step: str | None) -> bool:
    """Whether a workflow pod belongs to step `step` (its node name ends with it, or its template is it)."""
    if not step:
        return True
    meta = pod.get("metadata") or {}
    node = str((meta.get("annotations") or {}).get("workflows.argoproj.io/node-name", ""))
    template = str((meta.get("annotations") or {}).get("workflows.argoproj.io/template", ""))
    last = node.rsplit(".", 1)[-1].split("(", 1)[0]
    return step in (last, node) or f'"name":"{step}"' in template.replace(" ", "")


def archived_step_matches(pod: str, workflow: str, step: str | None) -> bool:
    """Whether an archived pod log is step `step`'s: Argo names a step's pod `<workflow>-<template>-<hash>`."""
    return not step or pod.removeprefix(workflow + "-").startswith(step + "-")


def attempt_header(workflow: str, pod: str | None, attempt: int, attempts: int, state: str,
                   archived: bool = False, archive_note: str = "") -> str:
    """Return the line above a pod's log: the workflow and pod, which attempt of the run it is, where the log is from.

    A run stopped for reclaim goes on as a parked copy that resumes from the checkpoint: each copy
    is an attempt, and marking them lets a person see the resume. A run of one attempt needs no mark.
    """
    where = f"{workflow} / {pod}" if pod else workflow
    marks = []
    if attempts > 1:
        marks.append(f"attempt {attempt} of {attempts}, {state}")
        if attempt > 1:
            marks.append("resumed from the last checkpoint")
    if archived:
        marks.append("pod gone: its log from the log archive")
    mark = f" ({', '.join(marks)})" if marks else ""
    gone = "" if pod else f": no pods left (deleted when it was stopped; {archive_note or 'their logs went with them'})"
    return f"==> {where}{mark}{gone} <=="


def _archive(reader: Any, namespace: str) -> tuple[ArchiveReader | None, str]:
    """Return the namespace's log archive reader (None without one) and what to say when a pod's log is gone."""
    try:
        cm = reader.core.read_namespaced_config_map(LOG_ARCHIVE_CONFIGMAP, namespace, _request_timeout=API_SECONDS)
    except Exception as err:  # noqa: BLE001
        status = getattr(err, "status", None)
        if status == 404:
            return None, "no log archive is configured: `offhours render --log-archive` keeps them"
        return None, f"the log archive's ConfigMap {namespace}/{LOG_ARCHIVE_CONFIGMAP} could not be read" + (
            f" (HTTP {status})" if status else f" ({type(err).__name__})")
    try:
        archive = archive_of(getattr(cm, "data", None), f"ConfigMap {namespace}/{LOG_ARCHIVE_CONFIGMAP}")
    except ArchiveError as err:
        return None, str(err)
    # The ConfigMap lives where tenants write: its endpoint is never sent the caller's signed requests. A reader
    # names the endpoint it trusts (OFFHOURS_S3_ENDPOINT_URL); without one, only an archive on AWS' own is read.
    chosen = os.environ.get("OFFHOURS_S3_ENDPOINT_URL")
    if archive.endpoint and not chosen:
        return None, (f"the log archive names endpoint {printable(archive.endpoint[:120])}, which your credentials are "
                      "not sent to unless you name it: set OFFHOURS_S3_ENDPOINT_URL to the endpoint you trust")
    return ArchiveReader(archive, archive.endpoint_url(chosen)), ""


def _labelled_pods(core: Any, copy: Any) -> Iterator[Any]:
    """Yield the pods labelled with the copy's workflow, a page of PAGE_PODS at a time, at most MAX_WORKFLOW_PODS.

    Anyone who may create pods in the namespace can label thousands with the workflow's name: the read stops past
    the gate's own bound of a workflow's pods, one line naming it (CommandError), never the whole flood in memory.
    """
    from offhours.scripts.cluster.errors import describe_api_error

    selector, token, listed = f"workflows.argoproj.io/workflow={copy.name}", None, 0
    while True:
        try:
            page = core.list_namespaced_pod(copy.namespace, label_selector=selector, limit=PAGE_PODS,
                                            _request_timeout=API_SECONDS, **({"_continue": token} if token else {}))
        except Exception as err:  # noqa: BLE001
            raise CommandError(describe_api_error(f"list pods of {copy.name}", err)) from None
        items = list(page.items or [])
        listed += len(items)
        if listed > MAX_WORKFLOW_PODS:
            raise CommandError(f"list pods of {copy.name}: more than {MAX_WORKFLOW_PODS} pods carry its workflow "
                               "label (someone labelled pods with its name): not read to the end")
        yield from items
        metadata = getattr(page, "metadata", None)
        token = getattr(metadata, "_continue", None) if metadata is not None else None
        if not token:
            return


def _copy(chunks: Any, follow: bool = False) -> Copied:
    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    if follow:  # a person stops it: no cap, no deadline, still one chunk at a time
        return copy_log(bounded_chunks(chunks), write, cap=None, seconds=None)
    return copy_log(bounded_chunks(chunks), write, cap=LOG_BYTES, seconds=LOG_SECONDS)


def _say_cut(copied: Copied) -> None:
    if copied.cut is not None:
        print(printable(f"(log {copied.cut}: {copied.written} bytes shown)"))


def _cmd_logs(args: argparse.Namespace) -> int:
    from offhours.scripts.cluster.errors import describe_api_error
    from offhours.scripts.cluster.kube import owned_by_workflow

    reader = _reader(args)
    pool = read_pool(args, reader=reader)
    run = find_run(pool, args.name, _namespaces(args), READ_LOGS, reader.access)
    attempts: list[tuple[Any, list[dict[str, Any]]]] = []
    for copy in run.copies:
        # The label is anyone's to set on a pod of theirs: only the pods the copy owns (as the gate counts them) are its.
        items = sorted((reader.api.sanitize_for_serialization(p) for p in _labelled_pods(reader.core, copy)
                        if owned_by_workflow(p, copy.name, copy.uid)),
                       key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "")
        attempts.append((copy, [p for p in items if step_matches(p, args.step)]))
    newest = next((ps[-1] for _, ps in reversed(attempts) if ps), None)
    archives: dict[str, tuple[ArchiveReader | None, str]] = {}
    unread: list[str] = []
    found_gone: list[tuple[list[Archived], str, str | None]] = []  # per attempt: archived logs, the note, a failure
    for copy, pods in attempts:
        if copy.namespace not in archives:
            archives[copy.namespace] = _archive(reader, copy.namespace)
        archive, note = archives[copy.namespace]
        live, gone, failed = {p["metadata"]["name"] for p in pods}, [], None
        if archive is not None:
            try:
                gone = [a for a in archive.logs(copy.namespace, copy.name, copy.created)
                        if a.pod not in live and archived_step_matches(a.pod, copy.name, args.step)]
            except ArchiveError as err:
                note, failed = f"its archived logs could not be read: {err}", str(err)
        found_gone.append((gone, note or "none in the log archive", failed))
    if newest is None and not any(gone or failed for gone, _, failed in found_gone):
        what = f" for step {args.step!r}" if args.step else ""
        raise CommandError(f"{printable(run.run_id)} has no pods{printable(what)} yet (it is {run.state})")
    for number, ((copy, pods), (gone, note, failed)) in enumerate(zip(attempts, found_gone), 1):
        archive = archives[copy.namespace][0]
        if failed is not None and not pods:
            unread.append(failed)
        if not pods and not gone:
            print(printable(attempt_header(copy.name, None, number, len(attempts), copy.state, archive_note=note)),
                  flush=True)
        for log in gone:
            assert archive is not None
            print(printable(attempt_header(copy.name, log.pod, number, len(attempts), copy.state, archived=True)),
                  flush=True)
            try:
                _say_cut(_copy(archive.chunks(log.key, LOG_BYTES, CHUNK_BYTES) if log.size else iter(())))
            except ArchiveError as err:
                print(printable(f"({err})"))
                unread.append(str(err))
        for pod in pods:
            name = pod["metadata"]["name"]
            print(printable(attempt_header(copy.name, name, number, len(attempts), copy.state)), flush=True)
            follow = bool(args.follow) and pod is newest
            if (pod.get("status") or {}).get("phase") == "Pending" and not follow:
                # Not started (unschedulable, or waiting for its node): it has no log yet, which is no failure.
                print("(not started yet: no log)")
                continue
            try:
                # Streamed as the API server sends it (the client's own decoding would print a bytes repr, b'...').
                bounds = {} if follow else {"limit_bytes": LOG_BYTES + 1, "_request_timeout": API_SECONDS}
                answer = reader.core.read_namespaced_pod_log(name, copy.namespace, container="main", follow=follow,
                                                             _preload_content=False, **bounds)
                try:
                    _say_cut(_copy(answer.stream(CHUNK_BYTES), follow))
                finally:
                    getattr(answer, "release_conn", lambda: None)()
            except Exception as err:  # noqa: BLE001 - one pod's unreadable log does not hide the others
                problem = describe_api_error(f"log of {name}", err)
                print(printable(f"({problem})"))
                unread.append(problem)
    if unread:
        # Every log that could be read is printed above; a missing one still fails the command.
        raise CommandError(f"{len(unread)} pod log(s) could not be read; the first: {unread[0]}")
    return 0


def register(subparsers: Any) -> None:
    """Add `logs` to the `offhours` command."""
    logs = subparsers.add_parser("logs", help="main logs of a job's pods, across its parked copies (a stopped one's "
                                 "from the log archive), streamed: at most 32 MiB and 120 s a log")
    _common(logs)
    logs.add_argument("name", help="workflow name or run id")
    logs.add_argument("-f", "--follow", action="store_true", help="follow the newest pod")
    logs.add_argument("--step", help="only pods of this step")
    logs.set_defaults(func=_guarded(_cmd_logs))
