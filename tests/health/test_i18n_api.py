"""Server-written texts in the reader's language (issue #18): Accept-Language picks it, English is the default, the
English columns (search, tickets, integrations) never change, and operators' own texts are never translated."""

from datetime import timedelta

import pytest
from django.utils import timezone, translation

from fleet.health.models import Finding, Rule
from fleet.health.selectors.triage import node_triage
from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import GPU

from .factories import T0, EventFactory, healthy_node
from .harness import open_findings, set_status

pytestmark = pytest.mark.django_db

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9,en;q=0.5"}


@pytest.fixture
def fleet():
    cloud = healthy_node(delivery_form="cloud_dedicated")
    owned = healthy_node(delivery_form="bare_metal_owned")
    EventFactory(node=cloud, kind="xid", code=79, at=T0, gpu=GPU.objects.get(node=cloud, index=0))
    set_status(owned, tcp_retrans_pct=4.0)
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(minutes=5))
    return {"cloud": cloud, "owned": owned}


def test_a_finding_stores_english_and_its_message(fleet):
    finding = open_findings("tcp_retransmits", fleet["owned"]).get()
    assert finding.summary == "TCP retransmits 4.00 % of sent segments (threshold 1 %)"
    assert finding.summary_msg == {"id": "TCP retransmits {retrans:.2f} % of sent segments (threshold "
                                         "{threshold_pct:g} %)", "params": {"retrans": 4.0, "threshold_pct": 1}}
    assert finding.action_msg["id"] == "Ours to fix ({layer} on {form}): {remedy}."
    assert finding.recommended_action.startswith("Ours to fix (host os on Bare metal, our own): check the NIC")


def test_findings_list_in_chinese_with_accept_language(viewer_api, fleet):
    url = "/api/v1/findings/"
    english = {row["rule"]: row for row in viewer_api.get(url, {"node": fleet["owned"].pk}).json()["results"]}
    response = viewer_api.get(url, {"node": fleet["owned"].pk}, **ZH)
    assert response.status_code == 200
    assert response["Content-Language"] == "zh-hans"
    chinese = {row["rule"]: row for row in response.json()["results"]}
    tcp = chinese["tcp_retransmits"]
    assert tcp["summary"] == "TCP 重传占已发送报文段的 4.00 %（阈值 1 %）"
    assert tcp["rule_title"] == "TCP 重传过多"
    assert tcp["recommended_action"] == ("由我方修复（自有裸金属上的主机操作系统）：检查网卡计数器、MTU 以及到存储"
                                         "或对端节点的路径。")
    # Without a language: the English columns, as stored.
    stored = Finding.objects.get(pk=tcp["id"])
    assert english["tcp_retransmits"]["summary"] == stored.summary
    assert english["tcp_retransmits"]["recommended_action"] == stored.recommended_action
    assert english["tcp_retransmits"]["rule_title"] == "TCP retransmits high"


def test_a_provider_ticket_action_and_an_xid_summary_in_chinese(viewer_api, fleet):
    finding = open_findings("xid", fleet["cloud"]).get()
    body = viewer_api.get(f"/api/v1/findings/{finding.pk}/", **ZH).json()
    provider = fleet["cloud"].provider.name
    assert body["summary"].startswith("GPU 0 上出现 Xid 79：GPU 已掉出总线（自 ")
    assert body["summary"].endswith("起 1 次）— 首要操作：重启机器")
    assert body["recommended_action"] == (
        f"该实例的硬件归 {provider} 负责：向 {provider} 提交工单并附上证据包（第一步：重启机器；如再次发生："
        "硬件（RMA / 更换实例））。如再次发生，要求更换实例。")
    evidence = body["evidence"]
    assert evidence["summary"] == body["summary"]
    assert evidence["routing"]["action"] == body["recommended_action"]
    assert evidence["remedy"] == "重启机器；如再次发生：硬件（RMA / 更换实例）"
    assert evidence["rule"]["title"] == "Xid 错误"
    assert not any(key.endswith("_msg") for key in evidence)
    # The node's own values stay untouched.
    assert evidence["values"]["code"] == 79


def test_search_still_matches_the_english_summary(viewer_api, fleet):
    rows = viewer_api.get("/api/v1/findings/", {"search": "retransmits"}, **ZH).json()["results"]
    assert [row["rule"] for row in rows] == ["tcp_retransmits"]


def test_triage_headline_in_chinese(viewer_api):
    node = healthy_node()
    set_status(node, received_at=timezone.now(), gpu_count_seen=6)
    evaluate(now=timezone.now() - timedelta(minutes=1))
    evaluate()
    body = viewer_api.get(f"/api/v1/nodes/{node.pk}/triage/", **ZH).json()
    assert body["headline"] == f"第 1 步 — 8 块 GPU 中仅 6 块可见 — 责任方：{node.provider.name}"
    assert body["steps"][0]["reason"] == "8 块 GPU 中仅 6 块可见"
    assert body["steps"][0]["title"] == "GPU 可见性"
    assert body["steps"][1]["reason"] == "未发现问题"
    assert body["headline_finding"]["summary"] == "8 块 GPU 中仅 6 块可见"
    english = viewer_api.get(f"/api/v1/nodes/{node.pk}/triage/").json()
    assert english["headline"] == f"Step 1 — 6 of 8 GPUs visible — owner: {node.provider.name}"


