"""Fleet-wide chart endpoint of billing: what each month cost and the cost per utilised GPU-hour over the last
months (docs/billing.md, "Cost history")."""

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.core.api.mixins import StrictQueryParamsMixin
from fleet.core.api.trends import StrictQuerySerializer, query_params

from ..selectors.cost_history import cost_history


class CostHistoryQuerySerializer(StrictQuerySerializer):
    months = serializers.IntegerField(min_value=1, max_value=24, default=12, help_text="Calendar months back, "
                                      "the current one included")


class MonthCostSerializer(serializers.Serializer):
    month = serializers.CharField(help_text="YYYY-MM")
    currency = serializers.CharField()
    nodes = serializers.IntegerField()
    gpu_count = serializers.IntegerField()
    total = serializers.DecimalField(max_digits=20, decimal_places=2)
    utilisation_pct = serializers.DecimalField(max_digits=6, decimal_places=2, allow_null=True)
    per_utilised_gpu_hour = serializers.DecimalField(max_digits=20, decimal_places=4, allow_null=True)
    estimated = serializers.BooleanField(
        help_text="True when some day of the month before today has no cost recorded at the prices of the time (no "
                  "daily snapshot, or one the backfill wrote): those days are costed at today's prices")


class CostHistoryView(StrictQueryParamsMixin, APIView):
    """One row per month and currency: what the month cost (the current one so far), from the daily cost snapshots
    at the prices of the time where they exist and at today's prices elsewhere (`estimated`), and the cost per
    utilised GPU-hour with the measured utilisation."""

    @extend_schema(parameters=[CostHistoryQuerySerializer], responses=MonthCostSerializer(many=True))
    def get(self, request):
        months = query_params(CostHistoryQuerySerializer, request)["months"]
        return Response(MonthCostSerializer(cost_history(months=months, now=timezone.now()), many=True).data)
