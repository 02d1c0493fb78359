"""Signals other apps subscribe to without the health engine importing them."""

from django.dispatch import Signal

# Sent by the evaluation tasks after a cycle committed, with `finding_ids`: the findings it opened.
findings_opened = Signal()
