"""A finding's server-written texts in the active language (the request's, via LocaleMiddleware; English in
workers, tickets and integrations). The English columns stay what search and integrations read; the stored
messages (`summary_msg`, `action_msg`, the evidence's `*_msg`) are rendered here. Rows written before the
messages existed fall back to their English text."""

from __future__ import annotations

from django.utils.translation import gettext

from fleet.core.i18n import render


def catalogue_text(text: str) -> str:
    """A rule definition's title / description / remedy / parameter help (the English text is the msgid)."""
    return gettext(text) if text else text


def finding_summary(finding) -> str:
    return render(finding.summary_msg, fallback=finding.summary)


def finding_action(finding) -> str:
    return render(finding.action_msg, fallback=finding.recommended_action)


def summary_param(finding):
    """The finding's summary as a message parameter (nested in a headline), or its English text."""
    return finding.summary_msg or finding.summary


def evidence_rendered(evidence: dict | None) -> dict:
    """The evidence with its texts (summary, remedy, routing action, rule title) in the active language; the
    stored message forms are left out of the copy."""
    if not evidence:
        return evidence or {}
    out = {k: v for k, v in evidence.items() if not k.endswith("_msg")}
    if "summary" in out:
        out["summary"] = render(evidence.get("summary_msg"), fallback=evidence["summary"] or "")
    if "remedy" in out:
        out["remedy"] = render(evidence.get("remedy_msg"), fallback=evidence["remedy"] or "")
    routing = evidence.get("routing")
    if isinstance(routing, dict):
        out["routing"] = {k: v for k, v in routing.items() if k != "action_msg"}
        if "action" in routing:
            out["routing"]["action"] = render(routing.get("action_msg"), fallback=routing["action"] or "")
    rule = evidence.get("rule")
    if isinstance(rule, dict) and isinstance(rule.get("title"), str):
        out["rule"] = {**rule, "title": catalogue_text(rule["title"])}
    return out
