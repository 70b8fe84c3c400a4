"""Routing for ``iac-code a2a-client``: route specs, the default router's scores and tie-break, calls by route."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from iac_code_a2a_client.default_router import rank
from iac_code_a2a_client.routing import RouteError, parse_route, routes_from_config

from iac_code.base.records import Route, RouteQuery
from iac_code.testing import start_server
from tests.client_support import run_client

ROUTES = ["ros=http://ros.example/;skills=iac_generation,iac_review;tags=ros,vpc",
          "tf=http://tf.example/;skills=terraform_ros_conversion;tags=terraform,hcl",
          "cn=http://cn.example/;tags=网络,中国"]


def _preview(*extra: str) -> list[str]:
    args = ["route-preview", "-o", "json"]
    for spec in ROUTES:
        args += ["--route", spec]
    return [*args, *extra]


async def test_preview_explains_the_winner(tmp_path: Path) -> None:
    by_name = await run_client(*_preview("--name", "tf"), cwd=tmp_path)
    assert by_name.code == 0 and by_name.json()["route"]["name"] == "tf"
    by_skill = (await run_client(*_preview("--skill", "iac_review"), cwd=tmp_path)).json()
    assert by_skill["route"]["name"] == "ros" and by_skill["candidates"][0]["score"] == 10
    by_prompt = (await run_client(*_preview("--prompt", "Convert this Terraform HCL, please."), cwd=tmp_path)).json()
    assert by_prompt["route"]["name"] == "tf"
    assert by_prompt["candidates"][0]["reasons"] == ["tag 'terraform' (+2)", "tag 'hcl' (+2)"]
    chinese = (await run_client(*_preview("--prompt", "帮我创建一个专有网络"), cwd=tmp_path)).json()
    assert chinese["route"]["name"] == "cn"  # a CJK tag matches inside the sentence
    text = await run_client("route-preview", *sum((["--route", r] for r in ROUTES), []), "--prompt", "vpc on ros",
                            cwd=tmp_path)
    assert text.code == 0 and "Winner: ros (http://ros.example/)" in text.out
    assert "→" in text.out and "tag 'vpc' (+2)" in text.out


async def test_preview_errors(tmp_path: Path) -> None:
    unknown = await run_client(*_preview("--name", "nope"), cwd=tmp_path)
    assert unknown.code == 10 and "Unknown A2A route 'nope'. Known routes: ros, tf, cn" in unknown.err
    nothing = await run_client(*_preview("--prompt", "bake a cake"), cwd=tmp_path)
    assert nothing.code == 10 and "No A2A route matched. Known routes: ros, tf, cn" in nothing.err
    none = await run_client("route-preview", cwd=tmp_path)
    assert none.code == 2 and "At least one --route is required." in none.err
    bad = await run_client("route-preview", "--route", "no-url-here", cwd=tmp_path)
    assert bad.code == 10 and "A2A route must start with name=url." in bad.err
    segment = await run_client("route-preview", "--route", "a=http://x;colour=red", cwd=tmp_path)
    assert "Unknown A2A route segment 'colour'. Expected skills or tags." in segment.err
    save = await run_client("route-preview", "--route", "a=http://x", "--save-routes", cwd=tmp_path)
    assert save.code == 2 and "--route-state-dir is required with --save-routes." in save.err


async def test_save_routes_writes_an_owner_only_snapshot(tmp_path: Path) -> None:
    saved = await run_client(*_preview("--prompt", "vpc", "--save-routes", "--route-state-dir",
                                       str(tmp_path / "state")), cwd=tmp_path)
    assert saved.code == 0
    snapshot = tmp_path / "state" / "routes.json"
    assert stat.S_IMODE(snapshot.stat().st_mode) == 0o600
    data = json.loads(snapshot.read_text())
    assert [r["name"] for r in data["routes"]] == ["ros", "tf", "cn"]
    assert data["routes"][2]["tags"] == ["网络", "中国"]


def test_ties_break_by_route_order() -> None:
    routes = [Route("first", "http://1", tags=("vpc",)), Route("second", "http://2", tags=("vpc",))]
    ranked = rank(routes, RouteQuery(prompt="a vpc"))
    assert [c.route.name for c in ranked] == ["first", "second"]
    assert ranked[0].reasons[-1] == "tie broken by route order"
    assert [c.route.name for c in rank(routes[::-1], RouteQuery(prompt="a vpc"))] == ["second", "first"]


def test_scores_name_tags_and_skills() -> None:
    routes = [Route("review", "http://r", skills=("iac_review",), tags=("security",)),
              Route("gen", "http://g", skills=("iac_generation",), tags=("vpc", "ecs"))]
    ranked = rank(routes, RouteQuery(prompt="review the security of my vpc"))
    assert [(c.route.name, c.score) for c in ranked] == [("review", 5), ("gen", 2)]  # name 3 + tag 2; tag 2
    skill_words = rank(routes, RouteQuery(prompt="iac generation for ecs please"))
    assert skill_words[0].route.name == "gen" and skill_words[0].score == 3  # skill by its words 1 + tag 2
    assert rank([routes[0]], RouteQuery(prompt="unrelated"))[0].reasons == ("only route",)
    assert rank(routes, RouteQuery(prompt="unrelated")) == []
    shared = rank(routes, RouteQuery(skill="nobody-has-it", prompt="ecs"))
    assert shared[0].route.name == "gen"  # no route offers the skill: the prompt decides


def test_route_specs_and_config_entries() -> None:
    legacy = parse_route("template=http://h/rpc;iac_generation;ros,vpc")
    assert (legacy.skills, legacy.tags) == (("iac_generation",), ("ros", "vpc"))
    assert parse_route("a=http://h/?x=1;tags= b , ,c").tags == ("b", "c")
    entries = routes_from_config([{"name": "a", "url": "http://a", "skills": ["s"], "tags": "t1,t2"}, "b=http://b"])
    assert [(r.name, r.skills, r.tags) for r in entries] == [("a", ("s",), ("t1", "t2")), ("b", (), ())]
    with pytest.raises(RouteError, match="require name and url"):
        routes_from_config([{"name": "a"}])
    with pytest.raises(RouteError, match="must be a string or list"):
        routes_from_config([{"name": "a", "url": "http://a", "tags": 3}])
    with pytest.raises(RouteError, match="must be strings or mappings"):
        routes_from_config([3])


async def test_call_by_route_name_config_routes_and_the_snapshot(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    async with start_server() as server:
        routes = ["--route", "down=http://127.0.0.1:9/;tags=never", "--route", f"iac={server.url};tags=vpc,ros"]
        named = await run_client("call", *routes, "--route-name", "iac", "-p", "hello", cwd=tmp_path)
        assert named.code == 0 and "offline engine" in named.out, named.err
        by_tag = await run_client("call", *routes, "-p", "what is a vpc?", cwd=tmp_path)  # a question: no pause
        assert by_tag.code == 0, by_tag.err
        config = tmp_path / "a2a-client.yml"
        config.write_text(f"routes:\n  - name: iac\n    url: {server.url}\n    tags: [ros]\n  - down=http://127.0.0.1:9/\n")
        from_config = await run_client("--config", str(config), "call", "--route-name", "iac", "-p", "hi",
                                       cwd=tmp_path)
        assert from_config.code == 0, from_config.err
        state = tmp_path / "state"
        await run_client("route-preview", "--route", f"iac={server.url};tags=ros", "--route-state-dir", str(state),
                         cwd=tmp_path)
        from_snapshot = await run_client("call", "--route-state-dir", str(state), "-p", "ros please", cwd=tmp_path)
        assert from_snapshot.code == 0, from_snapshot.err
        missing = await run_client("call", "-p", "hi", cwd=tmp_path)
        assert missing.code == 2 and "url is required. Provide --url or url in --config" in missing.err
        unmatched = await run_client("call", *routes, "-p", "bake a cake", cwd=tmp_path)
        assert unmatched.code == 10 and "No A2A route matched. Known routes: down, iac" in unmatched.err
