"""Every Redis key the shared state uses, in one place (all under one prefix).

Task ids follow the A2A id rule (letters, digits, ``_ . : -``) and appear in key
names as they are; owners and context ids may hold anything, so keys naming
them use a digest. One Redis (or a primary with replicas) holds every key:
the Lua scripts touch several keys at once, which Redis Cluster would refuse.
"""

from __future__ import annotations

import hashlib

DEFAULT_PREFIX = "iac-code:a2a:"


def digest(*parts: str) -> str:
    """A fixed-length, key-safe name for arbitrary strings."""
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:32]


class Keys:
    """Key names under ``prefix``."""

    def __init__(self, prefix: str = DEFAULT_PREFIX) -> None:
        self.prefix = prefix

    # tasks ------------------------------------------------------------------
    def task(self, task_id: str) -> str:
        """Hash: ``doc`` (Task protobuf), ``owner``, ``ctx``, ``state``, ``v`` (version), ``m`` (index member)."""
        return f"{self.prefix}task:{task_id}"

    def events(self, task_id: str) -> str:
        """Stream of the task's writes: entry id ``<version>-1``, field ``e`` (StreamResponse bytes, empty: no event)."""
        return f"{self.prefix}events:{task_id}"

    def index(self, owner: str, context_id: str = "", state: int | None = None) -> str:
        """Lexicographic sorted set of one owner's tasks (optionally of one context and/or state) for ListTasks."""
        key = f"{self.prefix}index:{digest(owner)}"
        if context_id:
            key += f":c:{digest(context_id)}"
        if state is not None:
            key += f":s:{state}"
        return key

    @property
    def finished(self) -> str:
        """Sorted set of finished task ids, score: when they finished (ms); the TTL sweep reads it."""
        return f"{self.prefix}finished"

    @property
    def page_token_key(self) -> str:
        """The HMAC key of ListTasks page tokens, shared by every node."""
        return f"{self.prefix}page-token-key"

    # push configs -------------------------------------------------------------
    def push_configs(self, task_id: str) -> str:
        """Hash: the push service's records of the task (``<owner key>:<config id>`` -> encrypted configuration)."""
        return f"{self.prefix}push-configs:{task_id}"

    # features' shared records -------------------------------------------------
    def records(self, kind: str) -> str:
        """Hash: one kind of a feature's shared records (record key -> JSON), e.g. ``execution-control``."""
        return f"{self.prefix}records:{kind}"

    # permission waits ---------------------------------------------------------
    def permission_waits(self, task_id: str) -> str:
        """Hash: the task's durable permission-wait checkpoints (boundary id -> record JSON)."""
        return f"{self.prefix}permission-waits:{task_id}"

    def open_permission_waits(self, owner: str, context_id: str) -> str:
        """Hash: the context's checkpoints still open (boundary id -> task id)."""
        return f"{self.prefix}permission-waits-open:{digest(owner, context_id)}"

    # contexts and nodes -------------------------------------------------------
    def context(self, owner: str, context_id: str) -> str:
        """String: the context's JSON snapshot (workspace, channel, conversation)."""
        return f"{self.prefix}context:{digest(owner, context_id)}"

    def lease(self, owner: str, context_id: str) -> str:
        """String ``<node> <token> <task id>`` with an expiry: the node running the context's turn."""
        return f"{self.prefix}lease:{digest(owner, context_id)}"

    @property
    def fence(self) -> str:
        """Counter: every lease grant takes the next value (fencing tokens)."""
        return f"{self.prefix}fence"

    @property
    def nodes(self) -> str:
        """Set of node ids that joined and have not left (survivors check them for leftovers)."""
        return f"{self.prefix}nodes"

    def node(self, node_id: str) -> str:
        """String with an expiry: present while the node is alive (its heartbeat)."""
        return f"{self.prefix}node:{node_id}"

    def held(self, node_id: str) -> str:
        """Hash: lease key -> ``owner NUL context NUL task``: the turns a node runs."""
        return f"{self.prefix}held:{node_id}"

    def inbox(self, node_id: str) -> str:
        """List of calls forwarded to the node (cancel, permission answers)."""
        return f"{self.prefix}inbox:{node_id}"

    def reply(self, call_id: str) -> str:
        """List holding the answer to one forwarded call."""
        return f"{self.prefix}reply:{call_id}"

    def reaping(self, task_id: str) -> str:
        """String with an expiry: one survivor at a time marks a dead node's task interrupted."""
        return f"{self.prefix}reaping:{task_id}"
