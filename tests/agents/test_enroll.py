"""Enrolling again: the agent proves it is the node by sending its current credential, to its own server only."""

from __future__ import annotations

import dataclasses

from fleet_agent.client import ControlPlaneClient
from fleet_agent.credentials import credential_path, load_enrollment, save_enrollment
from fleet_agent.enroll import enroll

FACTS = {"machine_id": "0123456789abcdef", "hostname": "gpu-01", "agent_version": "0.1.0",
         "agent_instance_id": "0b7cd3a2-4bd6-4a57-9f07-5f4b50b2d4c2", "gpu_count": 0, "gpu_model": None,
         "cloud": None}


def test_a_first_enrolment_sends_no_credential(control_plane, tmp_path):
    enroll(ControlPlaneClient(control_plane.url), "fe_test", FACTS, credential_file=credential_path(tmp_path))
    assert "credential" not in control_plane.enrollments[0]


def test_enrolling_again_sends_the_current_credential(control_plane, tmp_path):
    path = credential_path(tmp_path)
    first = enroll(ControlPlaneClient(control_plane.url), "fe_test", FACTS, credential_file=path)
    second = enroll(ControlPlaneClient(control_plane.url), "fe_test", FACTS, credential_file=path)
    assert control_plane.enrollments[1]["credential"] == first.credential
    assert load_enrollment(path).credential == second.credential != first.credential


def test_a_credential_for_another_server_is_never_sent(control_plane, tmp_path):
    path = credential_path(tmp_path)
    enroll(ControlPlaneClient(control_plane.url), "fe_test", FACTS, credential_file=path)
    save_enrollment(path, dataclasses.replace(load_enrollment(path), server="https://other.example.com"))
    enroll(ControlPlaneClient(control_plane.url), "fe_test", FACTS, credential_file=path)
    assert "credential" not in control_plane.enrollments[1]


def test_an_unreadable_credential_file_is_enrolment_from_scratch(control_plane, tmp_path):
    path = credential_path(tmp_path)
    path.write_text("{not json")
    enrollment = enroll(ControlPlaneClient(control_plane.url), "fe_test", FACTS, credential_file=path)
    assert "credential" not in control_plane.enrollments[0]
    assert load_enrollment(path) == enrollment
