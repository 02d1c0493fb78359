from celery import shared_task


@shared_task(name="executors.bootstrap_run")
def bootstrap_run(run_id: int) -> dict:
    from .services.bootstrap import bootstrap_execute, bootstrap_summary

    return bootstrap_summary(bootstrap_execute(run_id=run_id))


@shared_task(name="executors.ssh_action_run")
def ssh_action_run(action_id: int) -> dict:
    from .services.ssh_actions import ssh_action_execute

    action = ssh_action_execute(action_id=action_id)
    return {"action": action.pk, "state": action.state}
