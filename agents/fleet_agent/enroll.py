"""Enrolment: swap a one-time enrolment token for this node's own credential."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from fleet_agent import __version__
from fleet_agent.client import REPORTS_PATH, ControlPlaneClient, DeliveryError
from fleet_agent.credentials import Enrollment, load_enrollment, save_enrollment
from fleet_agent.report import CLOUD_IDENTITY_FIELDS, NodeIdentity
from fleet_agent.timeutil import rfc3339, utc_now


class EnrollmentError(Exception):
    pass


def enrollment_facts(
    *,
    identity: NodeIdentity,
    instance_id: str,
    gpus: list[dict],
    cloud: dict | None,
    labels: dict | None = None,
) -> dict:
    """The ``facts`` object of the enrol request (protocol), plus optional operator labels."""
    names = Counter(gpu["name"] for gpu in gpus if gpu.get("name"))
    facts = {
        "machine_id": identity.machine_id,
        "hostname": identity.hostname,
        "agent_version": __version__,
        "agent_instance_id": instance_id,
        "gpu_count": len(gpus),
        "gpu_model": names.most_common(1)[0][0] if names else None,
        "cloud": {key: cloud.get(key) for key in CLOUD_IDENTITY_FIELDS if key != "bare_metal"}
        if cloud
        else None,
    }
    if labels:
        facts["labels"] = labels
    return facts


def enroll(
    server: str | ControlPlaneClient,
    token: str,
    facts: dict,
    *,
    credential_file: str | Path,
    ca_file: str | None = None,
) -> Enrollment:
    """POST the enrolment to ``server`` (a base URL or a client) and write the credential file (0600).

    When ``credential_file`` already holds a credential for the same server, it goes with the request: the
    server re-enrols a known machine only with its current credential (or an operator's approval), since a
    machine id is no secret. It is never sent to another server.

    Raises ``EnrollmentError`` with the server's reason when it refuses.
    """
    client = server if isinstance(server, ControlPlaneClient) else ControlPlaneClient(server, ca_file=ca_file)
    try:
        previous = load_enrollment(credential_file)
    except ValueError:  # unreadable: enrol without it, as a node that lost its credential would
        previous = None
    current = previous.credential if previous is not None and previous.server == client.server else None
    try:
        answer = client.enroll(token, facts, credential=current)
    except DeliveryError as err:
        raise EnrollmentError(f"enrolment failed: {err}") from None
    credential = answer.get("credential")
    if not isinstance(credential, str) or not credential:
        raise EnrollmentError(f"enrolment answer has no credential: {str(answer)[:200]}")
    node_id = answer.get("node_id")
    enrollment = Enrollment(
        server=client.server,
        node_id=node_id if isinstance(node_id, int) else None,
        credential=credential,
        reports_url=answer.get("reports_url") or REPORTS_PATH,
        interval_s=answer.get("interval_s"),
        enrolled_at=rfc3339(utc_now()),
    )
    save_enrollment(credential_file, enrollment)
    return enrollment
