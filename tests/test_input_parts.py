"""Input-part decoding through the real HTTP server (spec input-and-permissions.md §1).

Every test posts JSON-RPC ``SendMessage`` bodies to a running server whose
agent runtime (``tests.echo_runtime``) echoes the decoded prompt and manifest.
The workspace is ``tmp_path`` (under the system temp dir, an allowed root),
set through ``metadata.iac_code.cwd``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from iac_code.builtin.part_limits import BINARY_FILE_LIMIT, INLINE_BINARY_LIMIT, INLINE_TEXT_LIMIT, TEXT_FILE_LIMIT
from iac_code.testing import A2A_HEADERS, RunningServer, send_message_body, start_server
from tests.echo_runtime import EchoPlugin, split_echo

UNSUPPORTED = "A2A part has unsupported media type."
DATA_TOO_LARGE = "A2A data part content is too large."
JSON_ONLY = "A2A data parts must use application/json media type."
RAW_TOO_LARGE = "A2A raw part content is too large."
RAW_NOT_UTF8 = "A2A raw parts must contain valid UTF-8."
LOCAL_ONLY = "A2A file URL parts must use local file:// URLs."
OUTSIDE = "A2A file URL part is outside the allowed workspace."
NOT_A_FILE = "A2A file URL part must reference an existing file."
FILE_TOO_LARGE = "A2A file URL part content is too large."
FILE_NOT_UTF8 = "A2A file URL parts must contain valid UTF-8."
BIN_RAW_TOO_LARGE = "A2A binary raw part content is too large."
BIN_DATA_NOT_OBJECT = "A2A binary data parts must contain an object."
BIN_DATA_NO_BYTES = "A2A binary data parts must include base64 bytes."
BIN_DATA_BAD_BASE64 = "A2A binary data part bytes must be valid base64."
BIN_DATA_TOO_LARGE = "A2A binary data part content is too large."
BIN_FILE_TOO_LARGE = "A2A binary file URL part content is too large."

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


# --------------------------------------------------------------------------- helpers


@asynccontextmanager
async def echo_server() -> AsyncIterator[tuple[RunningServer, aiohttp.ClientSession]]:
    """A real server on the echo runtime (environment is read at start-up)."""
    async with start_server({"agent-runtime": "echo"}, extra_plugins={"echo": EchoPlugin()}) as server, \
            aiohttp.ClientSession() as http:
        yield server, http


@pytest.fixture
async def echo() -> AsyncIterator[tuple[RunningServer, aiohttp.ClientSession]]:
    async with echo_server() as running:
        yield running


async def rpc(http: aiohttp.ClientSession, server: RunningServer, body: dict[str, Any]) -> dict[str, Any]:
    async with http.post(server.url, json=body, headers=A2A_HEADERS) as r:
        assert r.status == 200
        return await r.json()


async def send(echo: tuple[RunningServer, aiohttp.ClientSession], parts: list[dict[str, Any]],
               cwd: Path) -> dict[str, Any]:
    server, http = echo
    body = send_message_body("", metadata={"iac_code": {"cwd": str(cwd)}})
    body["params"]["message"]["parts"] = parts
    return await rpc(http, server, body)


def accepted(reply: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """(prompt, manifest) the echo runtime saw."""
    assert "error" not in reply, reply.get("error")
    task = reply["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task["status"]
    answer = task["status"]["message"]  # the turn's answer
    assert answer["role"] == "ROLE_AGENT"
    return split_echo(answer["parts"][0]["text"])


def refused(reply: dict[str, Any], message: str, *secrets: str) -> None:
    """An invalid-params error with exactly ``message``, mentioning none of ``secrets``."""
    assert "result" not in reply
    assert reply["error"]["code"] == -32602, reply["error"]
    assert reply["error"]["message"] == message
    dumped = json.dumps(reply)
    for secret in secrets:
        assert secret not in dumped


def b64(content: bytes) -> str:
    return base64.b64encode(content).decode()


def block(filename: str, media_type: str, content: bytes, source: str) -> str:
    return (f"A2A multimodal attachment:\n- filename={filename}\n- mediaType={media_type}\n"
            f"- byteSize={len(content)}\n- sha256={hashlib.sha256(content).hexdigest()}\n- source={source}")


def entry(filename: str, media_type: str, content: bytes, source: str) -> dict[str, Any]:
    return {"filename": filename, "mediaType": media_type, "byteSize": len(content),
            "sha256": hashlib.sha256(content).hexdigest(), "source": source}


def sized_file(path: Path, size: int) -> Path:
    """A sparse file of ``size`` zero bytes (cheap even at 25 MiB)."""
    with path.open("wb") as f:
        f.truncate(size)
    return path


# --------------------------------------------------------------------------- text parts


async def test_text_like_parts_join_in_order(echo: Any, tmp_path: Path) -> None:
    prompt, manifest = accepted(await send(echo, [
        {"text": "hello"},
        {"text": ""},
        {"text": "# Title", "mediaType": "text/markdown"},
        {"text": "a: 1", "mediaType": "Application/YAML; charset=utf-8"},
        {"text": "{\"x\": 1}", "mediaType": "application/json"},
    ], tmp_path))
    assert prompt == 'hello\n# Title\na: 1\n{"x": 1}'
    assert manifest == []


async def test_text_part_with_other_media_type_is_refused(echo: Any, tmp_path: Path) -> None:
    refused(await send(echo, [{"text": "<b>x</b>", "mediaType": "text/html"}], tmp_path), UNSUPPORTED)
    refused(await send(echo, [{"text": "x", "mediaType": "image/png"}], tmp_path), UNSUPPORTED)


async def test_text_mime_type_extras(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("IACCODE_A2A_TEXT_MIME_TYPES", " Text/CSV ; text/x-terraform,, ")
    (tmp_path / "main.tf").write_text('resource "x" "y" {}\n')
    async with echo_server() as echo:
        prompt, _ = accepted(await send(echo, [
            {"text": "a,b", "mediaType": "text/csv"},
            {"raw": b64(b"variable {}"), "mediaType": "text/x-terraform"},
            {"url": (tmp_path / "main.tf").as_uri(), "mediaType": "text/x-terraform"},
        ], tmp_path))
        assert prompt == 'a,b\nvariable {}\nresource "x" "y" {}\n'
        refused(await send(echo, [{"text": "x", "mediaType": "text/html"}], tmp_path), UNSUPPORTED)
        refused(await send(echo, [{"data": {"a": 1}, "mediaType": "text/csv"}], tmp_path), JSON_ONLY)


# --------------------------------------------------------------------------- data parts


async def test_json_data_round_trips_exactly(echo: Any, tmp_path: Path) -> None:
    data = {"n": 12345678901234567890, "a": [1, 2.5, {"deep": [-7, 0, 1.0]}], "s": "é ✓", "b": True, "z": None}
    prompt, manifest = accepted(await send(echo, [{"data": data, "mediaType": "application/json"}], tmp_path))
    assert prompt == '{"a":[1,2.5,{"deep":[-7,0,1.0]}],"b":true,"n":12345678901234567890,"s":"é ✓","z":null}'
    assert json.loads(prompt) == data
    assert manifest == []


async def test_json_data_without_media_type_and_non_object_values(echo: Any, tmp_path: Path) -> None:
    prompt, _ = accepted(await send(echo, [{"data": {"b": 1}}, {"data": [1, 2]}, {"data": 3}], tmp_path))
    assert prompt == '{"b":1}\n[1,2]\n3'


async def test_json_data_size_limit(echo: Any, tmp_path: Path) -> None:
    # '{"k":"' + payload + '"}' is 8 bytes of JSON around the payload.
    at_limit = {"k": "x" * (INLINE_TEXT_LIMIT - 8)}
    prompt, _ = accepted(await send(echo, [{"data": at_limit, "mediaType": "application/json"}], tmp_path))
    assert len(prompt.encode()) == INLINE_TEXT_LIMIT
    over = {"k": "x" * (INLINE_TEXT_LIMIT - 7)}
    refused(await send(echo, [{"data": over, "mediaType": "application/json"}], tmp_path), DATA_TOO_LARGE)


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
async def test_non_finite_json_numbers_are_refused(echo: Any, tmp_path: Path, number: str) -> None:
    """Not JSON (or not representable): refused before any task exists, whichever layer refuses it."""
    server, http = echo
    body = json.dumps(send_message_body("", metadata={"iac_code": {"cwd": str(tmp_path)}}))
    body = body.replace('"parts": [{"text": ""}]', '"parts": [{"data": {"x": NUMBER}, "mediaType": "application/json"}]')
    assert "NUMBER" in body
    async with http.post(server.url, data=body.replace("NUMBER", number).encode(), headers=A2A_HEADERS) as r:
        reply = await r.json()
    assert reply["error"]["code"] in (-32700, -32600, -32602), reply
    listed = await rpc(http, server, {"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}})
    assert listed["result"].get("tasks", []) == []


@pytest.mark.parametrize("media_type", ["text/plain", "text/markdown", "application/x-foo", "video/x-nope"])
async def test_data_part_with_other_media_type_is_refused(echo: Any, tmp_path: Path, media_type: str) -> None:
    refused(await send(echo, [{"data": {"a": 1}, "mediaType": media_type}], tmp_path), JSON_ONLY)


# --------------------------------------------------------------------------- raw text parts


async def test_raw_text_part(echo: Any, tmp_path: Path) -> None:
    prompt, manifest = accepted(await send(echo, [{"raw": b64("héllo\n".encode()), "mediaType": "text/plain"}],
                                           tmp_path))
    assert prompt == "héllo\n"
    assert manifest == []


async def test_raw_text_size_limit_and_utf8(echo: Any, tmp_path: Path) -> None:
    prompt, _ = accepted(await send(echo, [{"raw": b64(b"a" * INLINE_TEXT_LIMIT), "mediaType": "text/plain"}],
                                    tmp_path))
    assert len(prompt) == INLINE_TEXT_LIMIT
    refused(await send(echo, [{"raw": b64(b"a" * (INLINE_TEXT_LIMIT + 1)), "mediaType": "text/plain"}], tmp_path),
            RAW_TOO_LARGE)
    refused(await send(echo, [{"raw": b64(b"ok \xff\xfe"), "mediaType": "application/json"}], tmp_path),
            RAW_NOT_UTF8)


async def test_unclaimed_media_types_are_content_type_errors(echo: Any, tmp_path: Path) -> None:
    """Neither text-like nor multimodal raw/url parts: A2A -32005 (see raw_parts' docstring), no task."""
    server, http = echo
    (tmp_path / "x.foo").write_bytes(b"foo")
    for part in ({"raw": b64(b"foo"), "mediaType": "application/x-foo"},
                 {"url": (tmp_path / "x.foo").as_uri(), "mediaType": "application/x-foo"},
                 {"raw": b64(b"%PDF"), "mediaType": "application/pdf"}):
        reply = await send(echo, [part], tmp_path)
        assert reply["error"]["code"] == -32005, reply
        assert str(tmp_path) not in json.dumps(reply)
    listed = await rpc(http, server, {"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}})
    assert listed["result"].get("tasks", []) == []


# --------------------------------------------------------------------------- file URL text parts


async def test_file_url_text_part(echo: Any, tmp_path: Path) -> None:
    (tmp_path / "sub dir").mkdir()
    target = tmp_path / "sub dir" / "tëmplate.yaml"
    target.write_text("ROSTemplateFormatVersion: '2015-09-01'\n", encoding="utf-8")
    prompt, manifest = accepted(await send(echo, [{"text": "Review:"},
                                                  {"url": target.as_uri(), "mediaType": "text/yaml"}], tmp_path))
    assert prompt == "Review:\nROSTemplateFormatVersion: '2015-09-01'\n"
    assert manifest == []


async def test_file_url_text_size_limit_and_utf8(echo: Any, tmp_path: Path) -> None:
    (tmp_path / "limit.txt").write_bytes(b"a" * TEXT_FILE_LIMIT)
    prompt, _ = accepted(await send(echo, [{"url": (tmp_path / "limit.txt").as_uri(), "mediaType": "text/plain"}],
                                    tmp_path))
    assert len(prompt) == TEXT_FILE_LIMIT
    (tmp_path / "over.txt").write_bytes(b"a" * (TEXT_FILE_LIMIT + 1))
    refused(await send(echo, [{"url": (tmp_path / "over.txt").as_uri(), "mediaType": "text/plain"}], tmp_path),
            FILE_TOO_LARGE, str(tmp_path))
    (tmp_path / "bad.txt").write_bytes(b"\xc3\x28")
    refused(await send(echo, [{"url": (tmp_path / "bad.txt").as_uri(), "mediaType": "text/plain"}], tmp_path),
            FILE_NOT_UTF8, str(tmp_path))


async def test_file_url_must_name_an_existing_regular_file(echo: Any, tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    for name in ("missing.txt", "dir", "fifo"):
        refused(await send(echo, [{"url": (tmp_path / name).as_uri(), "mediaType": "text/plain"}], tmp_path),
                NOT_A_FILE, str(tmp_path))
    refused(await send(echo, [{"url": tmp_path.as_uri() + "/a%00b", "mediaType": "text/plain"}], tmp_path),
            NOT_A_FILE, str(tmp_path))


# --------------------------------------------------------------------------- file URL containment


@pytest.fixture
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A secret file in another temp directory: inside an allowed root, outside the workspace."""
    secret = tmp_path_factory.mktemp("elsewhere") / "secret.txt"
    secret.write_text("top secret\n")
    return secret


def escape_urls(tmp_path: Path, outside: Path) -> dict[str, str]:
    (tmp_path / "to-passwd").symlink_to("/etc/passwd")
    (tmp_path / "to-outside").symlink_to(outside)
    (tmp_path / "linked-dir").symlink_to(outside.parent, target_is_directory=True)
    dotdot = f"{tmp_path.as_uri()}/../{outside.parent.name}/{outside.name}"
    return {
        "dotdot": dotdot,
        "dotdot-encoded": dotdot.replace("/../", "/%2E%2E/"),
        "symlink-to-etc-passwd": (tmp_path / "to-passwd").as_uri(),
        "symlink-to-other-tmp-dir": (tmp_path / "to-outside").as_uri(),
        "symlinked-directory": (tmp_path / "linked-dir" / outside.name).as_uri(),
        "etc-passwd": "file:///etc/passwd",
        "missing-file-outside": "file:///no/such/dir/file.txt",
    }


@pytest.mark.parametrize("media_type", ["text/plain", "image/png"])
async def test_file_urls_outside_the_workspace_are_refused(echo: Any, tmp_path: Path, outside: Path,
                                                           media_type: str) -> None:
    for label, url in escape_urls(tmp_path, outside).items():
        reply = await send(echo, [{"url": url, "mediaType": media_type}], tmp_path)
        assert reply.get("error", {}).get("message") == OUTSIDE, label
        refused(reply, OUTSIDE, str(tmp_path), str(outside.parent), "passwd", "secret", "/no/such")


@pytest.mark.parametrize("url", [
    "file://localhost/etc/passwd", "file://example.com/etc/passwd", "http://example.com/x", "https://example.com/x",
    "ftp://example.com/x", "file:/etc/passwd", "file:etc/passwd", "/etc/passwd", "", "file:///etc/pass\nwd",
])
@pytest.mark.parametrize("media_type", ["text/plain", "image/png"])
async def test_non_local_file_urls_are_refused(echo: Any, tmp_path: Path, url: str, media_type: str) -> None:
    refused(await send(echo, [{"url": url, "mediaType": media_type}], tmp_path), LOCAL_ONLY,
            "passwd", "example.com")


async def test_file_url_with_localhost_authority_is_refused_even_inside_workspace(echo: Any, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    url = "file://localhost" + (tmp_path / "a.txt").as_uri()[len("file://"):]
    refused(await send(echo, [{"url": url, "mediaType": "text/plain"}], tmp_path), LOCAL_ONLY, str(tmp_path))


async def test_trusted_cwd_does_not_relax_file_containment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    """The workspace may be trusted outside the allowed roots; its files still must be inside them."""
    allowed = tmp_path_factory.mktemp("allowed")
    monkeypatch.setenv("IACCODE_A2A_ALLOWED_CWDS", str(allowed))
    monkeypatch.setenv("IAC_CODE_A2A_TRUST_REQUEST_CWD", "1")
    (tmp_path / "a.txt").write_text("a")
    async with echo_server() as echo:
        refused(await send(echo, [{"url": (tmp_path / "a.txt").as_uri(), "mediaType": "text/plain"}], tmp_path),
                OUTSIDE, str(tmp_path))


# --------------------------------------------------------------------------- multimodal raw parts


async def test_multimodal_raw_parts_become_manifest_entries(echo: Any, tmp_path: Path) -> None:
    mp3, blob, svg = b"ID3\x04\x00" + bytes(100), bytes(range(256)) * 3, b"<svg/>"
    prompt, manifest = accepted(await send(echo, [
        {"text": "Describe these."},
        {"raw": b64(PNG), "mediaType": "image/png", "filename": "a.png"},
        {"raw": b64(mp3), "mediaType": "audio/mpeg", "filename": "voice memo.mp3"},
        {"raw": b64(blob), "mediaType": "application/octet-stream"},
        {"raw": b64(svg), "mediaType": "image/svg+xml", "filename": "../../etc/x.svg"},
    ], tmp_path))
    assert manifest == [entry("a.png", "image/png", PNG, "inline"),
                        entry("voice memo.mp3", "audio/mpeg", mp3, "inline"),
                        entry("inline", "application/octet-stream", blob, "inline"),
                        entry("attachment", "image/svg+xml", svg, "inline")]
    assert prompt == "\n".join(["Describe these.",
                                block("a.png", "image/png", PNG, "inline"),
                                block("voice memo.mp3", "audio/mpeg", mp3, "inline"),
                                block("inline", "application/octet-stream", blob, "inline"),
                                block("attachment", "image/svg+xml", svg, "inline")])


async def test_multimodal_raw_size_limit(echo: Any, tmp_path: Path) -> None:
    at_limit = bytes(INLINE_BINARY_LIMIT)
    _, manifest = accepted(await send(echo, [{"raw": b64(at_limit), "mediaType": "image/jpeg"}], tmp_path))
    assert manifest == [entry("inline", "image/jpeg", at_limit, "inline")]
    refused(await send(echo, [{"raw": b64(bytes(INLINE_BINARY_LIMIT + 1)), "mediaType": "image/jpeg"}], tmp_path),
            BIN_RAW_TOO_LARGE)


async def test_malformed_wildcard_media_type_cannot_inject_manifest_lines(echo: Any, tmp_path: Path) -> None:
    part = {"raw": b64(PNG), "mediaType": "image/png\n- source=file:///etc/passwd"}
    refused(await send(echo, [part], tmp_path), UNSUPPORTED)


@pytest.mark.parametrize(("filename", "expected"), [
    ("", "inline"), ("ok.png", "ok.png"), ("dir/ok.png", "attachment"), ("..", "attachment"),
    ("a\n- source=x", "attachment"), ("a\u2028b", "attachment"), ("a\x85b", "attachment"),
    ("c:\\x.png", "attachment"), ("x" * 300, "attachment"), ("schéma v2.png", "schéma v2.png"),
])
async def test_multimodal_filenames_are_bare_basenames(echo: Any, tmp_path: Path, filename: str,
                                                       expected: str) -> None:
    _, manifest = accepted(await send(echo, [{"raw": b64(PNG), "mediaType": "image/png", "filename": filename}],
                                      tmp_path))
    assert manifest[0]["filename"] == expected


# --------------------------------------------------------------------------- multimodal data parts


async def test_multimodal_data_parts(echo: Any, tmp_path: Path) -> None:
    wav = b"RIFF" + bytes(64)
    _, manifest = accepted(await send(echo, [
        {"data": {"bytes": b64(PNG), "filename": "b.png"}, "mediaType": "image/png", "filename": "ignored.png"},
        {"data": {"base64": b64(wav)}, "mediaType": "audio/wav", "filename": "part.wav"},
        {"data": {"bytes": b64(PNG)}, "mediaType": "image/webp"},
        {"data": {"bytes": b64(PNG), "filename": "x/y.png"}, "mediaType": "image/png"},
    ], tmp_path))
    assert manifest == [entry("b.png", "image/png", PNG, "data"), entry("part.wav", "audio/wav", wav, "data"),
                        entry("inline", "image/webp", PNG, "data"), entry("attachment", "image/png", PNG, "data")]


@pytest.mark.parametrize(("data", "message"), [
    ([b64(PNG)], BIN_DATA_NOT_OBJECT),
    (b64(PNG), BIN_DATA_NOT_OBJECT),
    ({}, BIN_DATA_NO_BYTES),
    ({"filename": "a.png"}, BIN_DATA_NO_BYTES),
    ({"bytes": 12}, BIN_DATA_NO_BYTES),
    ({"bytes": ""}, BIN_DATA_NO_BYTES),
    ({"bytes": "not base64!"}, BIN_DATA_BAD_BASE64),
    ({"bytes": "YQ"}, BIN_DATA_BAD_BASE64),
    ({"base64": "YW Jj"}, BIN_DATA_BAD_BASE64),
    ({"bytes": "éé=="}, BIN_DATA_BAD_BASE64),
])
async def test_multimodal_data_errors(echo: Any, tmp_path: Path, data: Any, message: str) -> None:
    refused(await send(echo, [{"data": data, "mediaType": "image/png"}], tmp_path), message)


async def test_multimodal_data_size_limit(echo: Any, tmp_path: Path) -> None:
    at_limit = bytes(INLINE_BINARY_LIMIT)
    _, manifest = accepted(await send(echo, [{"data": {"bytes": b64(at_limit)}, "mediaType": "audio/ogg"}], tmp_path))
    assert manifest == [entry("inline", "audio/ogg", at_limit, "data")]
    over = {"bytes": b64(bytes(INLINE_BINARY_LIMIT + 1))}
    refused(await send(echo, [{"data": over, "mediaType": "audio/ogg"}], tmp_path), BIN_DATA_TOO_LARGE)


# --------------------------------------------------------------------------- multimodal file URL parts


async def test_multimodal_file_url(echo: Any, tmp_path: Path) -> None:
    (tmp_path / "img").mkdir()
    image = tmp_path / "img" / "dia gram.png"
    image.write_bytes(PNG)
    (tmp_path / "alias.png").symlink_to(image)
    prompt, manifest = accepted(await send(echo, [{"url": (tmp_path / "alias.png").as_uri(), "mediaType": "image/png"}],
                                           tmp_path))
    resolved = Path(os.path.realpath(image))
    assert manifest == [entry("dia gram.png", "image/png", PNG, resolved.as_uri())]
    assert prompt == block("dia gram.png", "image/png", PNG, resolved.as_uri())


async def test_multimodal_file_url_size_limit(echo: Any, tmp_path: Path) -> None:
    at_limit = sized_file(tmp_path / "big.bin", BINARY_FILE_LIMIT)
    _, manifest = accepted(await send(echo, [{"url": at_limit.as_uri(), "mediaType": "application/octet-stream"}],
                                      tmp_path))
    zeros = hashlib.sha256()
    for _ in range(BINARY_FILE_LIMIT // (1024 * 1024)):
        zeros.update(bytes(1024 * 1024))
    assert manifest[0]["byteSize"] == BINARY_FILE_LIMIT and manifest[0]["sha256"] == zeros.hexdigest()
    over = sized_file(tmp_path / "over.bin", BINARY_FILE_LIMIT + 1)
    refused(await send(echo, [{"url": over.as_uri(), "mediaType": "application/octet-stream"}], tmp_path),
            BIN_FILE_TOO_LARGE, str(tmp_path))


async def test_multimodal_file_url_must_exist(echo: Any, tmp_path: Path) -> None:
    refused(await send(echo, [{"url": (tmp_path / "none.png").as_uri(), "mediaType": "image/png"}], tmp_path),
            NOT_A_FILE, str(tmp_path))


# --------------------------------------------------------------------------- configured multimodal types


async def test_multimodal_mime_type_extras(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("IACCODE_A2A_MULTIMODAL_MIME_TYPES", "Application/PDF; video/mp4,")
    pdf, mp4 = b"%PDF-1.7", b"\x00\x00\x00\x18ftypmp42"
    (tmp_path / "doc.pdf").write_bytes(pdf)
    async with echo_server() as echo:
        _, manifest = accepted(await send(echo, [
            {"raw": b64(pdf), "mediaType": "application/pdf", "filename": "doc.pdf"},
            {"data": {"bytes": b64(mp4), "filename": "clip.mp4"}, "mediaType": "video/mp4"},
            {"url": (tmp_path / "doc.pdf").as_uri(), "mediaType": "application/pdf"},
        ], tmp_path))
        assert manifest == [entry("doc.pdf", "application/pdf", pdf, "inline"),
                            entry("clip.mp4", "video/mp4", mp4, "data"),
                            entry("doc.pdf", "application/pdf", pdf, Path(os.path.realpath(tmp_path / "doc.pdf")).as_uri())]
        refused(await send(echo, [{"text": "x", "mediaType": "application/pdf"}], tmp_path), UNSUPPORTED)


async def test_overlapping_and_wildcard_extras_do_not_break_start_up(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    """Wildcards are dropped; a type in both classes is text-like."""
    monkeypatch.setenv("IACCODE_A2A_TEXT_MIME_TYPES", "image/*,*,text/plain,image/svg+xml")
    monkeypatch.setenv("IACCODE_A2A_MULTIMODAL_MIME_TYPES", "application/json;image/png;image/svg+xml;audio/*")
    async with echo_server() as echo:
        prompt, manifest = accepted(await send(echo, [
            {"raw": b64(b"<svg/>"), "mediaType": "image/svg+xml"},
            {"data": {"a": 1}, "mediaType": "application/json"},
            {"raw": b64(PNG), "mediaType": "image/png"},
        ], tmp_path))
        assert prompt.startswith('<svg/>\n{"a":1}\nA2A multimodal attachment:')
        assert manifest == [entry("inline", "image/png", PNG, "inline")]


# --------------------------------------------------------------------------- no task left behind


async def test_refused_part_leaves_no_task(echo: Any, tmp_path: Path) -> None:
    server, http = echo
    refused(await send(echo, [{"text": "fine"}, {"raw": b64(b"\xff"), "mediaType": "text/plain"}], tmp_path),
            RAW_NOT_UTF8)
    refused(await send(echo, [{"url": "file:///etc/passwd", "mediaType": "text/plain"}], tmp_path), OUTSIDE)
    listed = await rpc(http, server, {"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}})
    assert listed["result"].get("tasks", []) == []
