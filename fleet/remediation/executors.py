"""The executor registry: which executor carries out a step on a node.

Other apps register their executors in their `AppConfig.ready()` (`register(MyExecutor())`). A pool lists
executor names in order (`PoolRemediationSettings.executors`, a node may override the list); the first one that
is installed and supports the step's kind wins, and the built-in `manual` executor — which supports every kind
as a runbook step for an operator — is the last resort.
"""

from __future__ import annotations

import threading

from .steps import Executor

MANUAL = "manual"

_registry: dict[str, Executor] = {}
_lock = threading.Lock()


def register(executor: Executor) -> Executor:
    """Install an executor under its `name` (a second registration under the same name replaces the first)."""
    if not isinstance(executor, Executor):
        raise TypeError(f"{executor!r} does not implement the Executor protocol")
    if not executor.name or not isinstance(executor.kinds, frozenset):
        raise TypeError("an executor needs a name and a frozenset of step kinds")
    with _lock:
        _registry[executor.name] = executor
    return executor


def unregister(name: str) -> None:
    if name == MANUAL:
        raise ValueError("the manual executor is always installed")
    with _lock:
        _registry.pop(name, None)


def registered() -> dict[str, Executor]:
    with _lock:
        return dict(_registry)


def executor_named(name: str) -> Executor | None:
    with _lock:
        return _registry.get(name)


def executor_names_for(*, node) -> list[str]:
    """The ordered executor names configured for a node: its own list, else its pool's."""
    from .models import NodeRemediationSettings, PoolRemediationSettings

    if node is None:
        return []
    own = NodeRemediationSettings.objects.filter(node_id=node.pk).values_list("executors", flat=True).first()
    if own:
        return list(own)
    if node.pool_id is None:
        return []
    pool = PoolRemediationSettings.objects.filter(pool_id=node.pool_id).values_list("executors", flat=True).first()
    return list(pool or [])


def executor_for(*, node, kind: str) -> tuple[Executor, list[str]]:
    """The executor for one step of `kind` on `node`, and why the configured ones before it were passed over."""
    passed: list[str] = []
    for name in executor_names_for(node=node):
        executor = executor_named(name)
        if executor is None:
            passed.append(f"{name}: not installed on this server")
        elif kind not in executor.kinds:
            passed.append(f"{name}: cannot {kind}")
        else:
            return executor, passed
    return _registry[MANUAL], passed
