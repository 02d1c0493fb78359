"""Signals other apps subscribe to without billing importing them."""

from django.dispatch import Signal

# Sent once preemptions are recorded and their nodes moved to `preempted`, with `node_ids`, `record_ids` and
# `now` (inside the transaction for an operator's mark, so a receiver that raises rolls it back): receivers only
# write to the database and must not raise.
nodes_preempted = Signal()
