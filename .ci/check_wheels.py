"""Every documented install works: build every distribution's wheel, then, for each extra, install
``iac-code[extra]`` from those wheels into a fresh virtual environment (not the workspace), start
the server with a configuration that uses the extra's feature, check ``--plugins list``, send
one message with a2a-sdk's client and read the card with ``iac-code a2a-client``.

    uv run python .ci/check_wheels.py [--extras a2a,a2a-redis] [--keep]

The kernel wheel is installed by its file path (``pip install './dist/iac_code-<v>-py3-none-any.whl[extra]'
--find-links dist``): the package index has an unrelated project named ``iac-code``, which a plain
``pip install 'iac-code[extra]'`` could pick instead. Redis is the machine's (127.0.0.1:6379, database
15, a key prefix per run). Only 127.0.0.0/8 is contacted, apart from the package index for
third-party dependencies.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def extras_plan(prefix: str) -> dict[str, tuple[dict[str, object], set[str]]]:
    """extra → (the server settings that use its feature, the distributions ``--plugins list`` must show)."""
    base = {"iac-code-transport-http", "iac-code-transport-stdio", "iac-code-push", "iac-code-push-file",
            "iac-code-runtime-offline", "iac-code-a2a-client", "iac-code-metrics", "iac-code-tracing",
            "iac-code-compat-v03", "iac-code-execution-control", "iac-code-resource-selector",
            "iac-code-console-web", "iac-code-mcp"}
    redis = "redis://127.0.0.1:6379/15"
    return {
        "a2a": ({}, base),
        "a2a-grpc": ({"transport": ["http", "grpc"], "grpc-port": free_port()}, base | {"iac-code-transport-grpc"}),
        "a2a-redis": ({"task-store": "redis", "task-store-redis-url": redis, "task-store-key-prefix": prefix,
                       "push-notifications": True, "push-queue": "redis-streams", "push-redis-url": redis,
                       "push-stream": f"{prefix}:push", "push-retry-key": f"{prefix}:retry",
                       "push-dead-stream": f"{prefix}:dead", "push-consumer-group": f"{prefix}:group"},
                      base | {"iac-code-state-redis", "iac-code-push-redis", "iac-code-transport-redis"}),
        "a2a-signing": ({"card-signer": "jwks"}, base | {"iac-code-signing-jwks"}),
        "a2a-llm": ({"agent-runtime": "llm", "llm-base-url": f"http://127.0.0.1:{free_port()}/v1",
                     "llm-api-key": "not-a-real-key"}, base | {"iac-code-runtime-llm"}),
        "all": ({"transport": ["http", "grpc"], "grpc-port": free_port(), "card-signer": "jwks"},
                base | {"iac-code-transport-grpc", "iac-code-signing-jwks", "iac-code-state-redis",
                        "iac-code-runtime-llm"}),
    }


# Run by the fresh environment's Python: one SendMessage through a2a-sdk's client.
CLIENT = textwrap.dedent("""
    import asyncio, sys
    import httpx
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest

    async def main(url):
        async with httpx.AsyncClient(timeout=30) as http:
            client = await ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create_from_url(url)
            request = SendMessageRequest(message=Message(message_id="wheel-check", role=Role.ROLE_USER,
                                                         parts=[Part(text="hello")]))
            results = [event async for event in client.send_message(request)]
            task = results[0].task
            print(task.id, task.status.state)
            await client.close()

    asyncio.run(main(sys.argv[1]))
