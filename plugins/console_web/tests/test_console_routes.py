"""The console's routes on a real server: the page and its assets ship in the package, carry a strict
CSP and ``no-store``, name nothing outside the server, and follow the server's authentication (the
shell is public and holds no data; the A2A API it calls refuses a missing or wrong credential)."""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from importlib import resources
from pathlib import Path

import aiohttp

from iac_code.testing import A2A_HEADERS, start_server

STATIC = Path(str(resources.files("iac_code_console_web").joinpath("static")))
PLUGIN_ROOT = Path(__file__).resolve().parent.parent


def shipped() -> list[str]:
    return sorted(p.name for p in STATIC.iterdir() if p.is_file())


async def test_page_and_assets_have_strict_headers() -> None:
    async with start_server({}) as server, aiohttp.ClientSession() as session:
        for path in ["console", *[f"console/static/{name}" for name in shipped() if name != "index.html"]]:
            async with session.get(server.url + path) as response:
                assert response.status == 200, path
                csp = response.headers["Content-Security-Policy"]
                assert "default-src 'self'" in csp and "script-src 'self'" in csp and "style-src 'self'" in csp
                assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
                assert response.headers["Cache-Control"] == "no-store"
                assert response.headers["X-Content-Type-Options"] == "nosniff"
        async with session.get(server.url + "console/static/app.js") as response:
            assert response.headers["Content-Type"].startswith("text/javascript")
        async with session.get(server.url + "console/static/..%2Fplugin.py") as response:
            assert response.status == 404
        async with session.get(server.url + "console/static/nothing.js") as response:
            assert response.status == 404


async def test_shell_is_public_but_the_api_behind_it_is_not() -> None:
    async with start_server({"token": "console-secret"}) as server, aiohttp.ClientSession() as session:
        async with session.get(server.url + "console") as response:
            assert response.status == 200  # the sign-in page: the same bytes for everyone, no data
            assert b"console-secret" not in await response.read()
        body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        async with session.post(server.url, json=body, headers=A2A_HEADERS) as response:
            assert response.status == 401
            assert "Bearer" in response.headers["WWW-Authenticate"]
        wrong = {**A2A_HEADERS, "Authorization": "Bearer nope"}
        async with session.post(server.url, json=body, headers=wrong) as response:
            assert response.status == 401
        right = {**A2A_HEADERS, "Authorization": "Bearer console-secret"}
        async with session.post(server.url, json=body, headers=right) as response:
            assert response.status == 200
        async with session.get(server.url + "console/static/unknown.js") as response:
            assert response.status == 401  # not a shipped file: not public either


def test_html_has_no_inline_script_or_style() -> None:
    html = (STATIC / "index.html").read_text()
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert 'src="/console/static/' in tag
    assert "<style" not in html and " style=" not in html and "javascript:" not in html
    assert not re.search(r"\son[a-z]+=", html)


def test_scripts_never_parse_data_as_html_nor_reach_elsewhere() -> None:
    for path in STATIC.iterdir():
        if path.suffix not in (".js", ".css", ".html"):
            continue
        text = path.read_text()
        for forbidden in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert forbidden not in text, (path.name, forbidden)
        text = text.replace('"http://www.w3.org/2000/svg"', "")  # the SVG namespace name, never fetched
        urls = re.findall(r"(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}", text)
        assert urls == [], (path.name, urls)


def test_wheel_ships_exactly_the_sources(tmp_path: Path) -> None:
    """No build step: the wheel's static files are the repository's files, byte for byte."""
    uv = shutil.which("uv")
    assert uv is not None, "uv builds the wheel"
    subprocess.run([uv, "build", "--wheel", "-q", "-o", str(tmp_path), str(PLUGIN_ROOT)], check=True,
                   capture_output=True, timeout=110)
    wheels = list(tmp_path.glob("iac_code_console_web-*.whl"))
    [wheel] = wheels
    with zipfile.ZipFile(wheel) as archive:
        packed = {Path(n).name: archive.read(n) for n in archive.namelist()
                  if n.startswith("iac_code_console_web/static/") and not n.endswith("/")}
    assert sorted(packed) == shipped()
    for name, data in packed.items():
        assert data == (STATIC / name).read_bytes(), name
