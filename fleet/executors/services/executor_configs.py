"""Per-pool settings of the executors that reach a scheduler or a cloud (Slurm, Kubernetes, AWS, webhook).

Settings are validated per executor, strictly (an unknown key is a 400 naming it). The secret, where there is one,
is encrypted at rest, never returned, and never written to the audit log (which records only whether one is set).
"""

from __future__ import annotations

import re
import urllib.parse

from django.db import transaction
from rest_framework.exceptions import ValidationError

from fleet.core import crypto, outbound
from fleet.core.models import AuditEntry
from fleet.core.services import audit_record

from ..choices import ConfiguredExecutor
from ..models import ExecutorConfig, SSHHost

_PROGRAM = re.compile(r"^[A-Za-z0-9._/+-]+$")
_LABEL = re.compile(r"^[A-Za-z0-9._/-]{1,63}$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")


def _url(value, field: str) -> str:
    parsed = urllib.parse.urlsplit(value) if isinstance(value, str) else None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValidationError({field: ["An http(s) URL."]})
    return value.rstrip("/")


def _outbound_url(value, field: str) -> str:
    """A URL the control plane will POST to: also within the outbound policy (fleet.core.outbound)."""
    url = _url(value, field)
    try:
        outbound.validate_url(url)
    except outbound.OutboundRefused as exc:
        raise ValidationError({field: [f"Not allowed: {exc}."]}) from None
    return url


