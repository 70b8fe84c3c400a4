"""Push configurations in a shared state backend: the push plugin's store over the Redis backend's records.

Two store instances on one key prefix stand for two nodes; the keyring is shared, as
``IAC_CODE_A2A_PUSH_KEYRING`` shares it between real nodes.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import AuthenticationInfo, TaskPushNotificationConfig
from a2a.utils.errors import InternalError, InvalidParamsError
from iac_code_push.configs import NOT_STORED as PUSH_NOT_STORED
from iac_code_push.configs import SharedPushConfigStore
from iac_code_push.crypto import PushKeyring
from iac_code_state_redis.keys import Keys, digest
from iac_code_state_redis.push_configs import RedisPushConfigRecords
from iac_code_state_redis.store import NOT_REACHABLE
from redis.backoff import NoBackoff
from redis.retry import Retry

from iac_code.testing import redis_url


class NamedUser(User):
    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._name


def ctx(user: str = "alice") -> ServerCallContext:
    return ServerCallContext(user=NamedUser(user))


class Env:
    """Clients on one fresh key prefix; every key under it is deleted afterwards."""

    def __init__(self) -> None:
        self.keys = Keys(f"test-push-{uuid.uuid4().hex}:")
        self.clients: list[aioredis.Redis] = []

    def client(self) -> aioredis.Redis:
        client = aioredis.Redis.from_url(redis_url())
        self.clients.append(client)
        return client

    async def all_bytes(self) -> bytes:
        """Every key name and value under the prefix, concatenated (to look for secrets in clear)."""
        client = self.clients[0] if self.clients else self.client()
        found = b""
        async for key in client.scan_iter(match=f"{self.keys.prefix}*"):
            found += key
            for name, value in (await client.hgetall(key)).items():
                found += name + value
        return found

    async def cleanup(self) -> None:
        client = self.client()
        keys = [key async for key in client.scan_iter(match=f"{self.keys.prefix}*", count=1000)]
        if keys:
            await client.delete(*keys)
        for made in self.clients:
            await made.aclose()


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    made = Env()
    try:
        yield made
    finally:
        await made.cleanup()


async def test_push_configs_are_encrypted_at_rest_and_owner_scoped(env: Env, tmp_path: Path) -> None:
    keyring = PushKeyring.load(tmp_path, env={})
    node_a = SharedPushConfigStore(RedisPushConfigRecords(env.client(), env.keys), keyring)
    node_b = SharedPushConfigStore(RedisPushConfigRecords(env.client(), env.keys), keyring)
    secret, credentials = "tok-SECRET-4242", "cred-HIDDEN-9191"
    config = TaskPushNotificationConfig(task_id="t", id="c1", url="https://example.com/hook", token=secret,
                                        authentication=AuthenticationInfo(scheme="Bearer", credentials=credentials))
    stored = await node_a.set_info("t", config, ctx())
    assert stored is not None and stored.token == secret
    for n in (2, 3):
        await node_a.set_info("t", TaskPushNotificationConfig(id=f"c{n}", url=f"https://example.com/{n}"), ctx())
    await node_a.set_info("t", TaskPushNotificationConfig(id="c1", url="https://bob.example/"), ctx("bob"))
    assert (await node_a.set_info("t", TaskPushNotificationConfig(id="nourl"), ctx())).url == ""
    everything = await env.all_bytes()
    assert secret.encode() not in everything and credentials.encode() not in everything
    assert b"https://example.com/hook" in everything  # the rest stays readable
    fields = {name.decode() for name in await env.clients[0].hkeys(env.keys.push_configs("t"))}
    assert fields == {f"{digest('alice')}:c{n}" for n in (1, 2, 3)} | {f"{digest('bob')}:c1"}  # the layout of before

    mine = await node_b.get_info("t", ctx())
    assert [c.id for c in mine] == ["c1", "c2", "c3"] and mine[0] == config
    assert [c.url for c in await node_b.get_info("t", ctx("bob"))] == ["https://bob.example/"]
    assert await node_b.get_info("t", ctx("carol")) == []
    page, token = await node_b.list_page("t", ctx(), 2, "")
    assert [c.id for c in page] == ["c1", "c2"] and token
    page, token = await node_a.list_page("t", ctx(), 2, token)
    assert [c.id for c in page] == ["c3"] and token == ""
    with pytest.raises(InvalidParamsError):
        await node_a.list_page("t", ctx(), 2, "bm9wZQ")

    targets = await node_b.dispatch_targets("t")
    assert len(targets) == 4 and len({owner for owner, _ in targets}) == 2
    assert len(await node_b.get_info_for_dispatch("t")) == 4
    alice_key = next(owner for owner, c in targets if c.token == secret)
    delivered = await node_b.read_for_delivery(alice_key, "t", "c1")
    assert delivered == config and await node_b.read_for_delivery(alice_key, "t", "c1") is delivered
    await node_a.set_info("t", TaskPushNotificationConfig(id="c1", url="https://example.com/new"), ctx())
    assert (await node_b.read_for_delivery(alice_key, "t", "c1")).url == "https://example.com/new"

    await node_a.delete_info("t", ctx("bob"), "c2")  # not bob's: nothing happens
    await node_a.delete_info("t", ctx(), "c2")
    assert [c.id for c in await node_b.get_info("t", ctx())] == ["c1", "c3"]
    await node_a.delete_info("t", ctx())
    assert await node_b.get_info("t", ctx()) == [] and len(await node_b.get_info("t", ctx("bob"))) == 1
    assert await node_b.read_for_delivery(alice_key, "t", "c1") is None
    with pytest.raises(InvalidParamsError):
        await node_a.set_info("t", TaskPushNotificationConfig(id="bad id!", url="https://x.example/"), ctx())


# ------------------------------------------------------------------ Redis unreachable


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_unreachable_redis_fails_with_the_kernel_messages_only(tmp_path: Path) -> None:
    port = closed_port()
    client = aioredis.Redis.from_url(f"redis://:hunter2@127.0.0.1:{port}/15", retry=Retry(NoBackoff(), 0),
                                     socket_connect_timeout=1)
    push = SharedPushConfigStore(RedisPushConfigRecords(client, Keys(f"test-push-{uuid.uuid4().hex}:")),
                                 PushKeyring.load(tmp_path, env={}))
    try:
        failures: list[tuple[str, InternalError]] = []
        for expected, call in [
            (PUSH_NOT_STORED, push.set_info("t", TaskPushNotificationConfig(id="c", url="https://x.example/"), ctx())),
            (PUSH_NOT_STORED, push.delete_info("t", ctx(), "c")), (PUSH_NOT_STORED, push.delete_info("t", ctx())),
            (NOT_REACHABLE, push.get_info("t", ctx())), (NOT_REACHABLE, push.read_for_delivery("x", "t", "c")),
            (NOT_REACHABLE, push.dispatch_targets("t")),
        ]:
            with pytest.raises(InternalError) as raised:
                await call
            failures.append((expected, raised.value))
        for expected, error in failures:
            assert error.message == expected and str(error) == expected
            assert str(port) not in str(error) and "hunter2" not in str(error) and error.__cause__ is None
    finally:
        await client.aclose()
