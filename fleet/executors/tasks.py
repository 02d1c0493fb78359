from celery import shared_task


# A bootstrap outlives the default task limits (hosts × their own timeout, in waves); so may a long hook.
@shared_task(name="executors.bootstrap_run", time_limit=6 * 3600 + 60, soft_time_limit=6 * 3600)
def bootstrap_run(run_id: int) -> dict:
    from .services.bootstrap import bootstrap_execute, bootstrap_summary

    return bootstrap_summary(bootstrap_execute(run_id=run_id))


@shared_task(name="executors.ssh_action_run", time_limit=3600 + 120, soft_time_limit=3600 + 60)
def ssh_action_run(action_id: int) -> dict:
    from .services.ssh_actions import ssh_action_execute

    action = ssh_action_execute(action_id=action_id)
    return {"action": action.pk, "state": action.state}
