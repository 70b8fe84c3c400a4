"""The push-notification callback URL guard (spec: push.md §2), with DNS pinning for aiohttp.

A client chooses where the server POSTs its notifications, so a callback URL is
a server-side request the client aims: without a guard it reaches the loopback
interface, the cloud metadata service or any host on the server's private
network. The guard is applied when a configuration is stored, when a job is
enqueued and again at delivery.

* :func:`check_static` applies the static rules in the spec's order: an
  ``http``/``https`` URL with a host; no ``localhost``/``*.localhost``; no literal
  private, loopback, link-local, multicast, reserved or unspecified address.
  Literal addresses are recognised in every spelling a resolver accepts: IPv6
  (with a zone), IPv4-mapped IPv6 (``::ffff:127.0.0.1``, judged as the IPv4
  address inside it, as is a 6to4 address) and the legacy ``inet_aton`` forms
  (``2130706433``, ``0177.0.0.1``, ``0x7f.1``, ``127.1``). Unlike the product the
  spec describes, the shared range ``100.64.0.0/10`` is refused too: on Alibaba
  Cloud it holds the instance metadata service (``100.100.100.200``, which hands
  out the instance's RAM credentials). So are the NAT64 forms of every refused
  address (``64:ff9b::/96``, ``64:ff9b:1::/48``, judged as the IPv4 address
  inside) and the names clouds give their metadata services (``metadata``,
  ``metadata.*``, ``*.internal``).
* :class:`PushUrlGuard` adds the ``push-allowed-hosts`` exemptions and the
  delivery-time rules: the host is resolved (on the event loop's resolver, never
  blocking the loop) and *every* address must pass.
* :class:`PinnedResolver` (and :class:`PinnedConnector`, which also screens
  literal-address URLs aiohttp never hands to a resolver) closes the DNS
  rebinding window: the addresses aiohttp connects to are the very ones the
  guard screened, from one look-up per connection, while the URL, the ``Host``
  header and TLS SNI keep the original name.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
import unicodedata
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from aiohttp import TCPConnector
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.helpers import is_ip_address

from iac_code_push.settings import split_push_allowed_hosts

SCHEME_MESSAGE = "A2A push callback URL must be http or https"
PRIVATE_HOST_MESSAGE = "A2A push callback URL must not target private or local hosts"
PRIVATE_RESOLVED_MESSAGE = "A2A push callback URL must not resolve to private or local hosts"
NO_ADDRESSES_MESSAGE = "A2A push callback URL host did not resolve to any addresses"
NO_HOST_MESSAGE = "A2A push callback URL must include a host"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_NUMERIC_HOST_FLAGS = socket.NI_NUMERICHOST | socket.NI_NUMERICSERV
_INET_ATON_CHARS = frozenset("0123456789abcdefx.")
_IDNA_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})
# Alibaba Cloud's instance metadata (100.100.100.200) lives here; carriers' NAT too: never a webhook.
SHARED_RANGE = ipaddress.ip_network("100.64.0.0/10")
# NAT64 prefixes (RFC 6052 well-known, RFC 8215 local use): the IPv4 address is the last 32 bits.
NAT64_PREFIXES = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


class PushUrlError(ValueError):
    """A callback URL the guard refuses; ``str(exc)`` is the spec's message (a client may see it)."""


