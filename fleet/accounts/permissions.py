from rest_framework import permissions

from .choices import Role
from .models import APIToken


class RolePermission(permissions.BasePermission):
    """Reads need any signed-in user; writes need the view's `write_role` (operator by default).

    A view may set `read_role` too (e.g. admin-only user management). A token without the write
    flag can never write, whatever its user's role.
    """

    message = "Your role does not allow this action."

    def has_permission(self, request, view):
        user = request.user
        if not (user and user.is_authenticated):
            return False
        if request.method in permissions.SAFE_METHODS:
            return user.has_role(getattr(view, "read_role", Role.VIEWER))
        if isinstance(request.auth, APIToken) and not request.auth.write_enabled:
            self.message = "This API token is read-only."
            return False
        required = getattr(view, "write_role", Role.OPERATOR)
        action_roles = getattr(view, "action_roles", {})
        required = action_roles.get(getattr(view, "action", None), required)
        if not user.has_role(required):
            self.message = f"This action needs the {required} role; you are {user.role}."
            return False
        return True
