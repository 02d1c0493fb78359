"""What billing needs to know about a node that may be set on the node or inherited from its pool."""

from fleet.inventory.models import Node, Site


def effective_site(node: Node) -> Site | None:
    return node.site if node.site_id else (node.pool.site if node.pool_id else None)


def effective_site_id(node: Node) -> int | None:
    return node.site_id or (node.pool.site_id if node.pool_id else None)


def effective_instance_type(node: Node) -> str:
    return node.instance_type or (node.pool.instance_type if node.pool_id else "")


NODE_RELATED = ("provider", "site", "pool", "pool__site")
