"""The rule catalog, one module per triage step (plus Xid). `catalog.RULES` lists them all in triage order."""