def test_a_pending_condition_and_its_duration_in_chinese(viewer_api):
    node = healthy_node()
    now = timezone.now()
    set_status(node, received_at=now, tcp_retrans_pct=4.0)
    evaluate(now=now)
    body = viewer_api.get(f"/api/v1/nodes/{node.pk}/triage/", **ZH).json()
    capacity = body["steps"][2]
    assert capacity["status"] == "pending"
    assert capacity["pending"][0]["summary"] == "TCP 重传占已发送报文段的 4.00 %（阈值 1 %）"
    assert capacity["reason"].startswith("正在形成，")
    assert "分钟后产生问题：TCP 重传" in capacity["reason"]
    assert body["headline"].startswith("第 3 步 — 正在形成，")


def test_the_consequence_of_a_cause_in_chinese():
    node = healthy_node(billing_mode="on_demand", delivery_form="cloud_dedicated")
    Rule.objects.filter(slug="node_silent").update(duration_s=0)
    set_status(node, silent=True, silent_since=T0, notice_kind="stop", notice_deadline=T0 + timedelta(minutes=2))
    evaluate(now=T0 + timedelta(seconds=30))
    with translation.override("zh-hans"):
        triage = node_triage(node=node, now=T0 + timedelta(seconds=31))
    reason = triage["steps"][0]["reason"]
    assert reason.startswith("自 ") and "起无上报 — 节点的 Agent、操作系统或网络已中断 — 由以下问题引起：" in reason
    deadline = T0 + timedelta(minutes=2)
    assert reason.endswith(f"云平台已通知该实例将被 stop：剩余 90 秒（{deadline:%H:%M:%S} UTC 回收）")
    assert triage["consequences"][0]["summary"].startswith("自 ")
    assert triage["headline"].startswith("第 4 步 — 云平台已通知该实例将被 stop")


def test_rule_catalogue_in_chinese(viewer_api):
    rows = {row["slug"]: row for row in viewer_api.get("/api/v1/rules/", **ZH).json()}
    steal = rows["cpu_steal"]
    assert steal["title"] == "CPU steal 过高（邻居干扰）"
    assert steal["description"] == "在云节点上，虚拟化层把 CPU 时间分给了其他租户。"
    assert steal["param_specs"][0]["help"] == "CPU steal 比例"
    english = {r["slug"]: r for r in viewer_api.get("/api/v1/rules/").json()}
    assert english["cpu_steal"]["title"] == "CPU steal high (noisy neighbour)"
    assert english["cpu_steal"]["param_specs"][0]["help"] == "CPU steal share"


def test_evidence_text_in_chinese(viewer_api, fleet):
    finding = open_findings("tcp_retransmits", fleet["owned"]).get()
    response = viewer_api.get(f"/api/v1/findings/{finding.pk}/evidence/", {"format": "text"}, **ZH)
    assert response.status_code == 200
    text = response.content.decode()
    assert text.startswith(f"证据包（问题 #{finding.pk}）— {fleet['owned'].hostname}")
    assert f"#{finding.pk} tcp_retransmits — TCP 重传占已发送报文段的 4.00 %（阈值 1 %）" in text
    assert "  下一步：由我方修复（自有裸金属上的主机操作系统）" in text
    assert "== 责任边界 " in text
    english = viewer_api.get(f"/api/v1/findings/{finding.pk}/evidence/", {"format": "text"}).content.decode()
    assert english.startswith(f"Evidence bundle (finding #{finding.pk})")
    assert "  next action: Ours to fix (host os on Bare metal, our own)" in english


def test_an_operators_text_is_never_translated(viewer_api, fleet):
    """The provider's support contact is typed by an operator: shown as typed even when it reads like a msgid."""
    provider = fleet["owned"].provider
    provider.support_contact = "reboot the machine"
    provider.save()
    finding = open_findings("tcp_retransmits", fleet["owned"]).get()
    row = viewer_api.get(f"/api/v1/findings/{finding.pk}/", **ZH).json()
    assert row["summary"].startswith("TCP 重传")
    assert row["provider_support_contact"] == "reboot the machine"


def test_a_finding_written_before_messages_falls_back_to_its_english(viewer_api, fleet):
    finding = open_findings("tcp_retransmits", fleet["owned"]).get()
    Finding.objects.filter(pk=finding.pk).update(summary_msg=None, action_msg=None)
    row = viewer_api.get(f"/api/v1/findings/{finding.pk}/", **ZH).json()
    assert row["summary"] == finding.summary
    assert row["recommended_action"] == finding.recommended_action


def test_unchanged_content_in_another_cycle_is_seen_again_not_rewritten(fleet):
    finding = open_findings("tcp_retransmits", fleet["owned"]).get()
    before = (finding.summary_msg, finding.action_msg, finding.evidence)
    evaluate(now=T0 + timedelta(minutes=10))
    finding.refresh_from_db()
    assert (finding.summary_msg, finding.action_msg, finding.evidence) == before
    assert finding.last_seen == T0 + timedelta(minutes=10)


def test_ticket_content_stays_in_the_server_language_even_inside_a_chinese_request(fleet):
    """Tickets and webhooks are written in LANGUAGE_CODE (English), whatever language is active while they are
    built (a worker has none; an API call that triggers one may ask for Chinese)."""
    from fleet.integrations.content import finding_content

    finding = open_findings("tcp_retransmits", fleet["owned"]).get()
    with translation.override("zh-hans"):
        content = finding_content(finding=finding, event_kind="finding.opened", action="open", now=T0)
        assert translation.get_language() == "zh-hans"  # restored afterwards
    assert content["summary"] == finding.summary
    assert content["evidence_text"].startswith(f"Evidence bundle (finding #{finding.pk})")
    assert "next action: Ours to fix (host os on Bare metal, our own)" in content["evidence_text"]
    assert content["evidence"]["finding"]["recommended_action"] == finding.recommended_action
