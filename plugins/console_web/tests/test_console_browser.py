"""The console in a real browser: Playwright for Python driving Debian's Chromium (``/usr/bin/chromium``)
against a real server on 127.0.0.1 with the default offline runtime.

Every test records each request the page makes and checks it went to the server's own host and port,
and saves a screenshot in its output folder. A missing browser fails the run with a clear message, never a
skip (``.ci/run`` installs ``chromium`` with apt-get; by hand: ``apt-get install chromium``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from iac_code.api import Thinking
from iac_code.testing import A2A_HEADERS, GatedRuntimePlugin, RunningServer, ScriptedRuntime, start_server

CHROMIUM = "/usr/bin/chromium"
VPC_PROMPT = "Create a VPC with two vSwitches."
WAIT_MS = 30_000

if not (os.path.exists(CHROMIUM) and shutil.which("chromium")):
    raise RuntimeError(f"{CHROMIUM} is missing: install it with `apt-get install chromium` (.ci/run does)")

from playwright.async_api import Page, async_playwright  # noqa: E402  (after the browser check)


@dataclass
class Console:
    """A running server, a browser page on it, and every URL the page requested."""

    server: RunningServer
    page: Page
    workspace: Path
    out: Path
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.server.url + "console"

    async def shot(self, name: str) -> Path:
        path = self.out / f"{name}.png"
        await self.page.screenshot(path=str(path), full_page=True)
        return path

    async def start_turn(self, prompt: str = VPC_PROMPT) -> str:
        await self.page.fill("#prompt", prompt)
        await self.page.click("#send")
        await self.page.wait_for_selector("#task-id", timeout=WAIT_MS)
        return (await self.page.text_content("#task-id")) or ""

    async def rpc(self, method: str, params: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
        async with aiohttp.ClientSession() as session:
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            async with session.post(self.server.url, json=body, headers={**A2A_HEADERS, **(headers or {})}) as r:
                return (await r.json())["result"]


@pytest.fixture
def open_console(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    monkeypatch.chdir(workspace)  # the server's default workspace: the template lands here

    @asynccontextmanager
    async def run(settings: dict[str, Any] | None = None, plugins: dict[str, object] | None = None,
                  ) -> AsyncIterator[Console]:
        async with start_server(settings or {}, extra_plugins=plugins) as server, async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            try:
                context = await browser.new_context(viewport={"width": 1280, "height": 900})
                page = await context.new_page()
                console = Console(server, page, workspace, tmp_path)
                page.on("request", lambda request: console.requests.append(request.url))
                page.on("request", lambda request: console.methods.append(method_of(request.post_data)))
                page.on("pageerror", lambda error: console.errors.append(str(error)))
                yield console
                origin = urlsplit(server.url)
                for url in console.requests:
                    parts = urlsplit(url)
                    assert parts.scheme in ("http", "blob") or url.startswith("data:"), url
                    if parts.scheme == "http":
                        assert (parts.hostname, parts.port) == (origin.hostname, origin.port), url
                assert console.requests, "the page made no request"
                assert console.errors == []
            finally:
                await browser.close()

    return run


def method_of(body: str | None) -> str:
    """The JSON-RPC method of a request body ('' for none)."""
    try:
        return str(json.loads(body or "{}").get("method", ""))
    except ValueError:
        return ""


async def until(check: Callable[[], Awaitable[bool]], timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_sign_in_refuses_a_wrong_token_and_keeps_the_credential_out_of_urls(open_console: Any) -> None:
    async with open_console({"token": "console-secret-token"}) as console:
        page = console.page
        await page.goto(console.url)
        await page.wait_for_selector("#sign-in", timeout=WAIT_MS)
        await page.fill("#token", "wrong-token")
        await page.click("#sign-in-submit")
        await page.wait_for_selector("#sign-in-error:has-text('refused')", timeout=WAIT_MS)
        assert await page.evaluate("() => sessionStorage.length") == 0
        assert await page.query_selector("#task-rows") is None
        await console.shot("sign-in-refused")

        await page.fill("#token", "console-secret-token")
        sent: list[str | None] = []
        page.on("request", lambda r: sent.append(r.headers.get("authorization")) if r.method == "POST" else None)
        await page.click("#sign-in-submit")
        await page.wait_for_selector("#task-rows", state="attached", timeout=WAIT_MS)
        assert "Bearer console-secret-token" in sent
        assert await page.evaluate("() => sessionStorage.length") == 1
        await console.start_turn()
        await page.wait_for_selector(".entry-question", timeout=WAIT_MS)
        assert all("console-secret-token" not in url for url in console.requests)
        await console.shot("signed-in")


async def test_a_turn_streams_then_the_permission_answer_yields_the_template(open_console: Any) -> None:
    async with open_console() as console:
        page = console.page
        await page.goto(console.url)
        assert await page.query_selector("#sign-in") is None  # auth off: the console opens directly
        task_id = await console.start_turn()
        assert await page.get_attribute("#main", "data-live") in ("stream", "ended")  # the page's own stream
        assert "SubscribeToTask" not in console.methods
        await page.wait_for_selector(".entry-tool[data-tool='generate_template'][data-status='completed']",
                                     timeout=WAIT_MS)
        await page.wait_for_selector(".entry-agent:has-text('Here is the template')", timeout=WAIT_MS)
        question = await page.wait_for_selector(".entry-question", timeout=WAIT_MS)
        assert "template.ros.yaml" in (await question.text_content() or "")
        assert not (console.workspace / "template.ros.yaml").exists()
        labels = await page.eval_on_selector_all(".entry-question button", "bs => bs.map(b => b.textContent)")
        assert labels == ["Allow once", "Deny"]

        await page.click(".entry-question button[data-option='allow_once']")
        artifact = await page.wait_for_selector(".artifact[data-name='template.ros.yaml']", timeout=WAIT_MS)
        assert await artifact.query_selector(".tok-key") is not None  # highlighted
        assert "ALIYUN::ECS::VPC" in (await artifact.text_content() or "")
        await page.wait_for_selector(".entry-ack:has-text('allow_once')", timeout=WAIT_MS)
        await page.wait_for_selector(".entry-usage", timeout=WAIT_MS)
        assert (console.workspace / "template.ros.yaml").exists()
        await console.shot("console-task")

        await page.goto(console.url + "#/")
        row = await page.wait_for_selector(f"#task-rows tr[data-task='{task_id}']", timeout=WAIT_MS)
        assert "Here is the template" in (await row.text_content() or "")
        await console.shot("console-tasks")


async def test_a_reload_mid_turn_resumes_the_timeline(open_console: Any) -> None:
    async with open_console() as console:
        page = console.page
        await page.goto(console.url)
        task_id = await console.start_turn()
        await page.wait_for_selector(".entry-question", timeout=WAIT_MS)
        await page.reload()
        await page.wait_for_selector(".entry-question button[data-option='allow_once']:not([disabled])",
                                     timeout=WAIT_MS)
        assert await page.text_content("#task-id") == task_id
        assert "SubscribeToTask" in console.methods  # paused for input: the snapshot, then the stream closes
        await page.wait_for_selector(".entry-user:has-text('Create a VPC')", timeout=WAIT_MS)
        assert await page.locator(".entry-question").count() == 1
        await page.click(".entry-question button[data-option='allow_once']")
        await page.wait_for_selector(".artifact[data-name='template.ros.yaml']", timeout=WAIT_MS)
        await page.wait_for_selector(".entry-agent:has-text('Saved template.ros.yaml')", timeout=WAIT_MS)
        await console.shot("resumed")


async def test_a_reload_while_working_follows_the_live_stream(open_console: Any) -> None:
    gated = GatedRuntimePlugin()
    async with open_console({"agent-runtime": "gated"}, {"gated": gated}) as console:
        page = console.page
        await page.goto(console.url)
        task_id = await console.start_turn("Plan a network.")
        await page.wait_for_selector(".entry-agent:has-text('working on it')", timeout=WAIT_MS)
        await page.wait_for_selector("#task-state:has-text('working')", timeout=WAIT_MS)
        await page.reload()
        await page.wait_for_selector(".entry-agent:has-text('working on it')", timeout=WAIT_MS)
        await until(lambda: page.get_attribute("#main", "data-live"), timeout=30)
        assert await page.get_attribute("#main", "data-live") == "subscribed"
        assert await page.text_content("#task-id") == task_id
        await console.shot("reload-working")
        gated.runtime.release.set()  # the turn goes on: its end arrives on the resumed stream
        await page.wait_for_selector(".entry-agent:has-text('done')", timeout=WAIT_MS)
        await page.wait_for_selector("#task-state:not(:has-text('working'))", timeout=WAIT_MS)


async def test_cancel_ends_the_task(open_console: Any) -> None:
    async with open_console() as console:
        page = console.page
        await page.goto(console.url)
        task_id = await console.start_turn()
        await page.wait_for_selector(".entry-question", timeout=WAIT_MS)
        await page.click("#cancel")
        await page.wait_for_selector("#task-state:has-text('canceled')", timeout=WAIT_MS)
        assert await page.is_disabled(".entry-question button[data-option='allow_once']")
        task = await console.rpc("GetTask", {"id": task_id})
        assert task["status"]["state"] == "TASK_STATE_CANCELED"
        assert not (console.workspace / "template.ros.yaml").exists()
        await console.shot("canceled")


async def test_injected_markup_stays_inert(open_console: Any) -> None:
    payload = ('<img src=x onerror="window.__xss=1"> <script>window.__xss=2</script> '
               '<svg onload="window.__xss=3"></svg> ' + VPC_PROMPT)
    async with open_console() as console:
        page = console.page
        await page.goto(console.url)
        await console.start_turn(payload)
        user = await page.wait_for_selector(".entry-user", timeout=WAIT_MS)
        assert (await user.text_content() or "").endswith(payload)
        await page.wait_for_selector(".entry-question", timeout=WAIT_MS)
        await page.goto(console.url + "#/")
        await page.wait_for_selector("#task-rows tr", timeout=WAIT_MS)
        await page.reload()
        await page.wait_for_selector("#task-rows tr", timeout=WAIT_MS)
        assert await page.evaluate("() => window.__xss") is None
        assert await page.locator("main img, main script, main svg").count() == 0
        assert all(not url.endswith("/x") for url in console.requests)  # the <img src=x> never loaded
        await console.shot("xss-inert")


async def test_the_metrics_chart_is_drawn(open_console: Any) -> None:
    async with open_console() as console:
        page = console.page
        await page.goto(console.url)
        await console.start_turn()
        await page.wait_for_selector(".entry-question", timeout=WAIT_MS)
        await page.goto(console.url + "#/metrics")
        await page.wait_for_function("() => Number(document.querySelector('#metrics-chart')?.dataset.points) >= 3",
                                     timeout=WAIT_MS)
        coloured = await page.evaluate("""() => {
            const c = document.querySelector('#metrics-chart');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 0; i < d.length; i += 4) {  // pixels of a series' colour (not the white, grey frame)
                if (Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) > 80) n++;
            }
            return n;
        }""")
        assert coloured > 50
        assert await page.text_content("#metrics-error") == ""
        await console.shot("metrics")


async def test_a_pipeline_candidate_is_picked_and_confirmed(open_console: Any) -> None:
    async with open_console({"pipeline-selling-review-step": True}) as console:
        page = console.page
        await page.goto(console.url)
        await page.fill("#prompt", "Deploy a web application with a MySQL database on Alibaba Cloud.")
        await page.check("#pipeline-mode")
        await page.click("#send")
        await page.wait_for_selector(".candidate[data-candidate='2'] button.choose", timeout=WAIT_MS)
        assert await page.locator(".candidate").count() >= 2
        card = page.locator(".candidate[data-candidate='2']")
        assert await card.locator("svg.diagram .node").count() >= 3  # the Mermaid flowchart, drawn
        assert await card.locator("svg.diagram .group").count() == 2  # its two zones
        assert "CNY" in (await card.locator(".cost-table .total").text_content() or "")
        assert "price" in (await card.locator(".price-source").text_content() or "").lower()
        await page.wait_for_selector("#pipeline-steps li[data-step='evaluate_candidates'][data-status='completed']",
                                     timeout=WAIT_MS)
        assert await page.is_disabled("#confirm-candidate")
        reviews = page.locator(".entry-findings")  # the reviewing sub-step of each candidate
        assert await reviews.count() >= 2
        assert "offline reviewer" in (await reviews.first.text_content() or "")
        severities = await page.locator(".entry-findings .severity").all_text_contents()
        assert all(s in ("high", "medium", "low", "info") for s in severities)

        await page.reload()  # the cards come back from the task and the pipeline state endpoint
        await page.wait_for_selector(".candidate[data-candidate='2'] button.choose", timeout=WAIT_MS)
        await page.wait_for_selector(".candidate[data-candidate='2'] .price-source:has-text('price')", timeout=WAIT_MS)
        await page.click(".candidate[data-candidate='2'] button.choose")
        assert await page.get_attribute(".candidate[data-candidate='2']", "data-chosen") == "true"
        await console.shot("pipeline-cards")
        await page.click("#confirm-candidate")
        await page.wait_for_selector(".entry-pipeline-event:has-text('handoff ready')", timeout=WAIT_MS)
        await page.wait_for_selector(".entry-agent:has-text('High availability across two zones')", timeout=WAIT_MS)
        await page.wait_for_selector("#pipeline-steps li[data-step='deploying'][data-status='completed']",
                                     timeout=WAIT_MS)
        await console.shot("pipeline-confirmed")


async def test_basic_and_api_key_sign_in(open_console: Any) -> None:
    settings = {"basic-username": "ops", "basic-password": "pässword", "api-key": "key-123",
                "api-key-header": "X-Console-Key"}
    async with open_console(settings) as console:
        page = console.page
        await page.goto(console.url)
        await page.wait_for_selector("#sign-in", timeout=WAIT_MS)
        assert await page.input_value("#scheme") == "basic"  # from the server's challenges
        await page.fill("#username", "ops")
        await page.fill("#password", "wrong")
        await page.click("#sign-in-submit")
        await page.wait_for_selector("#sign-in-error:has-text('refused')", timeout=WAIT_MS)
        await page.fill("#password", "pässword")
        await page.click("#sign-in-submit")
        await page.wait_for_selector("#composer", timeout=WAIT_MS)

        await page.click("#sign-out")
        await page.wait_for_selector("#sign-in", timeout=WAIT_MS)
        await page.select_option("#scheme", "apikey")
        assert await page.input_value("#api-key-header") == "X-Console-Key"
        await page.fill("#token", "key-123")
        sent: list[str | None] = []
        page.on("request", lambda r: sent.append(r.headers.get("x-console-key")) if r.method == "POST" else None)
        await page.click("#sign-in-submit")
        await page.wait_for_selector("#composer", timeout=WAIT_MS)
        assert "key-123" in sent
        assert all("key-123" not in url and "pässword" not in url for url in console.requests)


async def test_push_configurations_are_listed_and_deleted(open_console: Any) -> None:
    async with open_console({"push-notifications": True}) as console:
        page = console.page
        await page.goto(console.url)
        task_id = await console.start_turn()
        await page.wait_for_selector("#push-status:has-text('None')", timeout=WAIT_MS)
        hook = {"taskId": task_id, "id": "hook-1", "url": "https://8.8.8.8/a2a-hook", "token": "push-secret"}
        await console.rpc("CreateTaskPushNotificationConfig", hook)
        await page.reload()
        row = await page.wait_for_selector("#push-configs li[data-push='hook-1']", timeout=WAIT_MS)
        text = await row.text_content() or ""
        assert "https://8.8.8.8/a2a-hook" in text and "token set" in text and "push-secret" not in text
        await page.click("#push-configs li[data-push='hook-1'] button.push-delete")
        await page.wait_for_selector("#push-status:has-text('None')", timeout=WAIT_MS)
        assert (await console.rpc("ListTaskPushNotificationConfigs", {"taskId": task_id})).get("configs", []) == []


async def test_push_off_says_so(open_console: Any) -> None:
    async with open_console() as console:
        page = console.page
        await page.goto(console.url)
        await console.start_turn()
        await page.wait_for_selector("#push-status:has-text('off on this server')", timeout=WAIT_MS)


async def test_thinking_is_shown_where_the_server_exposes_it(open_console: Any) -> None:
    runtime = ScriptedRuntime((Thinking("Weighing <b>two</b> zones"), Thinking(" against one."), "Two zones it is."))
    async with open_console({**runtime.settings, "thinking-exposure": "raw-thinking"}, {"scripted": runtime}) as console:
        page = console.page
        await page.goto(console.url)
        await console.start_turn("Which layout?")
        thinking = await page.wait_for_selector(".entry-thinking", timeout=WAIT_MS)
        await page.wait_for_selector(".entry-agent:has-text('Two zones it is.')", timeout=WAIT_MS)
        assert "Weighing <b>two</b> zones against one." in (await thinking.text_content() or "")
        assert await page.locator(".entry-thinking b").count() == 0
