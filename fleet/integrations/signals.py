"""Signals for other apps (the remediation engine's `await_external` steps, incident timelines), so this app
never imports them.

`ticket_updated` is sent INSIDE the transaction that stored an inbound update, with `ticket` (a `Ticket`),
`update` (the `TicketUpdate`) and `now`; receivers write to the database only.
"""

from django.dispatch import Signal

ticket_updated = Signal()
