"""`Cluster` over the Kubernetes API (the `kubernetes` client; Argo workflows as custom objects).

Conflicts (409), throttling (429) and server errors (5xx) are retried with exponential backoff;
when the retries run out the call raises `ClusterError` naming the call and the answer. Every
write is idempotent, so the next tick finishes what a failed one left.
"""

import json
import os
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from datetime import datetime, timezone
from functools import partial
from typing import Any, TypeVar

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from offhours.scripts.cluster import placement_pods
from offhours.scripts.cluster.base import (
    GPU_QUOTA_KEY,
    MAX_NODE_PODS,
    MAX_POOL_NODES,
    MAX_POOL_PODS,
    MAX_WORKFLOW_PODS,
    RAISE_TRIES,
    Autoscaler,
    ClusterError,
    ParkedCopy,
    Pod,
    PoolReadCutShort,
    ScaleTarget,
    Serving,
    ServingWrite,
    check_lower,
    check_raise,
    gpu_count,
    set_serving_value,
    stop_notes,
)
from offhours.scripts.cluster.clock import ServerClock, parse_http_date
from offhours.scripts.cluster.errors import failed_call
from offhours.scripts.cluster.lease import LeaseObserver
from offhours.scripts.cluster.scale_target import (
    controller_owner,
    gpus_per_replica,
    group_gpus,
    group_selector,
    target_refusal,
)
from offhours.scripts.cluster.template_grace import MAX_TEMPLATES
from offhours.scripts.cluster.workflow import (
    PLURAL,
    build_parked_copy,
    elsewhere,
    exit_seconds_text,
    grace_capped_parameters,
    is_own_copy,
    own_grace_refusal,
    provenance_at_stop,
    same_workflow,
    workflow_job,
)
from offhours.scripts.names import (
    ANNOTATION_ADMITTED_AT,
    ANNOTATION_BORROWED_FROM,
    ANNOTATION_DELETION_COST,
    ANNOTATION_EXIT_SECONDS,
    ANNOTATION_PREEMPTED_AT,
    ANNOTATION_QUEUE_POSITION,
    ANNOTATION_WAITING_REASON,
    ARGO_API_VERSION,
    ARGO_COMPLETED_LABEL,
    ARGO_GROUP,
    ARGO_VERSION,
    ARGO_WORKFLOW_LABEL,
    EVENT_SOURCE,
    FINISHED_PHASES,
    GPU_QUOTA,
    GPU_RESOURCE,
    KEDA_GROUP,
    KEDA_VERSION,
    LABEL_COPY_OF,
    LABEL_MANAGED,
    LABEL_SERVICE,
    LABEL_STATE,
    LEASE_NAME,
    LEASE_NOTE_PREFIX,
    LEDGER_CONFIGMAP,
    POD_ENDED_PHASES,
    STATE_ADMITTED,
    STATE_CONFIGMAP_PREFIX,
    STATE_KEY,
    STATE_PREEMPTED,
    STATE_RETURNED,
    aggregated_event_name,
    state_configmap_name,
)
from offhours.scripts.policy.holding import PodSeat, pod_seat
from offhours.scripts.policy.placement import Node, Replica
from offhours.scripts.policy.plan import Job
from offhours.scripts.policy.release import PodExit
from offhours.scripts.policy.target import ScaleTargetRef, parse_target_text
from offhours.scripts.runtime.provenance import reported_digest

T = TypeVar("T")
# Kubernetes' metadata-only answer to a list (as kube-controller-manager's metadata informers ask for it).
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
NOT_TERMINAL = "status.phase!=Succeeded,status.phase!=Failed"
# The pods that hold a node as the scheduler counts them: bound, or nominated and not yet bound (server-side).
BOUND = f"spec.nodeName!=,{NOT_TERMINAL}"
NOMINATED = f"spec.nodeName=,status.nominatedNodeName!=,{NOT_TERMINAL}"
PAGE_SIZE = 500  # items per list page: a list's answer stays bounded however many objects there are
UNSCHEDULABLE_CHUNK = 100  # workflow names per label selector of one pending-pods read (the selector stays short)
MAX_PLACEMENT_NODES = 2000  # nodes read for one service's placement: a bound on the tick's reads, not a fleet's limit
HPA_LIST_SECONDS = 5.0  # one list of a namespace's HPAs serves every service asking within this window
KEDA_PLURAL = "scaledobjects"
KEDA_DEFAULT_MAX = 100  # a ScaledObject's maxReplicaCount when it leaves it out
VERSION_TRIES = 3  # patches of a ScaledObject without maxReplicaCount whose resourceVersion moved meanwhile
TEMPLATE_PLURAL = "workflowtemplates"
RETRIED_STATUSES = {409, 429, 500, 502, 503, 504}
JSON_PATCH = "application/json-patch+json"
MAX_START_SECONDS = 6 * 3600.0  # a longer "start" is a pod that waited for something else (a quota, a node)


