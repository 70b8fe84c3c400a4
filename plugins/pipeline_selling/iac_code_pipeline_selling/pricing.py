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
        """Read a price file (``source``, ``date``, ``currency``, ``official``, ``resources``)."""
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        return cls(source=str(document["source"]), date=str(document["date"]), currency=str(document["currency"]),
                   official=bool(document.get("official", False)), prices=dict(document["resources"]))

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
            count = _count(resource)
            key = rtype
            properties = resource.get("properties") or {}
            if rtype == "ALIYUN::RDS::DBInstance" and _high_availability(properties):
                key = f"{rtype}@HighAvailability"
            entry = self.prices.get(key)
            if entry is None:
                unpriced.append(rtype)
                items.append({"name": name, "type": rtype, "spec": "", "monthly_cost": "not priced: missing from the price table",
                              "priced": False, "count": count})
                continue
            amount = float(entry.get("monthly", 0)) * count
            total += amount
            spec = str(entry.get("spec", ""))
            items.append({"name": name, "type": rtype, "spec": f"{count} x {spec}" if count > 1 else spec,
                          "monthly_cost": self.money(amount), "priced": True, "count": count})
        total_text = f"{self.money(total)} / month"
        if unpriced:
            total_text += f" (excluding {len(unpriced)} unpriced resource(s))"
        return {"items": items, "total_monthly_cost": total_text, "total": round(total, 2), "currency": self.currency,
                "unpriced_types": sorted(set(unpriced)), "price_source": self.source, "price_date": self.date,
                "official": self.official, "disclaimer": self.disclaimer}


def _count(resource: Mapping[str, Any]) -> int:
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
