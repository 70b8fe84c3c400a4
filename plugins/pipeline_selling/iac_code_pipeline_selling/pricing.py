"""Monthly costs from a YAML price table: the shipped sample is illustrative and every cost it produces says so.

A resource type the table does not know is reported in its cost item (``priced: false``) and left out of the
total, never priced at 0; the total says how many were left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SAMPLE_TABLE = Path(__file__).with_name("prices.yaml")


@dataclass(frozen=True)
class PriceTable:
    """A price table: per resource type, a monthly price and the spec it assumes."""

    source: str
    date: str
    currency: str
    official: bool
    prices: Mapping[str, Mapping[str, Any]]

    @classmethod
    def load(cls, path: Path = SAMPLE_TABLE) -> PriceTable:
        """Read a price file (``source``, ``date``, ``currency``, ``official``, ``resources``); ``ValueError``
        saying what is wrong when it is not one."""
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"cannot be read ({exc.strerror or type(exc).__name__})") from None
        except yaml.YAMLError:
            raise ValueError("is not valid YAML") from None
        if not isinstance(document, dict):
            raise ValueError("must be a mapping with source, date, currency and resources")
        missing = [k for k in ("source", "date", "currency", "resources") if not document.get(k)]
        if missing:
            raise ValueError(f"lacks {', '.join(missing)}")
        resources = document["resources"]
        if not isinstance(resources, dict):
            raise ValueError("'resources' must map resource types to {monthly, spec}")
        for rtype, entry in resources.items():
            monthly = entry.get("monthly") if isinstance(entry, dict) else None
            if isinstance(monthly, bool) or not isinstance(monthly, int | float) or monthly < 0:
                raise ValueError(f"resource {str(rtype)[:80]!r} needs a 'monthly' price >= 0")
        return cls(source=str(document["source"]), date=str(document["date"]), currency=str(document["currency"]),
                   official=bool(document.get("official", False)), prices=dict(resources))

    @property
    def disclaimer(self) -> str:
        """What every cost from this table says about its prices."""
        if self.official:
            return f"Prices from {self.source}, dated {self.date}."
        return f"Illustrative sample prices from {self.source}, dated {self.date}; not official Alibaba Cloud pricing."

    def money(self, amount: float) -> str:
        """``"CNY 240.00"``."""
        return f"{self.currency} {amount:,.2f}"

    def estimate(self, resources: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The cost of a template's resources: items, the total as a string and a number, the unpriced types."""
        items: list[dict[str, Any]] = []
        total = 0.0
        unpriced: list[str] = []
        for resource in resources:
            rtype = str(resource.get("type", ""))
            name = str(resource.get("name", "") or rtype)
            count = resource_count(resource)
            key = rtype
            properties = resource.get("properties") or {}
            if rtype == "ALIYUN::RDS::DBInstance" and _high_availability(properties):
                key = f"{rtype}@HighAvailability"
            entry = self.prices.get(key)
            if entry is None:
                unpriced.append(rtype)
                items.append({"name": name, "type": rtype, "spec": "", "monthly_cost": "not priced: missing from the price table",
                              "priced": False, "count": count, "price_source": self.source,
                              "reason": "missing from the price table"})
                continue
            amount = float(entry.get("monthly", 0)) * count
            total += amount
            spec = str(entry.get("spec", ""))
            items.append({"name": name, "type": rtype, "spec": f"{count} x {spec}" if count > 1 else spec,
                          "monthly_cost": self.money(amount), "priced": True, "count": count, "price_source": self.source})
        total_text = f"{self.money(total)} / month"
        if unpriced:
            total_text += f" (excluding {len(unpriced)} unpriced resource(s))"
        return {"items": items, "total_monthly_cost": total_text, "total": round(total, 2), "currency": self.currency,
                "unpriced_types": sorted(set(unpriced)), "price_source": self.source, "price_date": self.date,
                "official": self.official, "disclaimer": self.disclaimer}


class PriceTableSource:
    """``price-table``: a YAML price file, priced locally (no network)."""

    name = "price-table"

    def __init__(self, table: PriceTable) -> None:
        self.table = table

    @property
    def disclaimer(self) -> str:
        return self.table.disclaimer

    async def estimate(self, resources: Sequence[Mapping[str, Any]], *, region: str = "") -> dict[str, Any]:
        """The table's cost of ``resources`` (every price file is for one region; ``region`` is not used)."""
        return self.table.estimate(resources)


def resource_count(resource: Mapping[str, Any]) -> int:
    """How many of a resource a template declares (``MaxAmount``/``Amount``/``Count``, else ``count``, else 1)."""
    properties = resource.get("properties") or {}
    for key in ("MaxAmount", "Amount", "Count"):
        value = properties.get(key) if isinstance(properties, Mapping) else None
        if isinstance(value, int) and value > 0:
            return value
    value = resource.get("count")
    return value if isinstance(value, int) and value > 0 else 1


def _high_availability(properties: Any) -> bool:
    if not isinstance(properties, Mapping):
        return False
    category = str(properties.get("Category", "")).lower()
    return category in ("highavailability", "high_availability", "alwayson", "finance") or bool(properties.get("ZoneIdSlave1"))