def _choice(value, field: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValidationError({field: [f"One of {', '.join(choices)}."]})
    return value


def _text(value, field: str, pattern: re.Pattern | None = None, *, message: str = "") -> str:
    if not isinstance(value, str) or not value or (pattern is not None and not pattern.match(value)):
        raise ValidationError({field: [message or "A non-empty string."]})
    return value


def _int(value, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError({field: [f"A whole number from {low} to {high}."]})
    return value


def _bool(value, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError({field: ["true or false."]})
    return value


def _slurm(data: dict, secret: str | None) -> dict:
    out = {"controller": _choice(data.pop("controller", "local"), "settings.controller", ("local", "ssh")),
           "scontrol": _text(data.pop("scontrol", "scontrol"), "settings.scontrol", _PROGRAM),
           "squeue": _text(data.pop("squeue", "squeue"), "settings.squeue", _PROGRAM),
           "node_name_label": _text(data.pop("node_name_label", "slurm-node"), "settings.node_name_label", _LABEL)}
    if "slurm_conf" in data:
        out["slurm_conf"] = _text(data.pop("slurm_conf"), "settings.slurm_conf", re.compile(r"^/[A-Za-z0-9._/+-]+$"),
                                  message="An absolute path.")
    host = data.pop("ssh_host", None)
    if out["controller"] == "ssh":
        if isinstance(host, bool) or not isinstance(host, int) or not SSHHost.objects.filter(pk=host).exists():
            raise ValidationError({"settings.ssh_host": ["The SSH host (id) of the Slurm controller."]})
        out["ssh_host"] = host
    return out


def _kubernetes(data: dict, secret: str | None) -> dict:
    out = {"api_url": _outbound_url(data.pop("api_url", None), "settings.api_url"),
           "verify_tls": _bool(data.pop("verify_tls", True), "settings.verify_tls"),
           "node_name_label": _text(data.pop("node_name_label", "kubernetes-node"), "settings.node_name_label",
                                    _LABEL),
           "taint_key": _text(data.pop("taint_key", "fleet.io/unhealthy"), "settings.taint_key", _LABEL),
           "eviction_retry_s": _int(data.pop("eviction_retry_s", 10), "settings.eviction_retry_s", 1, 3600)}
    if "ca_cert" in data:
        ca = data.pop("ca_cert")
        if not isinstance(ca, str) or "BEGIN CERTIFICATE" not in ca:
            raise ValidationError({"settings.ca_cert": ["A PEM certificate (the cluster's CA)."]})
        out["ca_cert"] = ca
    return out


def _aws(data: dict, secret: str | None) -> dict:
    out = {"region": _text(data.pop("region", None), "settings.region", _REGION, message="An AWS region."),
           "mode": _choice(data.pop("mode", "asg"), "settings.mode", ("asg", "launch_template"))}
    if out["mode"] == "launch_template":
        out["launch_template_id"] = _text(data.pop("launch_template_id", None), "settings.launch_template_id",
                                          re.compile(r"^lt-[0-9a-f]{8,17}$"), message="A launch template id (lt-…).")
        out["launch_template_version"] = _text(str(data.pop("launch_template_version", "$Latest")),
                                               "settings.launch_template_version",
                                               re.compile(r"^(\$Latest|\$Default|\d+)$"))
    if "endpoint_url" in data:
        out["endpoint_url"] = _outbound_url(data.pop("endpoint_url"), "settings.endpoint_url")
    if "access_key_id" in data:
        out["access_key_id"] = _text(data.pop("access_key_id"), "settings.access_key_id",
                                     re.compile(r"^[A-Z0-9]{16,128}$"), message="An access key id.")
    return out


def _webhook(data: dict, secret: str | None) -> dict:
    out = {"url": _outbound_url(data.pop("url", None), "settings.url"),
           "timeout_s": _int(data.pop("timeout_s", 10), "settings.timeout_s", 1, 120)}
    if "callback_base_url" in data:
        out["callback_base_url"] = _url(data.pop("callback_base_url"), "settings.callback_base_url")
    return out


VALIDATORS = {ConfiguredExecutor.SLURM: _slurm, ConfiguredExecutor.KUBERNETES: _kubernetes,
              ConfiguredExecutor.AWS: _aws, ConfiguredExecutor.WEBHOOK: _webhook}
# Which executors need a secret always (True), never (False), or only with some settings (a function).
NEEDS_SECRET = {ConfiguredExecutor.SLURM: lambda s: False, ConfiguredExecutor.KUBERNETES: lambda s: True,
                ConfiguredExecutor.AWS: lambda s: "access_key_id" in s, ConfiguredExecutor.WEBHOOK: lambda s: True}


def validate_settings(executor: str, settings: dict, secret: str | None, *, has_secret: bool = False) -> dict:
    if not isinstance(settings, dict):
        raise ValidationError({"settings": ["An object."]})
    data = dict(settings)
    cleaned = VALIDATORS[executor](data, secret)
    if data:
        raise ValidationError({f"settings.{name}": [f"{executor} has no setting {name!r}."] for name in data})
    if NEEDS_SECRET[executor](cleaned) and not (secret or has_secret):
        raise ValidationError({"secret": [{"kubernetes": "The API token (a service account's bearer token).",
                                           "aws": "The secret access key for settings.access_key_id.",
                                           "webhook": "The secret that signs requests and callbacks."}[executor]]})
    return cleaned


def _snapshot(config: ExecutorConfig) -> dict:
    return {"pool": config.pool_id, "executor": config.executor, "settings": config.settings,
            "has_secret": config.has_secret}


def executor_config_save(*, actor, pool, executor: str, settings: dict, secret: str | None = None,
                         instance: ExecutorConfig | None = None) -> ExecutorConfig:
    """Create or replace one pool's settings for an executor; `secret=None` keeps the stored secret."""
    if instance is None and ExecutorConfig.objects.filter(pool=pool, executor=executor).exists():
        raise ValidationError({"executor": [f"Pool {pool} has {executor} settings already; change those."]})
    cleaned = validate_settings(executor, settings, secret, has_secret=bool(instance and instance.has_secret))
    with transaction.atomic():
        before = _snapshot(instance) if instance is not None else None
        config = instance or ExecutorConfig(pool=pool, executor=executor)
        config.pool, config.executor, config.settings = pool, executor, cleaned
        if secret:
            config.secret_encrypted = crypto.encrypt(secret)
        config.save()
        audit_record(actor=actor, action=AuditEntry.Action.UPDATE if before else AuditEntry.Action.CREATE,
                     instance=config, before=before, after=_snapshot(config),
                     note="secret replaced" if secret and before else "")
    return config


def executor_config_delete(*, actor, config: ExecutorConfig) -> None:
    with transaction.atomic():
        audit_record(actor=actor, action=AuditEntry.Action.DELETE, instance=config, before=_snapshot(config))
        config.delete()


def executor_config_for(*, node, executor: str) -> ExecutorConfig | None:
    if node is None or node.pool_id is None:
        return None
    return ExecutorConfig.objects.filter(pool_id=node.pool_id, executor=executor).first()


def executor_secret(config: ExecutorConfig) -> str:
    return crypto.decrypt(config.secret_encrypted).decode() if config.secret_encrypted else ""


def node_name(node, config: ExecutorConfig) -> str:
    """The node's name in the scheduler: its label (settings.node_name_label) if set, else its short host name."""
    label = config.settings.get("node_name_label")
    named = (node.labels or {}).get(label) if label else None
    return named or node.hostname.split(".")[0]