def load_client_config() -> None:
    """Use the in-cluster configuration in a pod, the kubeconfig elsewhere."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        # $KUBECONFIG read now, not when the client library was imported (it caches it at import).
        from offhours.scripts.inputs.kubeconfig import check_kubeconfig  # here: a small hunk in a busy file

        check_kubeconfig(os.environ.get("KUBECONFIG") or None)  # bounded and checked first (the input layer)
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG") or None)


class KubeCluster:
    """The real cluster."""

    def __init__(self, api_client: client.ApiClient | None = None, retries: int = 5, backoff: float = 0.2,
                 sleep: Callable[[float], None] = time.sleep, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.api = api_client or client.ApiClient()
        # Typed Any: the client's models make every field Optional; the API server fills them.
        self.apps: Any = client.AppsV1Api(self.api)
        self.core: Any = client.CoreV1Api(self.api)
        self.custom: Any = client.CustomObjectsApi(self.api)
        self.coordination: Any = client.CoordinationV1Api(self.api)
        self.autoscaling: Any = client.AutoscalingV2Api(self.api)
        self.retries = retries
        self.backoff = backoff
        self.sleep = sleep
        self.monotonic = monotonic
        self._hpa_lists: dict[str, tuple[float, list[Any]]] = {}
        self._resources: dict[tuple[str, str], tuple[str, bool]] = {}  # (apiVersion, kind) -> (plural, has /scale)
        self._api_versions: dict[str, str] = {}  # kind -> apiVersion of the scale targets read (for Events)
        self.lease_observer = LeaseObserver(monotonic)
        self.server_clock = ServerClock(monotonic)  # the API server's time, from the Date of its answers

    def _call(self, what: str, fn: Callable[[], T], accept: dict[int, T] | None = None,
              retried: Collection[int] = RETRIED_STATUSES) -> T:
        """Call the API, retrying transient answers (`retried`); `accept` maps statuses that are a result, not an error."""
        delay = self.backoff
        for attempt in range(self.retries + 1):
            try:
                result = fn()
                self._heard_date()
                return result
            except ApiException as err:
                if accept is not None and err.status in accept:
                    return accept[err.status]
                if err.status not in retried or attempt == self.retries:
                    raise ClusterError(failed_call(what, err)) from None
            except urllib3.exceptions.HTTPError as err:
                if attempt == self.retries:
                    raise ClusterError(failed_call(what, err)) from None
            self.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def _heard_date(self) -> None:
        """Take the API server's time from the `Date` of the answer just received."""
        answer = getattr(self.api, "last_response", None)
        getheader = getattr(answer, "getheader", None)
        server = parse_http_date(getheader("Date")) if callable(getheader) else None
        if server is not None:
            self.server_clock.heard(server)

    def server_time(self) -> float:
        """Return the API server's time now: the `Date` of its latest answer, advanced on this process's monotonic clock."""
        now = self.server_clock.now()
        if now is None:
            self._call("read the API server's time", lambda: client.VersionApi(self.api).get_code())
            now = self.server_clock.now()
        if now is None:
            raise ClusterError("the API server's answers carry no Date header: offhours has no clock to date by")
        return now

    def _pages(self, what: str, list_page: Callable[..., Any]) -> Iterator[Any]:
        """Yield every item of a typed list call, one page of PAGE_SIZE at a time (limit/continue: bounded reads)."""
        token: str | None = None
        limit = PAGE_SIZE
        while True:
            page = self._call(what, lambda: list_page(limit=limit, **({"_continue": token} if token else {})))
            yield from page.items or []
            token = page.metadata._continue if page.metadata is not None else None
            if not token:
                return

    def _bounded_pages(self, what: str, list_page: Callable[..., Any], most: int = MAX_POOL_PODS) -> Iterator[Any]:
        """Yield the items of `_pages`, raising ClusterError past `most` of them (a read a tenant can make endless)."""
        for listed, item in enumerate(self._pages(what, list_page), start=1):
            if listed > most:
                raise ClusterError(f"{what}: more than {most} items: not read to the end")
            yield item

    # -- scale targets and pods: any kind with a scale subresource ------------------------------
    def deployment(self, namespace: str, service: str, name: str | None = None) -> ScaleTarget:
        """Return the scale target of `service` (`name`: its text; None: the Deployment labelled with the service)."""
        if not name:
            items = self._call(f"list deployments {LABEL_SERVICE}={service}", lambda: self.apps.list_namespaced_deployment(
                namespace, label_selector=f"{LABEL_SERVICE}={service}")).items
            if len(items) != 1:
                raise ClusterError(f"expected one Deployment labelled {LABEL_SERVICE}={service} in {namespace}, "
                                   f"found {len(items)}")
            name = str(items[0].metadata.name)
        target = self._scale_target(namespace, service, _target_ref(name), missing_ok=False)
        assert target is not None
        return target

    def find_deployment(self, namespace: str, name: str) -> ScaleTarget | None:
        """Return the scale target of text `name`, or None if it does not exist."""
        return self._scale_target(namespace, None, _target_ref(name), missing_ok=True)

    def _scale_target(self, namespace: str, service: str | None, ref: ScaleTargetRef,
                      missing_ok: bool) -> ScaleTarget | None:
        """Read the object's metadata and its scale; refuse what the gate must not scale (`target_refusal`)."""
        path, has_scale = self._object_path(namespace, ref)
        what = f"get {ref.kind.lower()} {namespace}/{ref.name}"
        obj = self._call(what, partial(self._json, "GET", path), accept={404: None} if missing_ok else None)
        if obj is None:
            return None
        meta = obj.get("metadata") or {}
        scale = self._call(f"{what}/scale", partial(self._json, "GET", f"{path}/scale")) if has_scale else {}
        selector = str((scale.get("status") or {}).get("selector") or "")
        refusal = target_refusal(ref, has_scale, selector, controller_owner(meta.get("ownerReferences") or []))
        if refusal:
            raise ClusterError(refusal)
        spec_replicas = (scale.get("spec") or {}).get("replicas")
        replicas = int(spec_replicas) if spec_replicas is not None else 0
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        self._api_versions[ref.kind] = ref.api_version
        return ScaleTarget(
            namespace=namespace, name=ref.name, service=service if service is not None else labels.get(LABEL_SERVICE, ""),
            replicas=replicas, annotations={str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
            selector=selector, uid=str(meta.get("uid") or ""), api_version=ref.api_version, kind=ref.kind,
            labels=labels, current_replicas=int((scale.get("status") or {}).get("replicas") or 0),
            group_gpus=group_gpus(ref, obj.get("spec") if isinstance(obj.get("spec"), dict) else {}))

    def _object_path(self, namespace: str, ref: ScaleTargetRef) -> tuple[str, bool]:
        """Return the object's API path and whether its kind has a scale subresource, from the API's discovery."""
        plural, has_scale = self._discover(ref)
        base = f"/apis/{ref.api_version}" if ref.group else f"/api/{ref.version}"
        return f"{base}/namespaces/{namespace}/{plural}/{ref.name}", has_scale

    def resource_of(self, ref: ScaleTargetRef) -> str:
        """Return the resource (plural) the API server serves `ref`'s kind under (what RBAC must name)."""
        return self._discover(ref)[0]

    def _discover(self, ref: ScaleTargetRef) -> tuple[str, bool]:
        """Map a kind to its resource (plural) and whether it serves `/scale`: the group version's resource list.

        Kept once found (a kind's resource never changes); a kind not found is asked again next time (its CRD
        may be installed since).
        """
        key = (ref.api_version, ref.kind)
        if key in self._resources:
            return self._resources[key]
        path = f"/apis/{ref.api_version}" if ref.group else f"/api/{ref.version}"
        found = self._call(f"discover {ref.api_version}", partial(self._json, "GET", path), accept={404: None})
        if found is None:
            raise ClusterError(f"{ref}: apiVersion {ref.api_version} is not served by this cluster")
        names = {str(r.get("name")): r for r in found.get("resources") or []}
        plural = next((n for n, r in names.items() if "/" not in n and r.get("kind") == ref.kind), None)
        if plural is None:
            raise ClusterError(f"{ref}: kind {ref.kind} is not served in {ref.api_version}")
        self._resources[key] = plural, f"{plural}/scale" in names
        return self._resources[key]

    def _json(self, method: str, path: str, body: Any = None, content_type: str | None = None) -> Any:
        """One request to the API server by path (any kind): its JSON answer."""
        headers = {"Accept": "application/json", **({"Content-Type": content_type} if content_type else {})}
        answer = self.api.call_api(path, method, body=body, header_params=headers, auth_settings=["BearerToken"],
                                   _preload_content=False, _return_http_data_only=True)
        return json.loads(answer.data)

    def autoscaler(self, dep: ScaleTarget) -> Autoscaler | None:
        """Return the HPA that targets `dep` (by kind and name), or the KEDA ScaledObject that owns such an HPA."""
        for hpa in self._hpas(dep.namespace):
            ref = hpa.spec.scale_target_ref
            if ref.kind != dep.kind or ref.name != dep.name:
                continue
            owner = next((o for o in hpa.metadata.owner_references or [] if o.kind == "ScaledObject"), None)
            if owner is None:
                return Autoscaler("HorizontalPodAutoscaler", dep.namespace, hpa.metadata.name,
                                  int(hpa.spec.min_replicas if hpa.spec.min_replicas is not None else 1),
                                  int(hpa.spec.max_replicas))
            # KEDA reconciles its HPA from the ScaledObject: the cap must be written there.
            obj = self._call(f"get scaledobject {dep.namespace}/{owner.name}", lambda: self.custom.get_namespaced_custom_object(
                KEDA_GROUP, KEDA_VERSION, dep.namespace, KEDA_PLURAL, owner.name))
            spec = obj.get("spec") or {}
            return Autoscaler("ScaledObject", dep.namespace, owner.name, int(spec.get("minReplicaCount", 0)),
                              int(spec.get("maxReplicaCount", KEDA_DEFAULT_MAX)))
        return None

    def _hpas(self, namespace: str) -> list[Any]:
        """Return the namespace's HPAs, listed (in pages) at most once per HPA_LIST_SECONDS.

        Every service asks; listing them all once per service would read services x HPAs objects a
        tick (250,000 for 500 services). An HPA that appears within the window is seen a few seconds
        later, as one listed just before it appeared would be.
        """
        cached = self._hpa_lists.get(namespace)
        if cached is not None and self.monotonic() - cached[0] < HPA_LIST_SECONDS:
            return cached[1]
        hpas = list(self._pages(f"list horizontalpodautoscalers {namespace}", lambda **page: (
            self.autoscaling.list_namespaced_horizontal_pod_autoscaler(namespace, **page))))
        self._hpa_lists[namespace] = (self.monotonic(), hpas)
        return hpas

    def read_state(self, namespace: str, service: str) -> str | None:
        """Return `state.json` of the ConfigMap offhours-state-<service>, or None if there is none."""
        name = state_configmap_name(service)
        absent: dict[int, Any] = {404: None}
        cm = self._call(f"read configmap {namespace}/{name}", lambda: self.core.read_namespaced_config_map(name, namespace),
                        accept=absent)
        return None if cm is None else (cm.data or {}).get(STATE_KEY)

    def write_state(self, namespace: str, service: str, text: str) -> None:
        """Write `state.json` of the ConfigMap offhours-state-<service>, creating it the first time."""
        name = state_configmap_name(service)
        missing: dict[int, bool] = {404: False}
        patched = self._call(f"write configmap {namespace}/{name}", lambda: bool(self.core.patch_namespaced_config_map(
            name, namespace, {"data": {STATE_KEY: text}})), accept=missing)
        if not patched:
            body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels={LABEL_MANAGED: "true"}),
                                      data={STATE_KEY: text})
            self._call(f"create configmap {namespace}/{name}", lambda: self.core.create_namespaced_config_map(namespace, body))

    def state_records(self, namespace: str) -> dict[str, str]:
        """Return `state.json` of every offhours-state-<service> ConfigMap of `namespace`, by service (paginated)."""
        out: dict[str, str] = {}
        for cm in self._pages(f"list configmaps {namespace}", lambda **page: self.core.list_namespaced_config_map(
                namespace, label_selector=f"{LABEL_MANAGED}=true", **page)):
            name = str(cm.metadata.name or "")
            text = (cm.data or {}).get(STATE_KEY)
            if name.startswith(STATE_CONFIGMAP_PREFIX) and text is not None:
                out[name[len(STATE_CONFIGMAP_PREFIX):]] = text
        return out

    def state_services(self, namespace: str) -> list[str]:
        """Return the services of every state ConfigMap (offhours-state-<service>, labelled managed).

        A metadata-only list (PartialObjectMetadataList), paginated: the gate asks every tick which records
        exist, and the answer must not grow with what the records hold.
        """
        out: list[str] = []
        token: str | None = None
        while True:
            query: list[tuple[str, Any]] = [("labelSelector", f"{LABEL_MANAGED}=true"), ("limit", PAGE_SIZE)]
            if token:
                query.append(("continue", token))
            page = self._call(f"list configmaps {namespace} (metadata only)",
                              partial(self._metadata_page, f"/api/v1/namespaces/{namespace}/configmaps", query))
            for item in page.get("items") or []:
                name = str((item.get("metadata") or {}).get("name") or "")
                if name.startswith(STATE_CONFIGMAP_PREFIX):
                    out.append(name[len(STATE_CONFIGMAP_PREFIX):])
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return sorted(out)

    def _metadata_page(self, path: str, query: list[tuple[str, Any]]) -> dict[str, Any]:
        """GET one page of a list as PartialObjectMetadataList: names, labels and the like, never the objects' data."""
        answer = self.api.call_api(path, "GET", query_params=query, header_params={"Accept": METADATA_ONLY},
                                   auth_settings=["BearerToken"], _preload_content=False,
                                   _return_http_data_only=True)
        page = json.loads(answer.data)
        if not isinstance(page, dict) or page.get("kind") != "PartialObjectMetadataList":
            raise ClusterError(f"GET {path}: expected a PartialObjectMetadataList, got "
                               f"{page.get('kind') if isinstance(page, dict) else type(page).__name__}")
        return page

    def delete_state(self, namespace: str, service: str) -> None:
        """Delete the ConfigMap offhours-state-<service>; a missing one is success."""
        name = state_configmap_name(service)
        self._call(f"delete configmap {namespace}/{name}", lambda: self.core.delete_namespaced_config_map(name, namespace),
                   accept={404: None})

    def ledger(self, namespace: str) -> dict[str, str]:
        """Return the data of the ConfigMap offhours-lent (object UID -> entry), or {} if there is none."""
        absent: dict[int, Any] = {404: None}
        cm = self._call(f"read configmap {namespace}/{LEDGER_CONFIGMAP}", lambda: self.core.read_namespaced_config_map(
            LEDGER_CONFIGMAP, namespace), accept=absent)
        return {} if cm is None else {str(k): str(v) for k, v in (cm.data or {}).items()}

    def write_ledger_entry(self, namespace: str, uid: str, text: str | None) -> None:
        """Merge-patch one key of offhours-lent (None: remove it); create the ConfigMap the first time."""
        missing: dict[int, bool] = {404: False}
        patched = self._call(f"write configmap {namespace}/{LEDGER_CONFIGMAP}", lambda: bool(
            self.core.patch_namespaced_config_map(LEDGER_CONFIGMAP, namespace, {"data": {uid: text}})), accept=missing)
        if not patched and text is not None:
            body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=LEDGER_CONFIGMAP, labels={LABEL_MANAGED: "true"}),
                                      data={uid: text})
            self._call(f"create configmap {namespace}/{LEDGER_CONFIGMAP}",
                       lambda: self.core.create_namespaced_config_map(namespace, body))

    # -- serving writes: conditional on the one field they change ------------------------------
    def lower_serving(self, target: Serving, expected: int, value: int) -> ServingWrite:
        """Lower serving from `expected` to `value` with a JSON-patch test of that field; a failed test: the value found."""
        check_lower(expected, value)
        found = self._test_and_replace(target, expected, value, f"lower {_serving_name(target)} from {expected} to {value}")
        answer = ServingWrite(value) if found is None else ServingWrite(found, conflict=True)
        set_serving_value(target, answer.value)
        return answer

    def raise_serving(self, target: Serving, observed: int, at_least: int) -> ServingWrite:
        """Make serving max(what it holds, at_least): test + replace; a failed test reads again and tries at once."""
        check_raise(observed, at_least)
        what = f"raise {_serving_name(target)} to {at_least}"
        expected = observed
        for _ in range(RAISE_TRIES):
            if expected >= at_least:
                answer = ServingWrite(expected)
                break
            found = self._test_and_replace(target, expected, at_least, what)
            if found is None:
                answer = ServingWrite(at_least)
                break
            expected = found
        else:
            raise ClusterError(f"{what}: its value changed at each of {RAISE_TRIES} tries")
        set_serving_value(target, answer.value)
        return answer

    def _test_and_replace(self, target: Serving, expected: int, value: int, what: str) -> int | None:
        """One JSON patch: `test` the field holds `expected`, `replace` it by `value`. None: written; else the value found.

        The API server answers a failed `test` with 422 (409 from a conflict on its own retry): then the field is
        read again. Found at `expected` still, the refusal was something else: an error naming it; unless the patch
        tested a ScaledObject's resourceVersion (no maxReplicaCount) that has moved since: then it is tried again.
        """
        refused: list[ApiException] = []
        versioned: list[str | None] = []  # per patch: the resourceVersion it tested instead of the field, if any

        def patch() -> bool:
            try:
                self._serving_patch(target, expected, value, versioned)
            except ApiException as err:
                if err.status not in (409, 422):
                    raise
                refused.append(err)
                return False
            return True

        for _ in range(VERSION_TRIES):
            if self._call(what, patch, retried=RETRIED_STATUSES - {409}):
                return None
            found = self._serving_read(target, what)
            if found == value:
                return None  # written (an answer lost and the write tried again), or another writer chose the same
            if found != expected:
                return found
            if not (versioned and versioned[-1]) or versioned[-1] in versioned[:-1]:
                raise ClusterError(failed_call(what, refused[-1]))  # refused, though the object did not move
            # The field is still absent: any write to the object (KEDA's own status updates) moved its
            # resourceVersion between the read and the patch. Read it again and try again.
        return found  # nothing written: the caller reads serving again, as after another writer's change

    def _serving_patch(self, target: Serving, expected: int, value: int, versioned: list[str | None]) -> None:
        if isinstance(target, ScaleTarget):
            path, _ = self._object_path(target.namespace, target.ref)
            self._json("PATCH", f"{path}/scale", _test_replace("/spec/replicas", expected, value), JSON_PATCH)
        elif target.kind == "ScaledObject":
            body = self._keda_max_patch(target, expected, value)
            versioned.append(body[0]["value"] if body[0]["path"] == "/metadata/resourceVersion" else None)
            self.custom.patch_namespaced_custom_object(KEDA_GROUP, KEDA_VERSION, target.namespace, KEDA_PLURAL,
                                                       target.name, body)
        else:
            self.autoscaling.patch_namespaced_horizontal_pod_autoscaler(target.name, target.namespace, _test_replace(
                "/spec/maxReplicas", expected, value))

    def _keda_max_patch(self, target: Autoscaler, expected: int, value: int) -> list[dict[str, Any]]:
        """Return the JSON patch that lowers a ScaledObject's maxReplicaCount only if it still holds `expected`.

        A ScaledObject may leave the field out (KEDA's default, 100): no `test` can read an absent field, so
        that one first write tests the object's resourceVersion instead (a conflict then only means: read again).
        """
        obj = self.custom.get_namespaced_custom_object(KEDA_GROUP, KEDA_VERSION, target.namespace, KEDA_PLURAL,
                                                       target.name)
        if "maxReplicaCount" in (obj.get("spec") or {}):
            return _test_replace("/spec/maxReplicaCount", expected, value)
        if expected != KEDA_DEFAULT_MAX:
            return _test_replace("/spec/maxReplicaCount", expected, value)  # fails: read again
        return [{"op": "test", "path": "/metadata/resourceVersion", "value": obj["metadata"]["resourceVersion"]},
                {"op": "add", "path": "/spec/maxReplicaCount", "value": value}]

    def _serving_read(self, target: Serving, what: str) -> int:
        """Read the field a serving write changes, as it is now."""
        if isinstance(target, ScaleTarget):
            path, _ = self._object_path(target.namespace, target.ref)
            scale = self._call(f"{what}: read again", partial(self._json, "GET", f"{path}/scale"))
            return int((scale.get("spec") or {}).get("replicas") or 0)
        if target.kind == "ScaledObject":
            obj = self._call(f"{what}: read again", lambda: self.custom.get_namespaced_custom_object(
                KEDA_GROUP, KEDA_VERSION, target.namespace, KEDA_PLURAL, target.name))
            return int((obj.get("spec") or {}).get("maxReplicaCount", KEDA_DEFAULT_MAX))
        hpa = self._call(f"{what}: read again", lambda: self.autoscaling.read_namespaced_horizontal_pod_autoscaler(
            target.name, target.namespace))
        return int(hpa.spec.max_replicas)

    def ready_pods(self, dep: ScaleTarget) -> list[Pod]:
        """Return the target's ready, not terminating pods (its scale's selector: never empty, `target_refusal`)."""
        selector = dep.selector
        if not selector.strip():
            raise ClusterError(f"{dep.ref}: no selector to find its pods by")
        pods = self._call(f"list pods {selector}", lambda: self.core.list_namespaced_pod(
            dep.namespace, label_selector=selector)).items
        # The same list gives the GPUs a replica holds (a multi-node replica: all its pods'); a kind whose scale
        # selects only a replica's leader has every pod of its groups listed by its group label too.
        whole = group_selector(dep.ref)
        counted = pods if whole is None else self._call(f"list pods {whole}", lambda: self.core.list_namespaced_pod(
            dep.namespace, label_selector=whole)).items
        dep.gpus_per_replica = gpus_per_replica([_gpus_requested(p) for p in counted if p.metadata.deletion_timestamp
                                                 is None and (p.status is None or p.status.phase not in POD_ENDED_PHASES)],
                                                dep.current_replicas, dep.group_gpus)
        ready = []
        for pod in pods:
            conditions = {c.type: c for c in (pod.status.conditions or [])}
            cond = conditions.get("Ready")
            if pod.metadata.deletion_timestamp is None and cond is not None and cond.status == "True" \
                    and pod.status.pod_ip:
                ready.append(Pod(pod.metadata.name, pod.status.pod_ip, start_seconds(pod.metadata.creation_timestamp,
                                                                                    cond.last_transition_time)))
        return sorted(ready, key=lambda p: p.name)

    def scheduled_pods(self, dep: ScaleTarget) -> int:
        """Return how many of the target's pods, not terminating, are bound to a node."""
        selector = dep.selector  # the scale's status.selector (a label selector's text)
        pods = self._call(f"list pods {selector}", lambda: self.core.list_namespaced_pod(
            dep.namespace, label_selector=selector)).items
        return sum(1 for pod in pods if pod.metadata.deletion_timestamp is None and pod.spec.node_name)

    def workflow_pods(self, namespace: str, workflows: Mapping[str, str]) -> dict[str, list[PodExit]]:
        """Return the pods each workflow owns (found by Argo's workflow label), each workflow read on its own, in pages.

        A workflow with more than MAX_WORKFLOW_PODS labelled pods is left out (not measured this tick): its
        read stops there, so one job's thousands of pods bound neither the answer nor keep the other jobs
        unmeasured.
        """
        out: dict[str, list[PodExit]] = {}
        for name in sorted({w for w in workflows if _label_value(w)}):
            selector = f"{ARGO_WORKFLOW_LABEL}={name}"
            pods: list[PodExit] = []
            labelled = 0
            for pod in self._pages(f"list pods {selector}", partial(self.core.list_namespaced_pod, namespace,
                                                                    label_selector=selector)):
                labelled += 1
                if labelled > MAX_WORKFLOW_PODS:
                    break
                if owned_by_workflow(pod, name, workflows[name]):
                    pods.append(pod_exit(pod))
            else:
                out[name] = pods
        return out

    # -- Workflows --------------------------------------------------------------------------
    def jobs(self, namespace: str, service: str) -> list[Job]:
        """Return the unfinished offhours workflows of `service` (finished ones are left out by the server, paginated)."""
        # Retained finished workflows (thousands of them) never reach the gate: Argo labels them completed.
        selector = f"{LABEL_SERVICE}={service},{ARGO_COMPLETED_LABEL}!=true"
        return [job for wf in self._workflow_pages(namespace, selector) if (job := workflow_job(wf, service)) is not None]

    def _workflow_pages(self, namespace: str, selector: str) -> Iterator[dict[str, Any]]:
        """Yield every workflow matching `selector`, one page of PAGE_SIZE at a time (limit/continue)."""
        token: str | None = None
        limit = PAGE_SIZE
        while True:
            page = self._call(f"list workflows {selector}", lambda: self.custom.list_namespaced_custom_object(
                ARGO_GROUP, ARGO_VERSION, namespace, PLURAL, label_selector=selector, limit=limit,
                **({"_continue": token} if token else {})))
            yield from page.get("items") or []
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return

    def workflow_templates(self, namespace: str) -> dict[str, dict[str, Any]]:
        """Return the WorkflowTemplates of `namespace` by name (paginated), the first `MAX_TEMPLATES` the server lists."""
        out: dict[str, dict[str, Any]] = {}
        token: str | None = None
        while True:
            limit = min(PAGE_SIZE, MAX_TEMPLATES - len(out))
            page = self._call(f"list workflowtemplates in {namespace}", lambda: self.custom.list_namespaced_custom_object(
                ARGO_GROUP, ARGO_VERSION, namespace, TEMPLATE_PLURAL, limit=limit,
                **({"_continue": token} if token else {})))
            for item in page.get("items") or []:
                meta = item.get("metadata") if isinstance(item, dict) else None
                name = meta.get("name") if isinstance(meta, dict) else None
                if isinstance(name, str) and name and len(out) < MAX_TEMPLATES:
                    out[name] = item
            token = (page.get("metadata") or {}).get("continue")
            if not token or len(out) >= MAX_TEMPLATES:
                return out

    def workflow(self, namespace: str, name: str) -> dict[str, Any] | None:
        """Return a workflow, or None if it is gone."""
        def get() -> dict[str, Any] | None:
            return dict(self.custom.get_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, namespace, PLURAL, name))

        gone: dict[int, dict[str, Any] | None] = {404: None}
        return self._call(f"get workflow {namespace}/{name}", get, accept=gone)

    def _patch_workflow(self, what: str, namespace: str, name: str, body: dict[str, Any],
                        retried: Collection[int] = RETRIED_STATUSES) -> None:
        self._call(f"{what} workflow {namespace}/{name}", lambda: self.custom.patch_namespaced_custom_object(
            ARGO_GROUP, ARGO_VERSION, namespace, PLURAL, name, body), retried=retried)

    def admit(self, namespace: str, job: Job, deployment_uid: str = "", max_grace_seconds: float | None = None) -> None:
        """Resume a parked workflow (spec.suspend removed) and mark it admitted; with a cap, its grace capped too.

        The cap is written in the resume itself, guarded by the resourceVersion it was computed from:
        Argo re-reads the workflow's arguments when its suspend changes, and a tenant's edit in between
        is a conflict (this admission fails, the next tick retries), never an uncapped resume.
        """
        metadata = _admitted(deployment_uid)
        if job.exit_learnt and job.exit_seconds is not None:
            metadata["annotations"][ANNOTATION_EXIT_SECONDS] = exit_seconds_text(job.exit_seconds)
        spec: dict[str, Any] = {"suspend": None}
        self._cap_grace("admit", namespace, job, max_grace_seconds, metadata, spec)
        self._patch_workflow("admit", namespace, job.name, {"metadata": metadata, "spec": spec})

    def adopt(self, namespace: str, job: Job, deployment_uid: str = "", max_grace_seconds: float | None = None) -> None:
        """Mark a running workflow admitted; with a cap, the grace of its pods from now on capped as at admission."""
        metadata, spec = _admitted(deployment_uid), dict[str, Any]()
        self._cap_grace("adopt", namespace, job, max_grace_seconds, metadata, spec)
        self._patch_workflow("adopt", namespace, job.name, {"metadata": metadata, **({"spec": spec} if spec else {})})

    def _cap_grace(self, what: str, namespace: str, job: Job, max_grace_seconds: float | None,
                   metadata: dict[str, Any], spec: dict[str, Any]) -> None:
        """Add the capped grace parameter to `spec` and the guard of the read it was computed from to `metadata`."""
        if max_grace_seconds is None:
            return
        wf = self.workflow(namespace, job.name)
        if wf is None:
            raise ClusterError(f"{what} workflow {namespace}/{job.name}: it no longer exists")
        # The guard below covers only what comes after this read: an edit since the tick's list is in it.
        refused = own_grace_refusal(wf, job, max_grace_seconds)
        if refused:
            raise ClusterError(f"{what} workflow {namespace}/{job.name}: {refused}")
        capped = grace_capped_parameters(wf, max_grace_seconds)
        if capped is not None:
            spec["arguments"] = {"parameters": capped}
        # Guarded whether or not it rewrites them: a grace found within the cap is checked as of this read too.
        metadata["resourceVersion"] = str((wf.get("metadata") or {}).get("resourceVersion") or "")

    def list_workflows(self, namespace: str, selector: str = f"{LABEL_MANAGED}=true") -> list[dict[str, Any]]:
        """Return every workflow matching `selector`, finished ones included (for the usage report)."""
        return list(self._workflow_pages(namespace, selector))

    def stop(self, namespace: str, job: Job) -> None:
        """Stop (never Terminate: Stop runs the exit handlers) and mark preempted, with the last checkpoint known.

        Only the workflow the tick listed: its UID in the patch is a precondition (as the kubelet's status patch
        carries it), so the API server refuses the patch of a workflow deleted and made again under its name since
        (a conflict is not retried: it stays another workflow), never stopping it in its place. The next tick
        decides on the one it lists then.
        """
        metadata: dict[str, Any] = {"labels": {LABEL_STATE: STATE_PREEMPTED},
                                    "annotations": {ANNOTATION_PREEMPTED_AT: _now(), **stop_notes(job),
                                                    **self._provenance_at_stop(namespace, job)}}
        if job.uid:
            metadata["uid"] = job.uid
        self._patch_workflow("stop", namespace, job.name,
                             {"metadata": metadata,
                              # Argo v4.0.5 never acts on a suspended workflow's shutdown (`argo suspend` of a running
                              # one keeps its pods): the same patch unsuspends it, as `parked.stop_patch` does.
                              "spec": {"shutdown": "Stop", "suspend": None}},
                             retried=RETRIED_STATUSES - {409} if job.uid else RETRIED_STATUSES)

    def _provenance_at_stop(self, namespace: str, job: Job) -> dict[str, str]:
        """Return the run's record with the digests its pods report now (`workflow.provenance_at_stop`); {} on failure.

        Best effort: a stop is never held back by it (the copy then pins what its pods still report).
        """
        try:
            wf = self.workflow(namespace, job.name)
            if wf is None or (job.uid and str((wf.get("metadata") or {}).get("uid") or "") != job.uid):
                return {}
            return provenance_at_stop(wf, self._reported_digests(namespace, wf))
        except Exception:  # noqa: BLE001 - advisory: the stop goes on without it
            return {}

    def park_copy(self, namespace: str, job: Job, made: Collection[str] = (), token: str = "") -> ParkedCopy:
        """Create the parked copy; an existing object of that name, or linked to the job, is success only if made by the gate."""
        old = self.workflow(namespace, job.name)
        if old is None:
            raise ClusterError(f"park workflow {namespace}/{job.name}: it no longer exists")
        # Copied is the workflow the tick listed, never one made under its name since (it was never admitted).
        if (other := same_workflow(old, job, "park")) is not None:
            raise ClusterError(other)
        new = build_parked_copy(old, token, self._reported_digests(namespace, old))
        name = str(new["metadata"]["name"])

        def create(body: dict[str, Any]) -> ParkedCopy | None:
            answer = self.custom.create_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, namespace, PLURAL, body)
            return ParkedCopy(str(answer["metadata"]["name"]), str(answer["metadata"].get("uid") or ""))

        conflict: dict[int, ParkedCopy | None] = {409: None}
        created = self._call(f"create parked copy {namespace}/{name}", partial(create, new), accept=conflict)
        if created is not None:
            return created
        existing = self.workflow(namespace, name)  # 409: a retried tick's copy, or someone else's workflow
        if existing is None:
            raise ClusterError(f"create parked copy {namespace}/{name}: conflict, then gone")
        if is_own_copy(existing, old, made, token):
            return ParkedCopy(name, str(existing["metadata"]["uid"]))
        uid = str(old["metadata"].get("uid") or "")
        found = [wf for wf in self.list_workflows(namespace, f"{LABEL_COPY_OF}={uid}")
                 if is_own_copy(wf, old, made, token)] if uid else []
        if found:
            return ParkedCopy(str(found[0]["metadata"]["name"]), str(found[0]["metadata"]["uid"]))
        created = self._call(f"create parked copy {namespace}/{name}-*", partial(create, elsewhere(new)))
        assert created is not None
        return created

    def _reported_digests(self, namespace: str, wf: dict[str, Any]) -> dict[str, str]:
        """Each image the workflow's own pods run (as their spec names it) -> the digest their kubelet reported.

        Read for a parked copy, so that it runs what its first run ran; a read that fails pins nothing more.
        """
        meta = wf.get("metadata") or {}
        name, uid = str(meta.get("name") or ""), str(meta.get("uid") or "")
        if not _label_value(name):
            return {}
        selector = f"{ARGO_WORKFLOW_LABEL}={name}"
        out: dict[str, str] = {}
        try:
            for i, pod in enumerate(self._pages(f"list pods {selector}", partial(
                    self.core.list_namespaced_pod, namespace, label_selector=selector))):
                if i >= MAX_WORKFLOW_PODS:
                    break
                if owned_by_workflow(pod, name, uid):
                    out.update(pod_image_digests(pod))
        except ClusterError:
            return out
        return out

    def delete_workflow(self, namespace: str, name: str) -> None:
        """Delete a workflow; a missing one is success."""
        gone: dict[int, Any] = {404: None}
        self._call(f"delete workflow {namespace}/{name}", lambda: self.custom.delete_namespaced_custom_object(
            ARGO_GROUP, ARGO_VERSION, namespace, PLURAL, name), accept=gone)

    def gpu_quota(self, namespace: str) -> int | None:
        """Return the GPU requests the ResourceQuota offhours-gpus allows; None if it is missing."""
        absent: dict[int, Any] = {404: None}
        quota = self._call(f"read resourcequota {namespace}/{GPU_QUOTA}",
                           lambda: self.core.read_namespaced_resource_quota(GPU_QUOTA, namespace), accept=absent)
        hard = (quota.spec.hard or {}) if quota is not None and quota.spec is not None else None
        return None if hard is None or GPU_QUOTA_KEY not in hard else gpu_count(hard[GPU_QUOTA_KEY])

    def set_gpu_quota(self, namespace: str, gpus: int) -> None:
        """Create or update the ResourceQuota offhours-gpus (a merge patch of its one GPU key; create if missing)."""
        body = {"spec": {"hard": {GPU_QUOTA_KEY: str(gpus)}}}
        what = f"set resourcequota {namespace}/{GPU_QUOTA} to {gpus} GPUs"
        absent: dict[int, Any] = {404: False}
        patched = self._call(what, lambda: self.core.patch_namespaced_resource_quota(GPU_QUOTA, namespace, body),
                             accept=absent)
        if patched is False:
            self._call(what, lambda: self.core.create_namespaced_resource_quota(namespace, {
                "apiVersion": "v1", "kind": "ResourceQuota",
                "metadata": {"name": GPU_QUOTA, "namespace": namespace, "labels": {LABEL_MANAGED: "true"}}, **body}))

    def pool_seats(self, namespaces: Collection[str]) -> list[PodSeat]:
        """Return the pods of `namespaces` the scheduler charges a node with, as `holding.pod_seat` reads them.

        Only pods bound or nominated to a node and not ended are read (field selectors, server-side): a tenant's
        pending pods, however many, are never read. The rest is read in pages; past MAX_POOL_PODS a namespace is
        PoolReadCutShort (a count cut short would be lower than the truth: the gate then lends nothing new).
        """
        seats: list[PodSeat] = []
        for namespace in sorted(set(namespaces)):
            seats.extend(self._seats(f"list pods {namespace}", namespace, (BOUND, NOMINATED), MAX_POOL_PODS))
        return seats

    def nodes_selected(self, labels: Collection[tuple[str, str]]) -> list[str]:
        """Return the names of the nodes carrying every one of `labels` (a label selector; names only, in pages).

        Past MAX_POOL_NODES: PoolReadCutShort (the pool's nodes not all known: the gate lends nothing new).
        """
        selector = ",".join(f"{k}={v}" for k, v in labels)
        names: list[str] = []
        token: str | None = None
        while True:  # metadata only: a node's status (its images) is large, and only its name is used
            query: list[tuple[str, Any]] = [("labelSelector", selector), ("limit", PAGE_SIZE)]
            if token:
                query.append(("continue", token))
            page = self._call(f"list nodes {selector} (metadata only)", partial(self._metadata_page, "/api/v1/nodes",
                                                                                 query))
            for item in page.get("items") or []:
                if len(names) >= MAX_POOL_NODES:
                    raise PoolReadCutShort(f"list nodes {selector}: more than {MAX_POOL_NODES}")
                names.append(str((item.get("metadata") or {}).get("name") or ""))
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return [n for n in names if n]

    def node_seats(self, namespace: str, node: str) -> list[PodSeat]:
        """Return the pods of `namespace` bound or nominated to `node`, not ended; PoolReadCutShort past MAX_NODE_PODS."""
        return self._seats(f"list pods {namespace} on {node}", namespace,
                           (f"spec.nodeName={node},{NOT_TERMINAL}",
                            f"spec.nodeName=,status.nominatedNodeName={node},{NOT_TERMINAL}"), MAX_NODE_PODS)

    def _seats(self, what: str, namespace: str, selectors: Collection[str], most: int) -> list[PodSeat]:
        """Read the pods each field selector picks, `most` of them in all (past that: PoolReadCutShort)."""
        seats: list[PodSeat] = []
        for selector in selectors:
            for pod in self._pages(what, partial(self.core.list_namespaced_pod, namespace, field_selector=selector)):
                if len(seats) >= most:
                    raise PoolReadCutShort(f"{what}: more than {most} pods holding a node")
                seats.append(pod_seat(self.api.sanitize_for_serialization(pod), GPU_RESOURCE))
        return seats

    def delete_pod(self, namespace: str, name: str, uid: str, grace_seconds: int) -> None:
        """Delete a pod (that incarnation only: a UID precondition) within `grace_seconds`; a missing one is success."""
        body = client.V1DeleteOptions(grace_period_seconds=grace_seconds, preconditions=client.V1Preconditions(uid=uid))
        gone: dict[int, Any] = {404: None, 409: None}
        self._call(f"delete pod {namespace}/{name}", lambda: self.core.delete_namespaced_pod(name, namespace, body=body),
                   accept=gone)

    def wait_for_workflow_change(self, namespace: str, timeout: float) -> bool:
        """Watch offhours workflows up to `timeout` s; True at the first one that finished or was returned."""
        from kubernetes import watch

        if timeout <= 0:
            return False
        try:
            listed = self.custom.list_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, namespace, PLURAL,
                                                               label_selector=f"{LABEL_MANAGED}=true", limit=1)
            stream = watch.Watch().stream(
                self.custom.list_namespaced_custom_object, ARGO_GROUP, ARGO_VERSION, namespace, PLURAL,
                label_selector=f"{LABEL_MANAGED}=true", resource_version=listed["metadata"]["resourceVersion"],
                timeout_seconds=max(1, int(timeout)), _request_timeout=timeout + 5)
            for event in stream:
                wf = event.get("object") or {}
                labels = (wf.get("metadata") or {}).get("labels") or {}
                if (wf.get("status") or {}).get("phase") in FINISHED_PHASES or labels.get(LABEL_STATE) == STATE_RETURNED:
                    return True
        except (ApiException, urllib3.exceptions.HTTPError, ValueError, KeyError):
            time.sleep(min(timeout, 5.0))  # a watch that fails only delays the next tick to its schedule
        return False

    def annotate_workflow(self, namespace: str, name: str, annotations: dict[str, str], labels: dict[str, str]) -> None:
        """Merge annotations and labels into a workflow."""
        self._patch_workflow("annotate", namespace, name, {"metadata": {"annotations": annotations, "labels": labels}})

    # -- Events and the Lease -----------------------------------------------------------------
    def record_event(self, namespace: str, kind: str, name: str, reason: str, message: str, warning: bool = False,
                     aggregate: bool = False) -> None:
        """Record a core/v1 Event on an object; with `aggregate`, one Event per object and reason, counted."""
        now = datetime.now(timezone.utc)
        api_version = "apps/v1" if kind == "Deployment" else self._api_versions.get(kind, ARGO_API_VERSION)
        if aggregate:
            event_name = aggregated_event_name(name, reason)
            existing = self._call(f"read event {event_name}", lambda: self.core.read_namespaced_event(event_name, namespace),
                                  accept={404: None})
            if existing is not None:
                existing.count = (existing.count or 1) + 1
                existing.message, existing.last_timestamp = message[:1024], now
                existing.type = "Warning" if warning else "Normal"
                self._call(f"update event {event_name}",
                           lambda: self.core.replace_namespaced_event(event_name, namespace, existing))
                return
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(name=aggregated_event_name(name, reason)) if aggregate
            else client.V1ObjectMeta(generate_name=f"{name}.offhours-"),
            involved_object=client.V1ObjectReference(kind=kind, name=name, namespace=namespace, api_version=api_version),
            reason=reason,
            message=message[:1024],
            type="Warning" if warning else "Normal",
            source=client.V1EventSource(component=EVENT_SOURCE),
            first_timestamp=now,
            last_timestamp=now,
            count=1,
        )
        self._call(f"record event {reason}", lambda: self.core.create_namespaced_event(namespace, event))

    def acquire_lease(self, namespace: str, holder: str, seconds: int) -> bool:
        """Take the Lease if it is free, expired or ours; optimistic concurrency decides a race (409: not ours)."""
        now = datetime.now(timezone.utc)
        absent: dict[int, Any] = {404: None}
        lost: dict[int, bool] = {409: False}
        lease = self._call(f"read lease {namespace}/{LEASE_NAME}",
                           lambda: self.coordination.read_namespaced_lease(LEASE_NAME, namespace), accept=absent)
        if lease is None:
            body = client.V1Lease(metadata=client.V1ObjectMeta(name=LEASE_NAME), spec=client.V1LeaseSpec(
                holder_identity=holder, lease_duration_seconds=seconds, acquire_time=now, renew_time=now))

            def create() -> bool:
                self.coordination.create_namespaced_lease(namespace, body)
                return True

            return self._call(f"create lease {namespace}/{LEASE_NAME}", create, accept=lost)
        spec = lease.spec
        # Expiry is observed on this process's clock (the holder's renewTime is its own clock's reading).
        record = (spec.holder_identity, spec.renew_time, spec.acquire_time, spec.lease_duration_seconds,
                  spec.lease_transitions)
        free = spec.holder_identity in (None, "", holder)
        expired = not free and self.lease_observer.expired(record, spec.lease_duration_seconds or 0)
        if not free and not expired:
            return False
        if spec.holder_identity != holder or expired:
            spec.acquire_time = now
        spec.holder_identity, spec.lease_duration_seconds, spec.renew_time = holder, seconds, now

        def take() -> bool:
            self.coordination.replace_namespaced_lease(LEASE_NAME, namespace, lease)
            return True

        return self._call(f"take lease {namespace}/{LEASE_NAME}", take, accept=lost)

    def release_lease(self, namespace: str, holder: str) -> None:
        """Give the Lease back (clear the holder) if we hold it."""
        try:
            lease = self.coordination.read_namespaced_lease(LEASE_NAME, namespace)
            if lease.spec.holder_identity == holder:
                lease.spec.holder_identity = ""
                self.coordination.replace_namespaced_lease(LEASE_NAME, namespace, lease)
        except ApiException:
            pass  # an unreleased lease expires by itself

    def lease_notes(self, namespace: str) -> dict[str, str]:
        """Return the gate's notes on its Lease (annotations `unrecorded.offhours.io/<service>`), by service."""
        lease = self._call(f"read lease {namespace}/{LEASE_NAME}",
                           lambda: self.coordination.read_namespaced_lease(LEASE_NAME, namespace), accept={404: None})
        annotations = (lease.metadata.annotations if lease is not None else None) or {}
        return {k[len(LEASE_NOTE_PREFIX):]: str(v) for k, v in annotations.items() if k.startswith(LEASE_NOTE_PREFIX)}

    def note_on_lease(self, namespace: str, holder: str, service: str, text: str | None) -> bool:
        """Write (None: remove) a note while `holder` holds the Lease; a replace, so a 409 (a race) is not ours."""
        lease = self._call(f"read lease {namespace}/{LEASE_NAME}",
                           lambda: self.coordination.read_namespaced_lease(LEASE_NAME, namespace), accept={404: None})
        if lease is None or lease.spec.holder_identity != holder:
            return False
        annotations = dict(lease.metadata.annotations or {})
        if text is None:
            if annotations.pop(LEASE_NOTE_PREFIX + service, None) is None:
                return True
        else:
            annotations[LEASE_NOTE_PREFIX + service] = text
        lease.metadata.annotations = annotations

        def replace() -> bool:
            self.coordination.replace_namespaced_lease(LEASE_NAME, namespace, lease)
            return True

        return self._call(f"note on lease {namespace}/{LEASE_NAME}", replace, accept={409: False})

    # -- placement: where lent GPUs land (policy/placement.py; the gate's hook is gate/placement.py) --------------
    def serving_replicas(self, dep: ScaleTarget) -> tuple[list[Replica], dict[str, int | None]]:
        """Return the Deployment's pods bound to a node and not ending, as replicas, and each one's deletion cost."""
        selector = dep.selector  # the scale's status.selector (a label selector's text)
        replicas: list[Replica] = []
        costs: dict[str, int | None] = {}
        for pod in self._pages(f"list pods {selector}", partial(self.core.list_namespaced_pod, dep.namespace,
                                                                label_selector=selector)):
            if pod.metadata.deletion_timestamp is None and placement_pods.holds_gpus(pod):
                replicas.append(placement_pods.replica(pod, dep.service))
                costs[pod.metadata.name] = placement_pods.deletion_cost(pod)
        return sorted(replicas, key=lambda r: r.name), costs

    def gpu_nodes(self, names: Collection[str]) -> dict[str, Node] | None:
        """Return these nodes' GPUs, labels and taints, read one by one; None when nodes may not be read (no RBAC)."""
        out: dict[str, Node] = {}
        for name in sorted(set(names))[:MAX_PLACEMENT_NODES]:
            obj = self._call(f"get node {name}", partial(self.core.read_node, name), accept={403: False, 404: None})
            if obj is False:
                return None
            if obj is not None:
                out[name] = placement_pods.node(obj)
        return out

    def gpus_held(self, namespaces: Collection[str], nodes: Collection[str]) -> dict[str, int]:
        """Return the GPUs the pods of these namespaces hold on each of these nodes (bound, not ended).

        Ended pods are left out by the server; past MAX_POOL_PODS a namespace is an error (a count cut short
        would be lower than the truth), as for the pool's count: a tenant sets how many pods there are.
        """
        wanted, held = set(nodes), {n: 0 for n in nodes}
        for namespace in sorted(set(namespaces)):
            for pod in self._bounded_pages(f"list pods in {namespace}", partial(
                    self.core.list_namespaced_pod, namespace, field_selector=NOT_TERMINAL)):
                if placement_pods.holds_gpus(pod) and pod.spec.node_name in wanted:
                    held[pod.spec.node_name] += placement_pods.pod_gpus(pod)
        return held

    def set_deletion_cost(self, namespace: str, pod: str, cost: int | None) -> bool:
        """Write (None: remove) a pod's deletion cost; False when the gate may not patch pods there (no RBAC)."""
        body = {"metadata": {"annotations": {ANNOTATION_DELETION_COST: None if cost is None else str(cost)}}}
        return self._call(f"mark pod {namespace}/{pod} deletion cost",
                          lambda: self.core.patch_namespaced_pod(pod, namespace, body) is not None,
                          accept={403: False, 404: True})

    def unschedulable_pods(self, namespace: str, workflows: Collection[str]) -> dict[str, list[tuple[str, float, str]]]:
        """Return, per workflow, its pods the scheduler found no node for: name, since when (API server time), why.

        One read of the namespace's pending pods for all of them (a label selector `in` the names, in chunks), not
        one per workflow: a tick with thousands of admitted jobs stays a few calls. A pod counts only when the
        Workflow owns it (`owned_by_workflow`: by name, and by UID where `workflows` maps names to UIDs): the
        workflow label is anyone's to write, and a tenant's pod labelled with another's job must not park it.
        """
        uids: Mapping[str, str] = workflows if isinstance(workflows, Mapping) else {}
        names = sorted(w for w in set(workflows) if _label_value(w))
        out: dict[str, list[tuple[str, float, str]]] = {w: [] for w in names}
        for start in range(0, len(names), UNSCHEDULABLE_CHUNK):
            selector = f"{ARGO_WORKFLOW_LABEL} in ({','.join(names[start:start + UNSCHEDULABLE_CHUNK])})"
            for pod in self._bounded_pages("list pending pods", partial(self.core.list_namespaced_pod, namespace,
                                                                        label_selector=selector,
                                                                        field_selector="status.phase=Pending")):
                found = placement_pods.unschedulable_since(pod)
                workflow = (pod.metadata.labels or {}).get(ARGO_WORKFLOW_LABEL)
                if found is not None and workflow in out and owned_by_workflow(pod, workflow, uids.get(workflow, "")):
                    out[workflow].append((pod.metadata.name, *found))
        return {w: sorted(pods) for w, pods in out.items()}