""")


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, text=True, capture_output=True, check=False, **kwargs)  # type: ignore[call-overload]


def build(dist: Path) -> Path:
    done = run(["uv", "build", "--all-packages", "--wheel", "-o", str(dist)], cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"uv build failed:\n{done.stdout}\n{done.stderr}")
    kernel = sorted(dist.glob("iac_code-*-py3-none-any.whl"))
    if len(kernel) != 1:
        raise SystemExit(f"expected one kernel wheel in {dist}, found {[k.name for k in kernel]}")
    return kernel[0]


def wait_ready(url: str, proc: subprocess.Popen[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "health", timeout=2) as response:  # noqa: S310 (loopback only)
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the server did not become ready in time")


def check_extra(extra: str, settings: dict[str, object], expected: set[str], kernel: Path, dist: Path,
                work: Path) -> list[str]:
    """Problems found for one extra (empty: it works)."""
    venv = work / f"venv-{extra}"
    run([sys.executable, "-m", "venv", str(venv)])
    python, iac_code = venv / "bin" / "python", venv / "bin" / "iac-code"
    started = time.monotonic()
    done = run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                f"{kernel}[{extra}]", "--find-links", str(dist)])
    if done.returncode != 0:
        return [f"pip install failed: {done.stderr.strip()[-2000:]}"]
    print(f"  installed in {time.monotonic() - started:.0f}s")
    problems: list[str] = []
    listed = run([str(iac_code), "a2a", "--plugins", "list", "--output", "json"])
    if listed.returncode != 0:
        return [f"--plugins list failed: {listed.stderr.strip()}"]
    rows = json.loads(listed.stdout)
    rows = rows.get("plugins", rows) if isinstance(rows, dict) else rows
    active = {r["distribution"] for r in rows if r.get("status") == "active"}
    failed = [f"{r['name']}: {r.get('reason', '')}" for r in rows if r.get("status") == "failed"]
    if missing := expected - active:
        problems.append(f"--plugins list lacks {sorted(missing)} (active: {sorted(active)})")
    if failed:
        problems.append(f"--plugins list shows failed plugins: {failed}")
    print(f"  plugins: {', '.join(sorted(active))}")
    port = free_port()
    config = work / f"{extra}.yml"
    config.write_text(json.dumps({**settings, "persistence-dir": str(work / f"state-{extra}")}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IACCODE_A2A_", "IAC_CODE_A2A_"))}
    env["HOME"] = str(work / f"home-{extra}")
    proc = subprocess.Popen([str(iac_code), "a2a", "--port", str(port), "--config", str(config)], env=env, cwd=work,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_ready(url, proc)
        sent = run([str(python), "-c", CLIENT, url], timeout=60)
        if sent.returncode != 0:
            problems.append(f"SendMessage with a2a-sdk's client failed: {sent.stderr.strip()[-2000:]}")
        else:
            print(f"  SendMessage: {sent.stdout.strip()}")
        discovered = run([str(iac_code), "a2a-client", "discover", "--url", url, "-o", "json"], env=env, cwd=work,
                         timeout=60)
        if discovered.returncode != 0:
            problems.append(f"iac-code a2a-client discover failed: {discovered.stderr.strip()[-2000:]}")
        else:
            print(f"  a2a-client discover: {json.loads(discovered.stdout)['name']}")
    except RuntimeError as exc:
        problems.append(f"{exc}: {proc.stderr.read() if proc.stderr and proc.poll() is not None else ''}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return problems


def clean_redis(prefix: str) -> None:
    try:
        import redis
    except ImportError:
        return
    client = redis.Redis.from_url("redis://127.0.0.1:6379/15")
    keys = list(client.scan_iter(f"{prefix}*"))
    if keys:
        client.delete(*keys)
    client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extras", default="a2a,a2a-grpc,a2a-redis,a2a-signing,a2a-llm,all")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="iac-code-wheels-"))
    prefix = f"iac-code-wheel-check:{uuid.uuid4().hex[:12]}"
    plan = extras_plan(prefix)
    failures: dict[str, list[str]] = {}
    try:
        dist = work / "dist"
        kernel = build(dist)
        print(f"built {len(list(dist.glob('*.whl')))} wheels: {', '.join(sorted(p.name for p in dist.glob('*.whl')))}")
        for extra in args.extras.split(","):
            settings, expected = plan[extra]
            print(f"iac-code[{extra}]")
            problems = check_extra(extra, settings, expected, kernel, dist, work)
            for problem in problems:
                print(f"  FAIL {problem}")
            if problems:
                failures[extra] = problems
            else:
                print("  ok")
    finally:
        clean_redis(prefix)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    checked = len(args.extras.split(","))
    print(f"wheel installs: {checked - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
