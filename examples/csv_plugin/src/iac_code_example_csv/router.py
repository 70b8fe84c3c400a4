"""The ``csv`` router: prompts about CSV data go to the routes tagged ``csv``."""

from __future__ import annotations

import re
from collections.abc import Sequence

from iac_code.api import Route, RouteCandidate, RouteQuery

TAG = "csv"
SCORE = 10
_CSV_WORDS = re.compile(r"\b(csv|spreadsheet|table)s?\b", re.IGNORECASE)


def rank(routes: Sequence[Route], query: RouteQuery) -> list[RouteCandidate]:
    """Every route, best first: an explicit name wins, then routes tagged ``csv`` for a prompt about CSV.

    Routes that score the same keep their configured order, so without a match the first
    configured route wins. An unknown explicit name is a ``ValueError`` the client shows.
    """
    if query.name:
        for route in routes:
            if route.name == query.name:
                return [RouteCandidate(route, 100, ("explicit name",))]
        raise ValueError(f"Unknown route {query.name!r}. Known routes: {', '.join(r.name for r in routes)}")
    about_csv = bool(_CSV_WORDS.search(query.prompt))
    candidates = []
    for route in routes:
        if about_csv and TAG in (tag.lower() for tag in route.tags):
            candidates.append(RouteCandidate(route, SCORE, (f"tagged {TAG}, prompt is about CSV (+{SCORE})",)))
        else:
            candidates.append(RouteCandidate(route, 0, ("configured order",)))
    return sorted(candidates, key=lambda candidate: -candidate.score)
