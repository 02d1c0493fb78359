"""Fleet-wide chart endpoints of telemetry: GPU utilisation over time and Xid events per day by code."""

from datetime import UTC, datetime, time, timedelta

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.core.api.mixins import StrictQueryParamsMixin
from fleet.core.api.trends import (
    RangeQuerySerializer,
    StrictQuerySerializer,
    TrendSerializer,
    query_params,
    time_range,
)

from ..selectors import fleet_utilisation, xid_daily


class FleetUtilisationView(StrictQueryParamsMixin, APIView):
    """Mean GPU utilisation of the fleet over the range (one series, key `utilisation_pct`)."""

    @extend_schema(parameters=[RangeQuerySerializer], responses=TrendSerializer)
    def get(self, request):
        rng = time_range(query_params(RangeQuerySerializer, request)["range"], now=timezone.now())
        points = fleet_utilisation(start=rng.start, end=rng.end, step=rng.step_s, now=timezone.now())
        return Response(TrendSerializer({"range": rng.name, "start": rng.start, "end": rng.end, "step": rng.step_s,
                                         "series": [{"key": "utilisation_pct", "points": points}]}).data)


class XidDailyQuerySerializer(StrictQuerySerializer):
    days = serializers.ChoiceField(choices=[7, 30, 90], default=30, help_text="Days back, today included")


class XidCodeSeriesSerializer(serializers.Serializer):
    code = serializers.IntegerField()
    counts = serializers.ListField(child=serializers.IntegerField(), help_text="One count per day of `days`")


class XidDailySerializer(serializers.Serializer):
    days = serializers.ListField(child=serializers.DateField())
    series = XidCodeSeriesSerializer(many=True)


class XidDailyView(StrictQueryParamsMixin, APIView):
    """Xid events per day (UTC) and code; one series per code, a count for every day (zero included)."""

    @extend_schema(parameters=[XidDailyQuerySerializer], responses=XidDailySerializer)
    def get(self, request):
        days = int(query_params(XidDailyQuerySerializer, request)["days"])
        first = timezone.now().astimezone(UTC).date() - timedelta(days=days - 1)
        start = datetime.combine(first, time.min, tzinfo=UTC)
        by_code = xid_daily(start=start, end=start + timedelta(days=days))
        labels = [(first + timedelta(days=i)).isoformat() for i in range(days)]
        series = [{"code": code, "counts": [counts.get(day, 0) for day in labels]}
                  for code, counts in sorted(by_code.items())]
        return Response(XidDailySerializer({"days": labels, "series": series}).data)