def start_seconds(created: datetime | None, ready_since: datetime | None) -> float | None:
    """Seconds from a pod's creation to its Ready condition (its start: scheduling, pull, load); None if unknown.

    A pod whose readiness flapped reads as a slow start (Ready's last transition is later): the safe side.
    """
    if not isinstance(created, datetime) or not isinstance(ready_since, datetime):
        return None
    seconds = (ready_since - created).total_seconds()
    return seconds if 0 <= seconds <= MAX_START_SECONDS else None


def owned_by_workflow(pod: Any, name: str, uid: str) -> bool:
    """Whether the pod's owner references name the Workflow `name` (of uid `uid`, when known): Argo's own pods."""
    for ref in pod.metadata.owner_references or []:
        if ref.kind == "Workflow" and str(ref.api_version or "").startswith(f"{ARGO_GROUP}/") and ref.name == name \
                and (not uid or ref.uid == uid):
            return True
    return False


def pod_image_digests(pod: Any) -> dict[str, str]:
    """Each container's image as the pod's spec names it -> the digest its status `imageID` reports (where it does)."""
    spec, status = pod.spec, pod.status
    if spec is None or status is None:
        return {}
    images = {c.name: c.image for c in [*(spec.init_containers or []), *(spec.containers or [])] if c.image}
    out: dict[str, str] = {}
    for s in [*(status.init_container_statuses or []), *(status.container_statuses or [])]:
        digest = reported_digest(str(s.image_id or ""))
        if digest and s.name in images:
            out.setdefault(images[s.name], digest)
    return out


