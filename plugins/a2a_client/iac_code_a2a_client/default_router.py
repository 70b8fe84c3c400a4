"""The ``default`` router: explicit name, then skill, then a scored prompt match.

Selection, in order (documented in docs/client.md):

1. ``name`` given: the route of exactly that name (case-sensitive) or an error listing the
   known routes.
2. ``skill`` given: the routes offering that skill (case-insensitive) are the candidates;
   if none offers it, every route is.
3. Each candidate is scored against the prompt's words (lower-cased; Latin words split on
   anything but letters, digits, ``_``, ``-`` and ``+``; a tag or name containing CJK
   characters matches as a substring): the route's name +3, each distinct tag +2, each
   distinct skill +1 (a skill matches as a whole word or when all its ``_``/``-`` parts do).
   A skill match from step 2 adds +10.
4. Candidates scoring above 0 win by score, ties by route order (the first configured
   route wins). With no candidate above 0 a single configured route is chosen (score 0,
   "only route"); otherwise there is no match.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from iac_code.api import Route, RouteCandidate, RouteQuery, RouterSpec

_WORD = re.compile(r"[0-9a-z_+\-]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")

NAME_SCORE, TAG_SCORE, SKILL_SCORE, SKILL_QUERY_SCORE = 3, 2, 1, 10


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _matches(term: str, words: list[str], text: str) -> bool:
    term = term.strip().lower()
    if not term:
        return False
    if _CJK.search(term):
        return term in text
    parts = _words(term)
    if not parts:
        return False
    n = len(parts)
    return any(words[i:i + n] == parts for i in range(len(words) - n + 1))


def _skill_matches(skill: str, words: list[str], text: str) -> bool:
    if _matches(skill, words, text):
        return True
    parts = [p for p in re.split(r"[_\-\s]+", skill.lower()) if p]
    return len(parts) > 1 and all(p in words for p in parts)


def _score(route: Route, words: list[str], text: str) -> tuple[int, list[str]]:
    score, reasons = 0, []
    if _matches(route.name, words, text):
        score += NAME_SCORE
        reasons.append(f"name '{route.name}' in prompt (+{NAME_SCORE})")
    for tag in dict.fromkeys(t.lower() for t in route.tags):
        if _matches(tag, words, text):
            score += TAG_SCORE
            reasons.append(f"tag '{tag}' (+{TAG_SCORE})")
    for skill in dict.fromkeys(s.lower() for s in route.skills):
        if _skill_matches(skill, words, text):
            score += SKILL_SCORE
            reasons.append(f"skill '{skill}' in prompt (+{SKILL_SCORE})")
    return score, reasons


def rank(routes: Sequence[Route], query: RouteQuery) -> list[RouteCandidate]:
    """Candidates best first (see the module docstring); ``ValueError`` for an unknown name."""
    known = ", ".join(r.name for r in routes)
    if query.name:
        for route in routes:
            if route.name == query.name:
                return [RouteCandidate(route, 100, ("explicit name",))]
        raise ValueError(f"Unknown A2A route '{query.name}'. Known routes: {known}")
    pool = list(routes)
    skilled: set[int] = set()
    if query.skill:
        wanted = query.skill.strip().lower()
        offering = [r for r in routes if wanted in (s.lower() for s in r.skills)]
        if offering:
            pool = offering
            skilled = {id(r) for r in offering}
    text = query.prompt.lower()
    words = _words(text)
    scored: list[tuple[int, int, RouteCandidate]] = []
    for order, route in enumerate(pool):
        score, reasons = _score(route, words, text) if text else (0, [])
        if id(route) in skilled:
            score += SKILL_QUERY_SCORE
            reasons.insert(0, f"offers skill '{query.skill.strip()}' (+{SKILL_QUERY_SCORE})")
        if score > 0:
            scored.append((-score, order, RouteCandidate(route, score, tuple(reasons))))
    scored.sort(key=lambda item: (item[0], item[1]))
    candidates = [c for _, _, c in scored]
    if len(candidates) > 1 and candidates[0].score == candidates[1].score:
        first = candidates[0]
        candidates[0] = RouteCandidate(first.route, first.score, (*first.reasons, "tie broken by route order"))
    if not candidates and len(routes) == 1:
        return [RouteCandidate(routes[0], 0, ("only route",))]
    return candidates



DEFAULT_ROUTER = RouterSpec(name="default", rank=rank,
                            description="Explicit name, then skill, then prompt words scored against names, tags and skills.")
