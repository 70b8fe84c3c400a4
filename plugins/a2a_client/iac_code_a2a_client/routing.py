"""Routes for ``iac-code a2a-client``: the spec syntax, the config form, snapshots, selection.

A route names a remote agent: ``name=url;skills=a,b;tags=x,y``. Which route a call uses is
decided by a router plugin (``iac_code_routers``; this distribution's ``default`` router,
:mod:`iac_code_a2a_client.default_router`, scores name, skill and prompt matches).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from iac_code.api import Route, RouteCandidate, RouteQuery, RouterSpec, atomic_write, private_dir

SNAPSHOT_FILE = "routes.json"


class RouteError(ValueError):
    """A route spec, a route config entry or a route selection that cannot be used."""


def _values(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def parse_route(spec: str) -> Route:
    """Parse ``name=url;skills=a,b;tags=x,y`` (or the legacy ``name=url;skill;tag1,tag2``)."""
    segments = [s.strip() for s in str(spec).split(";") if s.strip()]
    if not segments or "=" not in segments[0]:
        raise RouteError("A2A route must start with name=url.")
    name, _, url = segments[0].partition("=")
    name, url = name.strip(), url.strip()
    if not name or not url:
        raise RouteError("A2A route name and URL are required.")
    skills: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None
    positional: list[str] = []
    for segment in segments[1:]:
        if "=" not in segment:
            positional.append(segment)
            continue
        key, _, value = segment.partition("=")
        key = key.strip()
        if key == "skills":
            skills = _values(value)
        elif key == "tags":
            tags = _values(value)
        else:
            raise RouteError(f"Unknown A2A route segment '{key}'. Expected skills or tags.")
    if skills is None and positional:
        skills = (positional[0],)
    if tags is None and len(positional) >= 2:
        tags = _values(positional[1])
    return Route(name=name, url=url, skills=skills or (), tags=tags or ())


def _entry_spec(entry: Any) -> str:
    if isinstance(entry, str):
        return entry
    if not isinstance(entry, dict):
        raise RouteError("A2A client routes config entries must be strings or mappings.")
    name, url = entry.get("name"), entry.get("url")
    if not isinstance(name, str) or not name.strip() or not isinstance(url, str) or not url.strip():
        raise RouteError("A2A client route config entries require name and url.")
    spec = f"{name.strip()}={url.strip()}"
    for key in ("skills", "tags"):
        value = entry.get(key)
        if value is None:
            continue
        if isinstance(value, str):
            items = _values(value)
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            items = tuple(v.strip() for v in value if v.strip())
        else:
            raise RouteError(f"A2A client route {key} must be a string or list.")
        spec += f";{key}={','.join(items)}"
    return spec


def routes_from_config(value: Any) -> list[Route]:
    """The ``routes:`` (or ``route:``) value of a client config: one spec string or a list of specs/mappings."""
    if value is None:
        return []
    entries = [value] if isinstance(value, str | dict) else value
    if not isinstance(entries, list):
        raise RouteError("A2A client routes config entries must be strings or mappings.")
    return [parse_route(_entry_spec(e)) for e in entries]


def route_dict(route: Route) -> dict[str, Any]:
    return {"name": route.name, "url": route.url, "skills": list(route.skills), "tags": list(route.tags)}


def save_snapshot(directory: str | Path, routes: Iterable[Route]) -> Path:
    """Write ``<directory>/routes.json`` atomically, owner-only; return its path."""
    folder = private_dir(Path(directory).expanduser())
    path = folder / SNAPSHOT_FILE
    body = json.dumps({"routes": [route_dict(r) for r in routes]}, indent=2, sort_keys=True, ensure_ascii=False)
    atomic_write(path, body.encode("utf-8") + b"\n")
    return path


def load_snapshot(directory: str | Path) -> list[Route]:
    """The routes of a snapshot written by :func:`save_snapshot` (``[]`` when there is none)."""
    path = Path(directory).expanduser() / SNAPSHOT_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise RouteError(f"Route snapshot {SNAPSHOT_FILE} cannot be read: {type(exc).__name__}") from None
    if not isinstance(data, dict) or not isinstance(data.get("routes"), list):
        raise RouteError(f"Route snapshot {SNAPSHOT_FILE} must hold a routes list.")
    return routes_from_config(data["routes"])


def select(router: RouterSpec, routes: Sequence[Route], query: RouteQuery) -> tuple[Route, list[RouteCandidate]]:
    """Rank ``routes`` with ``router``; the winner and every candidate (best first)."""
    if not routes:
        raise RouteError("At least one --route is required.")
    candidates = router.rank(list(routes), query)
    if not candidates:
        raise RouteError(f"No A2A route matched. Known routes: {', '.join(r.name for r in routes)}")
    return candidates[0].route, candidates