class PushAddressRefused(PushUrlError, OSError):
    """A connection the :class:`PinnedResolver` refused: the host resolved to a forbidden address.

    It is an ``OSError`` because aiohttp's connector only wraps ``OSError`` from a
    resolver (into ``ClientConnectorDNSError``, whose ``os_error`` is this); it is
    also a :class:`PushUrlError`, so a delivery worker can tell a refusal (permanent)
    from a DNS failure (transient): see :func:`refusal_of`.
    """

    def __init__(self, message: str) -> None:
        OSError.__init__(self, errno.EPERM, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def refusal_of(exc: BaseException | None) -> PushUrlError | None:
    """The guard's refusal behind ``exc`` (itself, its cause or context chain, or aiohttp's ``os_error``), if any.

    Lets the delivery worker classify an aiohttp connection error raised because
    the guard refused the destination as permanent rather than transient.
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, PushUrlError):
            return exc
        os_error = getattr(exc, "os_error", None)
        if isinstance(os_error, PushUrlError):
            return os_error
        exc = exc.__cause__ or exc.__context__
    return None


def _inet_aton(host: str) -> ipaddress.IPv4Address | None:
    """``host`` as the IPv4 address BSD/glibc ``inet_aton`` (and so ``getaddrinfo``) would read it, else ``None``.

    One to four parts, each decimal, octal (leading ``0``) or hex (``0x``); the last
    part fills the remaining bytes (``127.1`` is ``127.0.0.1``, ``2130706433`` is one
    32-bit number). Parsed here rather than only by ``socket.inet_aton`` so the
    result does not depend on the platform's C library; the platform's reading is
    honoured as well (glibc also accepts trailing text after a blank: ``127.0.0.1 x``).
    """
    if not host:
        return None
    parts = host.split(".")
    values: list[int] = []
    if len(parts) <= 4 and _INET_ATON_CHARS.issuperset(host):
        for part in parts:
            try:
                if part[:2] == "0x":
                    values.append(int(part[2:] or "0", 16))
                elif len(part) > 1 and part[0] == "0":
                    values.append(int(part[1:], 8))
                else:
                    values.append(int(part, 10))
            except ValueError:
                values = []
                break
    if values:
        *head, last = values
        if all(value <= 255 for value in head) and last < 1 << (8 * (4 - len(head))):
            number = last
            for index, value in enumerate(head):
                number |= value << (8 * (3 - index))
            return ipaddress.IPv4Address(number)
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def parse_address(host: str) -> IPAddress | None:
    """``host`` (no brackets, no trailing dot) as an IP address in any spelling a resolver accepts, else ``None``.

    An IPv6 zone (``fe80::1%eth0``) is dropped: the address is judged without it.
    """
    try:
        return ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        pass
    if ":" in host:
        return None
    return _inet_aton(host)


def _judged(address: IPAddress) -> IPAddress:
    """The address the checks judge: the IPv4 address inside an IPv4-mapped, 6to4 or NAT64 IPv6 address, else itself."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped or address.sixtofour
        if inner is not None:
            return inner
        if any(address in prefix for prefix in NAT64_PREFIXES):
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def is_forbidden_address(address: IPAddress) -> bool:
    """Whether ``address`` is private, loopback, link-local, multicast, reserved, unspecified (spec §2 rule 3)
    or in the shared range ``100.64.0.0/10`` (the cloud's metadata service).

    Python ``ipaddress`` semantics, applied to the IPv4 address inside a mapped, 6to4
    or NAT64 address.
    """
    address = _judged(address)
    return (address.is_private or address.is_loopback or address.is_link_local or address.is_multicast
            or address.is_reserved or address.is_unspecified or address in SHARED_RANGE)


def _is_local_name(host: str) -> bool:
    """``localhost`` and its subdomains, and the names clouds give their instance metadata services."""
    return (host == "localhost" or host.endswith(".localhost") or host == "metadata" or host.startswith("metadata.")
            or host.endswith(".internal"))


@dataclass(frozen=True)
class _Target:
    """A parsed callback URL: normalised host (lower case, unquoted, no trailing dot), its address if literal, port."""

    host: str
    address: IPAddress | None
    port: int


def _normalise_host(host: str) -> str:
    """Lower case, percent-decoded, compatibility-normalised (as IDNA does: ``ｌｏｃａｌｈｏｓｔ``), no trailing dot."""
    host = urllib.parse.unquote(host)
    if not host.isascii():
        host = unicodedata.normalize("NFKC", host).translate(_IDNA_DOTS)
    return host.lower().rstrip(".")


def _parse(url: str) -> _Target:
    try:
        parsed = urllib.parse.urlsplit(url)
        port = parsed.port
        hostname = parsed.hostname
    except ValueError:  # an invalid port or IPv6 literal
        raise PushUrlError(SCHEME_MESSAGE) from None
    if parsed.scheme not in ("http", "https") or not hostname or port == 0:
        raise PushUrlError(SCHEME_MESSAGE)
    host = _normalise_host(hostname)
    if not host:
        raise PushUrlError(SCHEME_MESSAGE)
    return _Target(host, parse_address(host), port or (443 if parsed.scheme == "https" else 80))


class PushUrlGuard:
    """The callback URL guard, with the ``push-allowed-hosts`` exemptions.

    ``allowed_hosts`` are ``push-allowed-hosts`` entries (host names, IP addresses,
    CIDR networks; see :func:`iac_code_push.settings.split_push_allowed_hosts`, which
    raises ``ValueError`` for a bad entry). A URL whose host is a listed name, or
    a literal address inside a listed network, is exempt from the private/local
    rules, and the addresses a listed *name* resolves to are not screened (the
    operator vouched for the name). A name that is not listed is never resolved to
    match a network: every address it resolves to must be public, so a hostile
    name cannot lead a delivery into a network the operator opened for its own
    literal addresses. Everything else follows spec §2.
    """

    def __init__(self, allowed_hosts: Iterable[str] = ()) -> None:
        self.names, self.networks = split_push_allowed_hosts(allowed_hosts)

    def is_listed_name(self, host: str) -> bool:
        """Whether ``host`` (any case, optional trailing dot) is a listed host name."""
        return _normalise_host(host) in self.names

    def is_listed_address(self, address: IPAddress) -> bool:
        """Whether ``address`` (or the IPv4 address inside it) is inside a listed network."""
        inner = _judged(address)
        return any(address in network or inner in network for network in self.networks)

    def address_allowed(self, address: IPAddress) -> bool:
        """Whether a connection to ``address`` is allowed: a public address, or one in a listed network."""
        return not is_forbidden_address(address) or self.is_listed_address(address)

    def _check_target(self, target: _Target) -> None:
        if target.host in self.names:
            return
        if _is_local_name(target.host):
            raise PushUrlError(PRIVATE_HOST_MESSAGE)
        if target.address is not None and not self.address_allowed(target.address):
            raise PushUrlError(PRIVATE_HOST_MESSAGE)

    def check_static(self, url: str) -> None:
        """Apply the static rules (spec §2, 1-4, in order) with the exemptions; :class:`PushUrlError` when refused.

        Needs no network: this is the create-time and enqueue-time check.
        """
        self._check_target(_parse(url))

    async def check(self, url: str) -> None:
        """The store-time check: the static rules, then every address the host resolves to must pass.

        A listed name is not resolved. A name that does not resolve is refused
        (:data:`NO_ADDRESSES_MESSAGE`): nothing could be delivered to it.
        """
        target = _parse(url)
        self._check_target(target)
        if target.host in self.names or target.address is not None:
            return
        try:
            await self._lookup(target.host, target.port, target.address)
        except PushUrlError:
            raise
        except OSError:
            raise PushUrlError(NO_ADDRESSES_MESSAGE) from None

    async def resolve(self, url: str) -> list[str]:
        """The addresses ``url``'s host resolves to, each validated (static rules first); :class:`PushUrlError` when refused.

        A literal address is returned as is (canonical form) without a look-up.
        DNS failures propagate as ``OSError`` (``socket.gaierror``): transient.
        """
        target = _parse(url)
        self._check_target(target)
        infos = await self._lookup(target.host, target.port, target.address)
        return list(dict.fromkeys(address for _, address, _, _ in infos))

    async def _lookup(self, host: str, port: int, address: IPAddress | None,
                      family: int = socket.AF_UNSPEC) -> list[tuple[int, str, int, int]]:
        """``(family, address, port, proto)`` for ``host``, each screened; one look-up, on the event loop's resolver."""
        if address is not None:  # a literal: nothing to resolve; screened by the caller's static check
            kind = socket.AF_INET6 if address.version == 6 else socket.AF_INET
            text = str(address) if kind == socket.AF_INET or "%" not in host else host
            return [(kind, text, port, socket.IPPROTO_TCP)]
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, family=family, type=socket.SOCK_STREAM)
        if not infos:
            raise PushUrlError(NO_ADDRESSES_MESSAGE)
        listed = host in self.names
        results: list[tuple[int, str, int, int]] = []
        for kind, _, proto, _, sockaddr in infos:
            if kind not in (socket.AF_INET, socket.AF_INET6):
                continue
            text = str(sockaddr[0])
            if not listed:
                parsed = parse_address(text)
                if parsed is None or is_forbidden_address(parsed):
                    raise PushUrlError(PRIVATE_RESOLVED_MESSAGE)
            if kind == socket.AF_INET6 and len(sockaddr) >= 4 and sockaddr[3] and "%" not in text:
                text, _ = await loop.getnameinfo(sockaddr, _NUMERIC_HOST_FLAGS)  # keep a link-local zone
            results.append((kind, text, int(sockaddr[1]), proto))
        if not results:
            raise PushUrlError(NO_ADDRESSES_MESSAGE)
        return results

    async def screen_host(self, host: str, port: int, family: int = socket.AF_UNSPEC) -> list[tuple[int, str, int, int]]:
        """Resolve ``host`` once and screen every address (a literal address is screened too).

        Returns ``(family, address, port, proto)`` tuples; raises :class:`PushUrlError`
        (an empty host, a local name, a forbidden address) or ``OSError`` (DNS failure).
        """
        if not host:
            raise PushUrlError(NO_HOST_MESSAGE)
        name = _normalise_host(host.strip("[]"))
        if not name:
            raise PushUrlError(NO_HOST_MESSAGE)
        address = parse_address(name)
        self._check_target(_Target(name, address, port))
        return await self._lookup(name, port, address, family)


