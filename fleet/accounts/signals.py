"""Safety net for user changes made outside the API (Django admin, `manage.py changepassword`): a new password
or a deactivation revokes the user's API tokens there too. The API's `user_update` revokes them itself,
attributed to the admin who made the change, before it saves; this receiver then finds none left."""

from django.db.models.signals import post_save
from django.dispatch import receiver

from .models import User
from .services import api_tokens_revoke_for_user


@receiver(post_save, sender=User, dispatch_uid="accounts.revoke_tokens_on_credential_change")
def revoke_tokens_on_credential_change(sender, instance: User, created: bool, update_fields=None, **kwargs):
    if created:
        return
    # AbstractBaseUser keeps the new raw password in `_password` until just after the save, and only for a
    # real change: a hash upgrade at login clears it before saving.
    reasons = []
    if getattr(instance, "_password", None) is not None:
        reasons.append("password changed")
    if not instance.is_active and (update_fields is None or "is_active" in update_fields):
        reasons.append("user deactivated")
    if reasons:
        api_tokens_revoke_for_user(user=instance, actor=None, reason=" and ".join(reasons))
