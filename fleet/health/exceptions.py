class EvaluationConflict(Exception):
    """Another cycle opened the same finding concurrently; this cycle rolled back and the next one catches up."""
