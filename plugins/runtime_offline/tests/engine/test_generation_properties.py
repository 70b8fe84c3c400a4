"""Property-based test of request reading: thousands of requests composed from a grammar, checked against the spec
each must produce by construction (``request_grammar``). A fixed seed keeps every CI run the same."""

from __future__ import annotations

from hypothesis import HealthCheck, given, seed, settings

from .request_grammar import Request, check, requests

EXAMPLES = 5_000


@seed(30)
@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_requests_from_the_grammar_produce_their_spec(request: Request) -> None:
    check(request)
