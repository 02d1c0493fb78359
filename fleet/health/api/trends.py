"""Fleet-wide chart endpoint of the health engine: open findings by triage step and healthy-GPU share."""

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.core.api.mixins import StrictQueryParamsMixin
from fleet.core.api.trends import RangeQuerySerializer, TrendSerializer, query_params, time_range

from ..selectors.trends import finding_trends


class FindingTrendView(StrictQueryParamsMixin, APIView):
    """Series `open.<step>` (open findings per triage step) and `healthy_gpu_share` (0–1: GPUs without an open
    critical or warning finding on them or their node), each bucket sampled at its end."""

    @extend_schema(parameters=[RangeQuerySerializer], responses=TrendSerializer)
    def get(self, request):
        now = timezone.now()
        rng = time_range(query_params(RangeQuerySerializer, request)["range"], now=now)
        data = finding_trends(rng=rng, now=now)
        series = [{"key": f"open.{step}", "points": [list(p) for p in zip(data["times"], counts, strict=True)]}
                  for step, counts in data["by_step"].items()]
        series.append({"key": "healthy_gpu_share",
                       "points": [list(p) for p in zip(data["times"], data["healthy_gpu_share"], strict=True)]})
        return Response(TrendSerializer({"range": rng.name, "start": rng.start, "end": rng.end, "step": rng.step_s,
                                         "series": series}).data)
