"""The provider scorecard endpoint (fleet/remediation/scorecard.py)."""

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.core.api.mixins import StrictQueryParamsMixin
from fleet.core.api.trends import StrictQuerySerializer, query_params

from ..scorecard import provider_scorecard

RATE = {"max_digits": 20, "decimal_places": 2, "allow_null": True}


class ScorecardQuerySerializer(StrictQuerySerializer):
    days = serializers.ChoiceField(choices=[7, 30, 90], default=30, help_text="Window in days, up to now")


class ProviderScoreSerializer(serializers.Serializer):
    provider_id = serializers.IntegerField()
    provider = serializers.CharField()
    kind = serializers.CharField()
    support_contact = serializers.CharField()
    gpu_days = serializers.DecimalField(max_digits=20, decimal_places=2)
    findings = serializers.IntegerField()
    provider_findings = serializers.IntegerField(help_text="Findings whose responsible party is the provider")
    incidents = serializers.IntegerField()
    findings_per_1k_gpu_days = serializers.DecimalField(**RATE)
    provider_findings_per_1k_gpu_days = serializers.DecimalField(**RATE)
    incidents_per_1k_gpu_days = serializers.DecimalField(**RATE)


class ProviderScorecardView(StrictQueryParamsMixin, APIView):
    """Findings and incidents opened in the window per provider, and per 1,000 GPU-days of its GPUs."""

    @extend_schema(parameters=[ScorecardQuerySerializer], responses=ProviderScoreSerializer(many=True))
    def get(self, request):
        days = int(query_params(ScorecardQuerySerializer, request)["days"])
        return Response(ProviderScoreSerializer(provider_scorecard(days=days, now=timezone.now()), many=True).data)
