"""Prices are honest: the price sources (``iac_code_price_sources``) through a running server in ``mode: pipeline``.

``price-table`` (the default, the shipped illustrative sample or a ``pricing-file``), ``bss`` against a local
fake of BssOpenApi (a real aiohttp server on 127.0.0.1 answering the RPC JSON wire format the official SDK
speaks: ``x-acs-action`` / ``Action``, flattened ``ModuleList.N.*`` parameters, an ACS3 ``Authorization``
header), and a third party's price source registered as a plugin. Every cost names its source; a resource a
source cannot price is reported, never priced at 0.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from aiohttp import web
from google.protobuf.json_format import MessageToDict

from iac_code.api import PriceSourceSpec, StartupError, hookimpl
from iac_code.testing import connect_client, make_kernel, start_server

from pipeline_selling_test_streams import pipeline_events as _pipeline

KEY_ID = "LTAI-test-key-id-0001"
SECRET = "bss-secret-never-shown-0123456789"
WEB_DB = "Deploy a web shop with a MySQL database in cn-hangzhou"


@dataclass
class FakeBss:
    """A local BssOpenApi: ``GetSubscriptionPrice`` and ``GetPayAsYouGoPrice`` for a few products, errors for
    the others, and an ``InvalidAccessKeyId.NotFound`` for any other AccessKey id."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""
    runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.Response:
        params = dict(request.query)
        if request.can_read_body:
            params.update(dict(await request.post()))
        action = request.headers.get("x-acs-action") or params.get("Action", "")
        authorization = request.headers.get("Authorization", "")
        self.requests.append({"action": action, "params": params, "authorization": authorization,
                              "version": request.headers.get("x-acs-version") or params.get("Version", "")})
        if f"Credential={KEY_ID}," not in authorization and params.get("AccessKeyId") != KEY_ID:
            return web.json_response({"RequestId": uuid.uuid4().hex, "Code": "InvalidAccessKeyId.NotFound",
                                      "Message": "Specified access key is not found."}, status=404)
        modules = {}
        n = 1
        while f"ModuleList.{n}.ModuleCode" in params:
            modules[params[f"ModuleList.{n}.ModuleCode"]] = params.get(f"ModuleList.{n}.Config", "")
            n += 1
        product = params.get("ProductCode", "")
        quantity = int(params.get("Quantity", "1") or 1)
        if action == "GetSubscriptionPrice" and product == "ecs" and "InstanceType" in modules:
            trade = 250.0 * quantity
        elif action == "GetSubscriptionPrice" and product == "rds":
            trade = (700.0 if "Series:HighAvailability" in modules.get("Series", "") else 320.0) * quantity
        elif action == "GetPayAsYouGoPrice" and product == "slb":
            details = [{"ModuleCode": code, "OriginalCost": 0.1, "InvoiceDiscount": 0, "CostAfterDiscount": 0.1,
                        "UnitPrice": 0.1} for code in modules]
            return web.json_response({"RequestId": uuid.uuid4().hex, "Code": "Success", "Message": "Successful!",
                                      "Success": True, "Data": {"Currency": "CNY",
                                                                "ModuleDetails": {"ModuleDetail": details}}})
        else:
            return web.json_response({"RequestId": uuid.uuid4().hex, "Code": "InvalidParameter",
                                      "Message": "The specified module is not supported."}, status=400)
        return web.json_response({"RequestId": uuid.uuid4().hex, "Code": "Success", "Message": "Successful!",
                                  "Success": True, "Data": {
                                      "Currency": "CNY", "OriginalPrice": trade * 1.25, "DiscountPrice": trade * 0.25,
                                      "TradePrice": trade, "Quantity": quantity,
                                      "ModuleDetails": {"ModuleDetail": [{"ModuleCode": code} for code in modules]}}})

    async def __aenter__(self) -> FakeBss:
        app = web.Application()
        app.router.add_route("*", "/", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


@pytest.fixture
async def bss() -> AsyncIterator[FakeBss]:
    async with FakeBss() as fake:
        yield fake


async def _candidates(settings: dict[str, Any], *, extra_plugins: dict[str, object] | None = None,
                      ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One selling run up to the choice: the cost conclusions by candidate index, and the last status."""
    async with start_server({"mode": "pipeline", **settings}, extra_plugins=extra_plugins) as server, \
            connect_client(server) as client:
        message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=WEB_DB)])
        message.metadata.update({"iac_code": {"candidatePresentation": "rich-v1"}})
        events = [MessageToDict(e) async for e in client.send_message(SendMessageRequest(message=message))]
    streamed = _pipeline(events)
    costs = sorted((e for e in streamed if e["eventType"] == "candidate_step_completed"
                    and e["data"]["stepId"] == "cost_estimating"), key=lambda e: e["candidate"]["index"])
    last = [e["statusUpdate"] for e in events if "statusUpdate" in e][-1]
    return [c["data"]["conclusion"] for c in costs], last


def _assert_honest(cost: dict[str, Any]) -> None:
    """Every item names its source; an unpriced one says why and is not priced at 0."""
    assert cost["price_source"] and cost["price_date"] and cost["disclaimer"]
    for item in cost["items"]:
        assert item["price_source"], item
        if not item["priced"]:
            assert item["reason"] and item["monthly_cost"].startswith("not priced:"), item
            assert not re.search(r"\b0(\.00)?\b", item["monthly_cost"]), item
            assert item["type"] in cost["unpriced_types"]


async def test_the_default_price_table_is_the_illustrative_sample() -> None:
    costs, last = await _candidates({})
    assert len(costs) == 3
    for cost in costs:
        _assert_honest(cost)
        assert cost["price_source"].startswith("iac-code illustrative sample") and cost["price_date"] == "2026-01-15"
        assert "Illustrative sample prices" in cost["disclaimer"] and "not official" in cost["disclaimer"]
        assert cost["official"] is False
    said = last["status"]["message"]["parts"][0]["text"]
    assert "not official" in said and "2026-01-15" in said  # the generic client's text says it too
    options = last["metadata"]["iac_code"]["pipeline"]["data"]["options"]
    assert [o["total_monthly_cost"] for o in options] == [c["total_monthly_cost"] for c in costs]


async def test_a_pricing_file_replaces_the_sample_and_a_missing_type_is_reported(tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("source: Our negotiated prices\ndate: '2026-03-01'\ncurrency: USD\nofficial: true\n"
                      "resources:\n  ALIYUN::ECS::Instance: {monthly: 40, spec: g7.large}\n"
                      "  ALIYUN::ECS::VPC: {monthly: 0, spec: free}\n", encoding="utf-8")
    costs, _ = await _candidates({"pricing-file": str(prices)})
    economy = costs[0]
    _assert_honest(economy)
    assert economy["price_source"] == "Our negotiated prices" and economy["currency"] == "USD"
    assert economy["disclaimer"] == "Prices from Our negotiated prices, dated 2026-03-01."
    by_type = {i["type"]: i for i in economy["items"]}
    assert by_type["ALIYUN::ECS::Instance"]["monthly_cost"] == "USD 40.00"
    assert by_type["ALIYUN::RDS::DBInstance"]["priced"] is False  # not in this file: reported, not 0
    assert "ALIYUN::RDS::DBInstance" in economy["unpriced_types"] and economy["total"] == 40.0
    assert "excluding" in economy["total_monthly_cost"]


@pytest.mark.parametrize(("content", "problem"), [
    ("source: x\n", "lacks date, currency, resources"),
    ("source: x\ndate: d\ncurrency: CNY\nresources:\n  ALIYUN::ECS::VPC: {spec: free}\n", "needs a 'monthly' price"),
    ("[not, a, mapping", "is not valid YAML"),
])
def test_a_bad_pricing_file_stops_start_up_naming_the_key(tmp_path: Path, content: str, problem: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(content, encoding="utf-8")
    with pytest.raises(StartupError, match="pricing-file") as refused:
        make_kernel({"mode": "pipeline", "pricing-file": str(bad)})
    assert problem in str(refused.value)


def test_an_unknown_price_source_stops_start_up_listing_the_installed_ones() -> None:
    with pytest.raises(StartupError, match=r"price-source 'nope' is not an installed price source; installed: "
                                           r"bss, price-table\."):
        make_kernel({"mode": "pipeline", "price-source": "nope"})


async def test_bss_prices_through_the_sdk_and_reports_what_it_cannot_price(
        bss: FakeBss, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    costs, last = await _candidates({"price-source": "bss", "bss-endpoint": bss.url,
                                     "bss-access-key-id": KEY_ID, "bss-access-key-secret": SECRET})
    assert len(costs) == 3
    for cost in costs:
        _assert_honest(cost)
        assert cost["price_source"] == "Alibaba Cloud BssOpenApi" and cost["official"] is True
        assert cost["region"] == "cn-hangzhou" and re.fullmatch(r"\d{4}-\d{2}-\d{2}", cost["price_date"])
    economy, ha, serverless = ({i["type"]: i for i in c["items"]} for c in costs)
    assert economy["ALIYUN::ECS::Instance"]["monthly_cost"] == "CNY 250.00"
    assert economy["ALIYUN::ECS::Instance"]["api"] == "GetSubscriptionPrice"
    assert economy["ALIYUN::RDS::DBInstance"]["monthly_cost"] == "CNY 320.00"
    assert ha["ALIYUN::RDS::DBInstance"]["monthly_cost"] == "CNY 700.00"  # the HA series was asked for
    assert ha["ALIYUN::SLB::LoadBalancer"]["monthly_cost"] == "CNY 73.00"  # 0.1/h × 730 h
    assert ha["ALIYUN::SLB::LoadBalancer"]["api"] == "GetPayAsYouGoPrice"
    assert economy["ALIYUN::ECS::VPC"]["monthly_cost"] == "no charge"
    assert costs[0]["total"] == 570.0 and costs[1]["total"] == 250.0 * 2 + 700.0 + 73.0
    function = serverless["ALIYUN::FC::Function"]
    assert function["priced"] is False and "usage-based or not mapped" in function["reason"]
    assert "ALIYUN::OSS::Bucket" in costs[2]["unpriced_types"]
    said = last["status"]["message"]["parts"][0]["text"]
    assert "BssOpenApi" in said

    actions = {r["action"] for r in bss.requests}
    assert actions == {"GetSubscriptionPrice", "GetPayAsYouGoPrice"}
    ecs = next(r for r in bss.requests if r["params"].get("ProductCode") == "ecs")
    assert ecs["version"] == "2017-12-14" and ecs["params"]["SubscriptionType"] == "Subscription"
    assert ecs["params"]["ServicePeriodUnit"] == "Month" and ecs["params"]["Region"] == "cn-hangzhou"
    assert ecs["params"]["ModuleList.1.Config"].startswith("InstanceType:ecs.g7.large")
    assert all(f"Credential={KEY_ID}," in r["authorization"] for r in bss.requests)
    assert all(SECRET not in str(r) for r in bss.requests)  # signed with, never sent
    assert SECRET not in caplog.text


async def test_bss_query_failures_are_reported_per_resource(bss: FakeBss) -> None:
    costs, _ = await _candidates({"price-source": "bss", "bss-endpoint": bss.url,
                                  "bss-access-key-id": "LTAI-unknown", "bss-access-key-secret": SECRET})
    for cost in costs:
        _assert_honest(cost)
        priced = [i for i in cost["items"] if i["priced"]]
        assert all(i["monthly_cost"] == "no charge" for i in priced)  # only the resources that cost nothing
        assert cost["total"] == 0.0 and "excluding" in cost["total_monthly_cost"]
    instance = next(i for i in costs[0]["items"] if i["type"] == "ALIYUN::ECS::Instance")
    assert instance["reason"] == "BssOpenApi price query failed (InvalidAccessKeyId.NotFound)"


async def test_bss_without_credentials_falls_back_to_the_table_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ALIBABA_CLOUD_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", raising=False)
    costs, _ = await _candidates({"price-source": "bss"})
    for cost in costs:
        _assert_honest(cost)
        assert cost["fallback"] == {"from": "bss", "reason": "no Alibaba Cloud credentials configured"}
        assert cost["disclaimer"].startswith("BssOpenApi is not configured") and "not official" in cost["disclaimer"]
        assert cost["price_source"].startswith("iac-code illustrative sample")


async def test_bss_takes_the_credentials_from_the_environment(bss: FakeBss, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", SECRET)
    costs, _ = await _candidates({"price-source": "bss", "bss-endpoint": bss.url})
    assert costs[0]["price_source"] == "Alibaba Cloud BssOpenApi" and costs[0]["total"] == 570.0


class FlatRate:
    """A third party's price source: every billable resource 99 EUR, everything else refused."""

    name = "flat-rate"
    disclaimer = "Flat-rate test prices."

    async def estimate(self, resources: Any, *, region: str = "") -> dict[str, Any]:
        items = [{"name": r["name"], "type": r["type"], "spec": "flat", "monthly_cost": "EUR 99.00", "priced": True,
                  "count": 1, "price_source": "flat-rate"} for r in resources]
        return {"items": items, "total_monthly_cost": f"EUR {99.0 * len(items):,.2f} / month",
                "total": 99.0 * len(items), "currency": "EUR", "unpriced_types": [], "price_source": "flat-rate",
                "price_date": "2026-01-01", "official": False, "disclaimer": self.disclaimer}


class FlatRatePlugin:
    @hookimpl
    def iac_code_price_sources(self) -> list[PriceSourceSpec]:
        return [PriceSourceSpec(name="flat_rate", create=lambda context: FlatRate(), description="test prices")]


async def test_a_third_party_price_source_is_chosen_by_name() -> None:
    costs, last = await _candidates({"price-source": "flat-rate"}, extra_plugins={"flat": FlatRatePlugin()})
    assert {c["price_source"] for c in costs} == {"flat-rate"}
    assert costs[0]["total_monthly_cost"] == f"EUR {99.0 * len(costs[0]['items']):,.2f} / month"
    assert "Flat-rate test prices." in last["status"]["message"]["parts"][0]["text"]