def check_static(url: str) -> None:
    """The static callback URL rules (spec §2) without exemptions; :class:`PushUrlError` with the spec's message."""
    _DEFAULT_GUARD.check_static(url)


_DEFAULT_GUARD = PushUrlGuard(())


class PinnedResolver(AbstractResolver):
    """An aiohttp resolver that returns only addresses the guard validated, from a single look-up.

    Use it with ``TCPConnector(resolver=PinnedResolver(guard), use_dns_cache=False)``
    (or :class:`PinnedConnector`): aiohttp then connects exactly to an address the
    guard screened, so a name cannot pass the check with a public address and
    then be re-resolved to a private one (DNS rebinding). ``hostname`` in each
    result stays the requested name, so TLS SNI, certificate checks and ``Host``
    use the original host. A refusal raises :class:`PushAddressRefused` (an
    ``OSError`` carrying the guard's message); aiohttp reports it as
    ``ClientConnectorDNSError`` and never opens a TCP connection.
    """

    def __init__(self, guard: PushUrlGuard) -> None:
        self.guard = guard

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        """Resolve ``host`` once, screen every address, return them as aiohttp results."""
        try:
            infos = await self.guard.screen_host(host, port, family)
        except PushUrlError as exc:
            raise PushAddressRefused(str(exc)) from None
        return [ResolveResult(hostname=host, host=address, port=resolved_port, family=kind, proto=proto,
                              flags=_NUMERIC_HOST_FLAGS) for kind, address, resolved_port, proto in infos]

    async def close(self) -> None:
        """Nothing to release: look-ups use the event loop's resolver."""


class PinnedConnector(TCPConnector):
    """A ``TCPConnector`` with a :class:`PinnedResolver`, no DNS cache, and literal-address hosts screened too.

    aiohttp never passes a literal IP host to its resolver, so a plain connector
    with a :class:`PinnedResolver` would still connect to ``http://10.0.0.1/``
    (after a redirect, say); this connector screens such hosts before connecting.
    Do not combine it with a proxy (``trust_env``): the proxy would resolve the
    callback host itself.
    """

    def __init__(self, guard: PushUrlGuard, **kwargs: Any) -> None:
        if "resolver" in kwargs or kwargs.pop("use_dns_cache", False):
            raise TypeError("PinnedConnector uses its own resolver and no DNS cache")
        super().__init__(resolver=PinnedResolver(guard), use_dns_cache=False, **kwargs)
        self.guard = guard

    async def _resolve_host(self, host: str, port: int, traces: Any = None) -> list[ResolveResult]:
        if is_ip_address(host):
            try:
                await self.guard.screen_host(host, port)
            except PushUrlError as exc:
                raise PushAddressRefused(str(exc)) from None
        return await super()._resolve_host(host, port, traces)
