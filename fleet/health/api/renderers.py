import json

from rest_framework.renderers import BaseRenderer
from rest_framework.utils.encoders import JSONEncoder

from ..selectors.evidence_text import evidence_text


class EvidenceTextRenderer(BaseRenderer):
    """`?format=text`: an evidence bundle as plain text (errors keep the API's JSON error shape, as text)."""

    media_type = "text/plain"
    format = "text"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, dict) and "node" in data and "gpus" in data:
            return evidence_text(data).encode(self.charset)
        return json.dumps(data, cls=JSONEncoder, ensure_ascii=False).encode(self.charset)
