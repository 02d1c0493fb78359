"""The `aws` executor against moto in server mode (a local HTTP endpoint speaking the EC2 and Auto Scaling APIs):
the instance is terminated in its Auto Scaling group, which launches the replacement; or one is launched from the
launch template. A retried step asks nothing twice; a claimed instance id is checked before anything happens."""

import pytest

from fleet.executors import interface as steps
from fleet.executors.backends.aws import AWSExecutor
from fleet.executors.models import ExternalRequest
from fleet.executors.services.executor_configs import executor_config_save
from tests.factories import NodeFactory, UserFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def ctx(node, *, attempt=1, dry_run=False):
    return steps.StepContext(incident_id=7, incident_key="INC-7", node_id=node.pk, step_index=4, attempt=attempt,
                             kind="request_replacement", params={}, dry_run=dry_run,
                             idempotency_key=f"INC-7:4:{attempt}", facts={})


def configure(aws, **settings):
    executor_config_save(actor=UserFactory(role="admin", username=f"aws-admin-{aws['pool'].pk}"), pool=aws["pool"],
                         executor="aws", secret=aws["secret"],
                         settings={"region": "us-east-1", "endpoint_url": aws["endpoint"],
                                   "access_key_id": aws["key_id"], **settings})


def test_replacement_through_the_auto_scaling_group(fleet_on_aws):
    aws = fleet_on_aws
    configure(aws, mode="asg")
    before = aws["members"]()
    node = NodeFactory(pool=aws["pool"], instance_id=before[0])
    executor = AWSExecutor()
    assert steps.executor_named("aws") is not None and executor.kinds == {"request_replacement"}
    assert executor.start(ctx(node, dry_run=True)).status == "done" and aws["members"]() == before

    outcome = executor.start(ctx(node))
    assert outcome.status == "done", outcome.message
    assert outcome.output["aws"]["asg"] and "launches its replacement" in outcome.message
    assert aws["state"](before[0]) in ("shutting-down", "terminated")
    after = aws["members"]()
    assert before[0] not in after and len(after) == 2  # the group launched the replacement

    again = executor.start(ctx(node))  # the same step retried: recorded, nothing asked twice
    assert again.status == "done" and aws["members"]() == after
    assert ExternalRequest.objects.get().attempts == 1


def test_launch_template_and_claims_checked_first(fleet_on_aws):
    aws = fleet_on_aws
    configure(aws, mode="launch_template", launch_template_id=aws["template"])
    instance = aws["members"]()[0]
    node = NodeFactory(pool=aws["pool"], instance_id=instance)
    outcome = AWSExecutor().start(ctx(node))
    assert outcome.status == "done", outcome.message
    new = outcome.output["aws"]["new_instance_id"]
    tags = {t["Key"]: t["Value"] for t in aws["ec2"].describe_instances(InstanceIds=[new])["Reservations"][0][
        "Instances"][0].get("Tags", [])}
    assert tags["fleet:incident"] == "INC-7" and tags["fleet:replaces"] == instance

    impostor = NodeFactory(pool=aws["pool"], instance_id=instance)  # a second node claims the same instance
    refused = AWSExecutor().start(ctx(impostor, attempt=2))
    assert refused.status == "failed" and "claimed by" in refused.message
    unknown = NodeFactory(pool=aws["pool"], instance_id="i-0123456789abcdef0")
    assert "does not exist" in AWSExecutor().start(ctx(unknown, attempt=3)).message


def test_aws_errors_are_named_not_raised(fleet_on_aws):
    aws = fleet_on_aws
    configure(aws, mode="asg")
    stray = aws["ec2"].run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    node = NodeFactory(pool=aws["pool"], instance_id=stray)
    outcome = AWSExecutor().start(ctx(node))
    assert outcome.status == "failed" and "in no Auto Scaling group" in outcome.message
    assert aws["state"](stray) == "running"
