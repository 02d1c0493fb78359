"""Django admin's login page behind the same throttle as the API's session login."""

import math

from django.contrib import admin
from django.http import HttpResponse

from .http import client_address
from .services import login_failure_record, login_success_record, login_throttle_check


def admin_login(request, extra_context=None):
    """Checks the throttle before Django's login view hashes the password, then records the outcome."""
    attempt = request.method == "POST"
    if attempt:
        username = request.POST.get("username", "")
        address = client_address(request)
        wait = login_throttle_check(username=username, address=address)
        if wait is not None:
            seconds = math.ceil(wait)
            return HttpResponse(f"Too many login attempts; try again in {seconds} s.\n", status=429,
                                content_type="text/plain; charset=utf-8", headers={"Retry-After": str(seconds)})
    response = admin.site.login(request, extra_context)
    if attempt:
        if request.user.is_authenticated and response.status_code in (301, 302):
            login_success_record(username=username)
        elif username:
            login_failure_record(username=username, address=address)
    return response