def pod_exit(pod: Any) -> PodExit:
    """Read one pod's release from its status: the latest container `finishedAt` once every container has terminated."""
    statuses = [*(pod.status.init_container_statuses or []), *(pod.status.container_statuses or [])] \
        if pod.status is not None else []
    running = [s for s in statuses if s.state is None or s.state.terminated is None]
    ends = [s.state.terminated.finished_at for s in statuses if s.state is not None and s.state.terminated is not None]
    finished = None
    created = pod.metadata.creation_timestamp
    if statuses and not running and all(isinstance(e, datetime) for e in ends):
        finished = max(e.timestamp() for e in ends)
    elif pod.status is not None and pod.status.phase in POD_ENDED_PHASES:
        # Ended by the kubelet though its containers never said so (refused at admission: OutOfnvidia.com/gpu,
        # UnexpectedAdmissionError): nothing runs in it. Dated by what its status knows, its creation at the least.
        known = [e for e in ends if isinstance(e, datetime)] + [
            c.last_transition_time for c in pod.status.conditions or [] if isinstance(c.last_transition_time, datetime)]
        if known or isinstance(created, datetime):
            finished = max(e.timestamp() for e in known) if known else created.timestamp()
    return PodExit(pod.metadata.name, created.timestamp() if isinstance(created, datetime) else None, finished,
                   gpus=_requests_gpus(pod))


