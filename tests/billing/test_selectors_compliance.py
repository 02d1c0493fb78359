import pytest

from fleet.billing.selectors import compliance_flags_for_nodes
from tests.factories import NodeFactory, PoolFactory, SiteFactory

pytestmark = pytest.mark.django_db


def _codes(flags, node):
    return [f.flag for f in flags[node.pk]]


def test_flags_follow_the_site_and_the_public_endpoint():
    china, us = SiteFactory(country="CN"), SiteFactory(country="US")
    public_cn = NodeFactory(site=china, public_endpoint=True)
    private_cn = NodeFactory(site=china, public_endpoint=False)
    public_us = NodeFactory(site=us, public_endpoint=True)
    via_pool = NodeFactory(site=None, pool=PoolFactory(site=china), public_endpoint=True)
    own_site_wins = NodeFactory(site=us, pool=PoolFactory(site=china), public_endpoint=True)

    flags = compliance_flags_for_nodes([n.pk for n in (public_cn, private_cn, public_us, via_pool, own_site_wins)])

    assert _codes(flags, public_cn) == ["icp_filing_required", "ddos_protection_recommended"]
    assert _codes(flags, private_cn) == []
    assert _codes(flags, public_us) == ["ddos_protection_recommended"]
    assert _codes(flags, via_pool) == ["icp_filing_required", "ddos_protection_recommended"]
    assert _codes(flags, own_site_wins) == ["ddos_protection_recommended"]
    assert "ICP" in flags[public_cn.pk][0].reason
