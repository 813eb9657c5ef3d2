"""Fences of a gang preemptor go when the gang is placed (fake API serving upstream's
DeviceTaintRules). The chaos run's long version (seed 2) left all ten fences of a
five-member gang behind after it was placed, with a single leader and no failover in
between; this smallest shape (two members, one leader) does not reproduce it, so the
leak needs more than the plain path: kept as the regression test to grow."""

from __future__ import annotations

import asyncio
from typing import Any

from operators.allocator_controller.preempt_loop import FENCE_RULES
from tests.fake_api import Response, run
from tests.gangs.world import NS
from tests.preemption.test_gang_preemption_controller import world
from tests.preemption.test_preemption_controller import API, Cluster


class FencingAPI(API):
    """The fake API serving upstream's DeviceTaintRules (1.37+), where fences go."""

    def __init__(self) -> None:
        super().__init__()
        self.rules: dict[str, dict[str, Any]] = {}

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Response:
        if path.startswith(FENCE_RULES):
            self.calls.append((method, path, body))
            if method == "GET":
                return Response(200, {"items": list(self.rules.values())})
            if method == "POST":
                name = body["metadata"]["name"]
                if name in self.rules:
                    return Response(409, {"reason": "AlreadyExists"})
                self.rules[name] = body
                return Response(201, body)
            if method == "DELETE":
                found = self.rules.pop(path.rsplit("/", 1)[1], None)
                return Response(200, found) if found else Response(404, {"reason": "NotFound"})
        return await super().request(method, path, body, content_type)


class FencingCluster(Cluster):
    api: FencingAPI

    def new_api(self) -> FencingAPI:
        return FencingAPI()


def test_the_fences_of_a_gang_preemptor_go_when_the_gang_is_placed() -> None:
    c = FencingCluster(world())
    run(c.settle())
    assert len(c.api.rules) == 2
    c.release_claims_of_gone_pods()
    run(c.settle())
    run(c.settle())
    assert c.nomination("m-0") is None and c.nomination("m-1") is None
    assert c.api.rules == {}


class RacingAPI(FencingAPI):
    """While the first member's nomination is being written, the devices come free and
    the controllers run: the gang, whose nomination is still being written, fits."""

    def __init__(self) -> None:
        super().__init__()
        self.meanwhile: Any = None

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Response:
        if method == "PATCH" and path.endswith("/pods/m-0") and self.meanwhile is not None \
                and "annotations" in (body or {}).get("metadata", {}):
            hook, self.meanwhile = self.meanwhile, None
            await hook()
        return await super().request(method, path, body, content_type)


def test_a_gang_that_fits_while_its_nomination_is_written_leaves_no_fence() -> None:
    """The chaos run's seed 2: a gang placed by the allocator while its own nomination was
    still being written kept every fence (its nomination had ended before they were
    written)."""
    c = FencingCluster.__new__(FencingCluster)
    c.new_api = RacingAPI  # type: ignore[method-assign]
    FencingCluster.__init__(c, world())

    async def free_and_decide() -> None:
        for victim in ("low-a1", "low-a2"):  # gone by other hands (a job ended)
            del c.api.objects[f"/api/v1/namespaces/{NS}/pods/{victim}"]
        c.release_claims_of_gone_pods()
        me = asyncio.current_task()
        for controller in (c.allocator, c.narrowing, c.allocator):
            await controller.step()
            while others := [t for t in controller.tasks if t is not me and not t.done()]:
                await asyncio.gather(*others, return_exceptions=True)
            c.echo()

    c.api.meanwhile = free_and_decide
    for _ in range(3):
        run(c.settle())
        c.release_claims_of_gone_pods()
    assert c.devices("m-0-claim") and c.devices("m-1-claim")
    assert c.nomination("m-0") is None and c.nomination("m-1") is None
    assert c.api.rules == {}, "no fence is left once the gang is placed"
