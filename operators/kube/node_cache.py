"""The nodes a controller's decisions read (labels, taints, cordon), kept from one listing
and the Node watch.

The allocator and the admission check both search devices among nodes: they need every
node before their first decision (a node the watch has not delivered yet would look
like no node at all), and they must not redo work for the Node updates that change
nothing they read (heartbeats and status updates, several a minute per node). One
cache serves both, so the two answer from the same view of the nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.kube.client import KubeClient
from operators.model.nodes import NodeInfo, parse_node


class NodeCache:
    """`nodes` by name; `listed` once the first listing succeeded."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeInfo] = {}
        self.listed = False

    def event(self, etype: str, body: Mapping[str, Any]) -> str | None:
        """A Node watch event: the node's name when what decisions read changed, else None."""
        node = parse_node(body)
        if not node.name:
            return None
        if etype == "DELETED":
            changed = self.nodes.pop(node.name, None) is not None
        else:
            changed = self.nodes.get(node.name) != node
            self.nodes[node.name] = node
        return node.name if changed else None

    async def load(self, client: KubeClient) -> int | None:
        """List the nodes once (a node the watch already delivered is kept: it may be the
        newer one). None when listed; else the status of the failed listing, which the
        caller logs and retries at its next pass."""
        resp = await client.get("/api/v1/nodes")
        if not resp.ok or not isinstance(resp.body, Mapping):
            return resp.status
        for item in resp.body.get("items") or []:
            if isinstance(item, Mapping):
                node = parse_node(item)
                if node.name:
                    self.nodes.setdefault(node.name, node)
        self.listed = True
        return None

    def in_order(self) -> list[NodeInfo]:
        """The nodes by name (a decision's node order is deterministic)."""
        return [node for _, node in sorted(self.nodes.items())]


__all__ = ["NodeCache"]