def _requests_gpus(pod: Any) -> bool:
    """Whether any container of the pod asks for a GPU (requests or limits; an unreadable amount counts as one)."""
    spec = pod.spec
    containers = [*(spec.init_containers or []), *(spec.containers or [])] if spec is not None else []
    for c in containers:
        res = c.resources
        for amounts in (res.requests, res.limits) if res is not None else ():
            value = (amounts or {}).get(GPU_RESOURCE)
            if value is not None and str(value).strip() not in ("0", ""):
                return True
    return False


def _label_value(text: str) -> bool:
    """Whether `text` can be a label value (a workflow name longer than 63 characters cannot: its pods go unmeasured)."""
    return 0 < len(text) <= 63 and all(c.isalnum() or c in "-_." for c in text) and text[0].isalnum() \
        and text[-1].isalnum()


def _serving_name(target: Serving) -> str:
    kind = target.kind.lower() if isinstance(target, ScaleTarget) else target.kind
    return f"{kind} {target.namespace}/{target.name}"


def _target_ref(text: str) -> ScaleTargetRef:
    try:
        return parse_target_text(text)
    except ValueError as err:
        raise ClusterError(str(err)) from None


def _gpus_requested(pod: Any) -> int:
    """GPUs a pod's containers request (limits where no request is set); an unreadable amount counts as none."""
    spec = pod.spec
    total = 0
    for c in spec.containers or [] if spec is not None else []:
        res = c.resources
        amounts = {**((res.limits or {}) if res is not None else {}), **((res.requests or {}) if res is not None else {})}
        value = str(amounts.get(GPU_RESOURCE, "0")).strip()
        total += int(value) if value.isdigit() else 0
    return total


def _test_replace(path: str, expected: int, value: int) -> list[dict[str, Any]]:
    """Return a JSON patch that changes one field only if it still holds what the caller read."""
    return [{"op": "test", "path": path, "value": expected}, {"op": "replace", "path": path, "value": value}]


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _admitted(deployment_uid: str) -> dict[str, Any]:
    return {"labels": {LABEL_STATE: STATE_ADMITTED},
            "annotations": {ANNOTATION_ADMITTED_AT: _now(), ANNOTATION_BORROWED_FROM: deployment_uid,
                            ANNOTATION_WAITING_REASON: None, ANNOTATION_QUEUE_POSITION: None}}
