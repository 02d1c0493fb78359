"""Signals other apps subscribe to without the health engine importing them."""

from django.dispatch import Signal

# Sent by the evaluation tasks after a cycle committed, with `finding_ids`: the findings it opened.
findings_opened = Signal()

# Sent INSIDE the evaluation cycle's transaction, with `opened` and `resolved` (finding ids) and `now`: a receiver
# that writes rows (a transactional outbox) commits or rolls back with the cycle. Receivers must only write to the
# database, never talk to the network, and must not raise (a failure would roll the cycle back).
findings_changed = Signal()
