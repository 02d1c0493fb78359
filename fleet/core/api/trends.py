"""Query and answer serializers shared by the fleet-wide chart endpoints (ranges: fleet/core/timeranges.py)."""

from rest_framework import serializers

from fleet.core.timeranges import DEFAULT_RANGE, RANGES, TimeRange, time_range

__all__ = ["RangeQuerySerializer", "StrictQuerySerializer", "TimeRange", "TrendSerializer", "query_params",
           "time_range"]


class StrictQuerySerializer(serializers.Serializer):
    """A query-string serializer that names unknown parameters in a 400 instead of ignoring them."""

    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError(
                {name: [f"Unknown parameter; this endpoint takes {', '.join(sorted(self.fields))}."]
                 for name in unknown})
        return attrs


class RangeQuerySerializer(StrictQuerySerializer):
    range = serializers.ChoiceField(choices=list(RANGES), default=DEFAULT_RANGE,
                                    help_text="Time range: 1h, 24h, 7d or 30d (default 24h).")


def query_params(serializer_class, request) -> dict:
    serializer = serializer_class(data=request.query_params.dict())
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class TrendSeriesSerializer(serializers.Serializer):
    """Points of one line: [[ISO time, value or null], ...]."""

    key = serializers.CharField()
    points = serializers.ListField(child=serializers.ListField(child=serializers.JSONField(allow_null=True)))


class TrendSerializer(serializers.Serializer):
    range = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    step = serializers.IntegerField(help_text="Seconds per bucket")
    series = TrendSeriesSerializer(many=True)
