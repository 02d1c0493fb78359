"""Kubernetes through the official `kubernetes` client: cordon, taint, drain by evictions, uncordon.

* cordon: `spec.unschedulable = true` and the taint `fleet.io/unhealthy=<cause>:NoSchedule`, in one JSON merge
  patch carrying the node's resourceVersion (a concurrent change makes it a conflict, retried, never a lost taint);
* drain: cordon, then an Eviction for every pod on the node except DaemonSet pods and static (mirror) pods. The
  Eviction API is what respects PodDisruptionBudgets: a 429 means a budget does not allow it yet, so the pod is
  tried again later; the drain is done when no evictable pod is left on the node;
* return: uncordon and remove our taint (other taints are left as they are).
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from fleet.core import outbound

from ..models import ExecutorConfig
from .executor_configs import executor_secret

MERGE_PATCH = "application/merge-patch+json"
TIMEOUT_S = 30


class KubernetesError(Exception):
    pass


@dataclass
class DrainProgress:
    evicted: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)  # a PodDisruptionBudget says not yet
    remaining: list[str] = field(default_factory=list)  # evictable pods still on the node (terminating or blocked)
    ignored: list[str] = field(default_factory=list)  # DaemonSet and static pods: they stay

    @property
    def done(self) -> bool:
        return not self.remaining


def taint_value(text: str) -> str:
    """A label value (≤ 63 characters of [A-Za-z0-9._-], alphanumeric at both ends) from the cause."""
    value = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")[:63].strip("-._")
    return value or "unhealthy"


def _api(config: ExecutorConfig) -> k8s.CoreV1Api:
    configuration = k8s.Configuration()
    configuration.host = config.settings["api_url"]
    configuration.api_key = {"authorization": executor_secret(config)}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    configuration.verify_ssl = config.settings.get("verify_tls", True)
    if config.settings.get("ca_cert"):
        # The client wants a file: one per certificate, written once (a CA certificate is public).
        pem = config.settings["ca_cert"]
        path = Path(tempfile.gettempdir()) / f"fleet-k8s-ca-{hashlib.sha256(pem.encode()).hexdigest()[:16]}.pem"
        if not path.exists():
            path.write_text(pem)
        configuration.ssl_ca_cert = str(path)
    client = k8s.ApiClient(configuration)
    outbound.guard_pool_manager(client.rest_client.pool_manager)
    return k8s.CoreV1Api(client)


def _error(what: str, exc: ApiException) -> KubernetesError:
    reason = exc.reason or ""
    if exc.status == 404:
        return KubernetesError(f"{what}: not found in the cluster")
    if exc.status in (401, 403):
        return KubernetesError(f"{what}: the API server refused the token ({exc.status} {reason}); the service "
                               "account needs get/patch nodes, list pods and create pods/eviction")
    return KubernetesError(f"{what}: {exc.status} {reason}")


def _call(what: str, function, *args, **kwargs):
    try:
        return function(*args, _request_timeout=TIMEOUT_S, **kwargs)
    except ApiException as exc:
        raise _error(what, exc) from None
    except (HTTPError, OSError) as exc:
        raise KubernetesError(f"{what}: API server unreachable: {exc}") from None


def _set_schedulable(api: k8s.CoreV1Api, name: str, *, unschedulable: bool, taint_key: str,
                     taint_value_text: str = "") -> k8s.V1Node:
    for _ in range(5):  # conflicts (someone else changed the node) are retried on a fresh read
        node = _call(f"node {name}", api.read_node, name)
        taints = [t for t in (node.spec.taints or []) if t.key != taint_key]
        if unschedulable:
            taints.append(k8s.V1Taint(key=taint_key, value=taint_value_text, effect="NoSchedule"))
        body = {"metadata": {"resourceVersion": node.metadata.resource_version},
                "spec": {"unschedulable": unschedulable or None,
                         "taints": [api.api_client.sanitize_for_serialization(t) for t in taints] or None}}
        try:
            return api.patch_node(name, body, _content_type=MERGE_PATCH, _request_timeout=TIMEOUT_S)
        except ApiException as exc:
            if exc.status != 409:
                raise _error(f"node {name}", exc) from None
        except (HTTPError, OSError) as exc:
            raise KubernetesError(f"node {name}: API server unreachable: {exc}") from None
    raise KubernetesError(f"node {name} kept changing under us; try again")


def k8s_cordon(config: ExecutorConfig, name: str, cause: str) -> k8s.V1Node:
    return _set_schedulable(_api(config), name, unschedulable=True, taint_key=config.settings["taint_key"],
                            taint_value_text=taint_value(cause))


def k8s_uncordon(config: ExecutorConfig, name: str) -> k8s.V1Node:
    return _set_schedulable(_api(config), name, unschedulable=False, taint_key=config.settings["taint_key"])


def _ignored(pod: k8s.V1Pod) -> bool:
    owners = pod.metadata.owner_references or []
    mirror = "kubernetes.io/config.mirror" in (pod.metadata.annotations or {})
    return mirror or any(owner.kind == "DaemonSet" for owner in owners) or \
        (pod.status is not None and pod.status.phase in ("Succeeded", "Failed"))


def k8s_drain(config: ExecutorConfig, name: str, cause: str) -> DrainProgress:
    """Cordon, then ask for one eviction per evictable pod; call again until `done`."""
    api = _api(config)
    node = _call(f"node {name}", api.read_node, name)
    if not node.spec.unschedulable or not any(t.key == config.settings["taint_key"] for t in node.spec.taints or []):
        _set_schedulable(api, name, unschedulable=True, taint_key=config.settings["taint_key"],
                         taint_value_text=taint_value(cause))
    pods = _call(f"pods on {name}", api.list_pod_for_all_namespaces, field_selector=f"spec.nodeName={name}").items
    progress = DrainProgress()
    for pod in pods:
        label = f"{pod.metadata.namespace}/{pod.metadata.name}"
        if _ignored(pod):
            progress.ignored.append(label)
            continue
        progress.remaining.append(label)
        if pod.metadata.deletion_timestamp is not None:
            continue  # evicted already, terminating
        eviction = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name=pod.metadata.name,
                                                            namespace=pod.metadata.namespace))
        try:
            api.create_namespaced_pod_eviction(pod.metadata.name, pod.metadata.namespace, eviction,
                                               _request_timeout=TIMEOUT_S, _preload_content=False)
            progress.evicted.append(label)
        except ApiException as exc:
            if exc.status == 429:
                progress.blocked.append(label)
            elif exc.status == 404:
                progress.remaining.remove(label)  # gone meanwhile
            else:
                raise KubernetesError(f"evicting {label}: {exc.status} {exc.reason}") from None
        except (HTTPError, OSError) as exc:
            raise KubernetesError(f"evicting {label}: API server unreachable: {exc}") from None
    return progress
