"""AWS replacement with boto3: terminate the instance in its Auto Scaling group (which launches the replacement),
or launch one from a configured launch template.

An instance id is a claim the node's agent made, so before anything is terminated: no other node may claim the same
id, the instance must exist in the configured region, and (ASG mode) belong to an Auto Scaling group. A retried
step finds its recorded request: an instance already shutting down counts as done, and `run_instances` carries the
step's idempotency key as its ClientToken.
"""

from __future__ import annotations

import hashlib

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import BotoCoreError, ClientError
from django.utils import timezone

from fleet.core import outbound
from fleet.inventory.models import Node

from ..choices import ExternalState
from ..models import ExecutorConfig, ExternalRequest
from .executor_configs import executor_secret

GONE = frozenset({"shutting-down", "terminated"})


class AWSRefused(Exception):
    """AWS (or our own checks) said no; the message says why."""


def aws_clients(config: ExecutorConfig):
    settings = config.settings
    session = boto3.session.Session(
        aws_access_key_id=settings.get("access_key_id") or None,
        aws_secret_access_key=executor_secret(config) or None if settings.get("access_key_id") else None,
        region_name=settings["region"])
    if settings.get("endpoint_url"):
        try:
            outbound.check_url_now(settings["endpoint_url"])
        except outbound.OutboundRefused as exc:
            raise AWSRefused(f"endpoint_url refused by the outbound policy: {exc}") from None
    options = {"endpoint_url": settings.get("endpoint_url"),
               "config": BotoConfig(connect_timeout=10, read_timeout=30, retries={"max_attempts": 3,
                                                                                  "mode": "standard"})}
    return session.client("ec2", **options), session.client("autoscaling", **options)


def _check_claim(node: Node) -> str:
    instance_id = (node.instance_id or "").strip()
    if not instance_id.startswith("i-"):
        raise AWSRefused(f"{node} has no EC2 instance id")
    others = Node.objects.filter(instance_id=instance_id).exclude(pk=node.pk).values_list("hostname", flat=True)
    if others:
        raise AWSRefused(f"instance {instance_id} is claimed by {node} and by {', '.join(others)}: not touching it "
                         "until an operator sorts out which node it is")
    return instance_id


def _instance(ec2, instance_id: str) -> dict | None:
    try:
        reservations = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "InvalidInstanceID.NotFound":
            return None
        raise
    instances = [i for r in reservations for i in r.get("Instances", [])]
    return instances[0] if instances else None


def aws_request_replacement(*, config: ExecutorConfig, node: Node, request: ExternalRequest) -> ExternalRequest:
    """Carry out (once) the replacement recorded in `request`; returns it done or failed."""
    if request.state in (ExternalState.DONE, ExternalState.FAILED):
        return request
    request.attempts += 1
    try:
        instance_id = _check_claim(node)
        ec2, autoscaling = aws_clients(config)
        instance = _instance(ec2, instance_id)
        if instance is None:
            raise AWSRefused(f"instance {instance_id} does not exist in {config.settings['region']}")
        state = instance.get("State", {}).get("Name", "")
        if config.settings["mode"] == "asg":
            detail = _asg_replace(autoscaling, instance_id, state)
            message = (f"terminated {instance_id} in Auto Scaling group {detail['asg']}; the group launches its "
                       "replacement" if not detail.get("already") else
                       f"{instance_id} was already {state}; its Auto Scaling group replaces it")
        else:
            detail = _launch(ec2, config, node, request, instance_id)
            message = f"launched {detail['new_instance_id']} from {detail['launch_template_id']} to replace " \
                      f"{instance_id}"
        request.state, request.detail, request.message = ExternalState.DONE, detail, message
    except AWSRefused as exc:
        request.state, request.message = ExternalState.FAILED, str(exc)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        request.state = ExternalState.FAILED
        request.message = f"AWS refused: {error.get('Code', '?')}: {error.get('Message', '')}"[:1000]
    except BotoCoreError as exc:
        request.state, request.message = ExternalState.FAILED, f"AWS unreachable: {exc}"[:1000]
    request.finished_at = timezone.now()
    request.save()
    return request


def _asg_replace(autoscaling, instance_id: str, state: str) -> dict:
    found = autoscaling.describe_auto_scaling_instances(InstanceIds=[instance_id])["AutoScalingInstances"]
    if not found:
        raise AWSRefused(f"instance {instance_id} is in no Auto Scaling group; replace it by hand or use a launch "
                         "template (settings.mode = launch_template)")
    group = found[0]["AutoScalingGroupName"]
    if state in GONE:
        return {"instance_id": instance_id, "asg": group, "already": True}
    activity = autoscaling.terminate_instance_in_auto_scaling_group(InstanceId=instance_id,
                                                                    ShouldDecrementDesiredCapacity=False)["Activity"]
    return {"instance_id": instance_id, "asg": group, "activity_id": activity.get("ActivityId"),
            "activity": activity.get("Description", "")}


def _launch(ec2, config: ExecutorConfig, node: Node, request: ExternalRequest, instance_id: str) -> dict:
    token = hashlib.sha256(request.idempotency_key.encode()).hexdigest()[:64]  # ClientToken: at most 64 chars
    tags = [{"Key": "fleet:incident", "Value": request.incident_key or "-"},
            {"Key": "fleet:replaces", "Value": instance_id}]
    if node.pool_id:
        tags.append({"Key": "fleet:pool", "Value": str(node.pool)})
    result = ec2.run_instances(
        LaunchTemplate={"LaunchTemplateId": config.settings["launch_template_id"],
                        "Version": config.settings.get("launch_template_version", "$Latest")},
        MinCount=1, MaxCount=1, ClientToken=token,
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
    return {"instance_id": instance_id, "new_instance_id": result["Instances"][0]["InstanceId"],
            "launch_template_id": config.settings["launch_template_id"]}
