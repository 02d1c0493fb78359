from django.contrib.auth.models import AbstractUser
from django.db import models
from django.utils import timezone

from .choices import ROLE_RANK, Role


class User(AbstractUser):
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)

    def has_role(self, role: str) -> bool:
        if self.is_superuser:
            return True
        return ROLE_RANK[Role(self.role)] >= ROLE_RANK[Role(role)]


class APIToken(models.Model):
    """A user's API key. Only its hash is stored; the key is shown once at creation."""

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, db_index=True, help_text="First characters, to tell keys apart.")
    key_hash = models.CharField(max_length=64, unique=True)
    write_enabled = models.BooleanField(default=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or self.expires_at > timezone.now()


class SavedView(models.Model):
    """A user's named filter set for a console list (nodes, findings): the list's query string, kept per user."""

    class Page(models.TextChoices):
        NODES = "nodes", "Nodes"
        FINDINGS = "findings", "Findings"

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="saved_views")
    page = models.CharField(max_length=16, choices=Page.choices)
    name = models.CharField(max_length=80)
    query = models.CharField(max_length=2000, blank=True,
                             help_text="The list's filters as a URL query string, e.g. severity=critical")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["page", "name", "id"]
        constraints = [models.UniqueConstraint(fields=["user", "page", "name"], name="saved_view_unique_name")]

    def __str__(self) -> str:
        return f"{self.user.username}: {self.page} / {self.name}"
