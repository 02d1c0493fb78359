"""OpenAPI descriptions of the custom authentication schemes (loaded by AccountsConfig.ready)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class APITokenScheme(OpenApiAuthenticationExtension):
    target_class = "fleet.accounts.authentication.APITokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Token <key>`; create keys at /api/v1/tokens/."}
