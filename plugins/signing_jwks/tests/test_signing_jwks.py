"""The ``jwks`` card signer: cards signed by the plugin verify with a2a-sdk's own verifier against ``public_jwks()``."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from a2a.utils.proto_utils import warn_on_missing_required_fields
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier
from google.protobuf.json_format import ParseDict
from iac_code_signing_jwks import keys as keys_module
from iac_code_signing_jwks import plugin
from iac_code_signing_jwks.keys import FILES_ROTATION_MESSAGE, STORE_FILE, JwksKeySet, KeyEntry, SigningKeyError
from iac_code_signing_jwks.plugin import JwksCardSigner, JwksSigningConfig
from jwcrypto import jwk
from jwt import PyJWK
from jwt.utils import base64url_decode

from iac_code.api import InterfaceInfo, SigningKeySet, StartupError
from iac_code.testing import make_kernel, start_server

DAY = 86_400.0
JKU = "https://agent.example/.well-known/jwks.json"
PRIVATE_MEMBERS = ("d", "p", "q", "dp", "dq", "qi")


class Clock:
    """A settable clock for key ages and grace periods."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, days: float) -> None:
        self.now += days * DAY


@pytest.fixture(scope="module")
def rsa_key() -> jwk.JWK:
    """One 2048-bit RSA key for the module (generation is slow)."""
    return jwk.JWK.generate(kty="RSA", size=2048)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make_card(name: str = "iac-code") -> AgentCard:
    card = AgentCard(
        name=name,
        description="Infrastructure as code agent",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url="https://agent.example/", protocol_binding="JSONRPC",
                                             protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="terraform", name="Terraform", description="Writes Terraform", tags=["iac"])],
    )
    assert warn_on_missing_required_fields(card, "test card")
    return card


def verifier(jwks: dict[str, Any], algorithms: list[str], seen: list[tuple[str | None, str | None]] | None = None
             ) -> Callable[[AgentCard], None]:
    """a2a-sdk's verifier, its key provider answering from ``jwks`` (PyJWT ``PyJWK``)."""

    def key_provider(kid: str | None, jku: str | None) -> PyJWK:
        if seen is not None:
            seen.append((kid, jku))
        for entry in jwks["keys"]:
            if entry["kid"] == kid:
                return PyJWK(entry)
        raise KeyError(kid)  # not a PyJWTError: an unknown kid must fail loudly in a test

    return create_signature_verifier(key_provider, algorithms)


def protected_header(card: AgentCard, index: int = -1) -> dict[str, Any]:
    return json.loads(base64url_decode(card.signatures[index].protected.encode("ascii")))


def sign(key_set: JwksKeySet, card: AgentCard | None = None, jku: str = JKU) -> AgentCard:
    return JwksCardSigner(key_set, lambda: jku)(card or make_card())


def lenient_verifier(jwks: dict[str, Any], algorithms: list[str]) -> Callable[[AgentCard], None]:
    """Like :func:`verifier`, but an unknown kid is a failed signature (what a relying party sees)."""
    from jwt.exceptions import PyJWKError

    def key_provider(kid: str | None, _jku: str | None) -> PyJWK:
        for entry in jwks["keys"]:
            if entry["kid"] == kid:
                return PyJWK(entry)
        raise PyJWKError(f"unknown kid {kid}")

    return create_signature_verifier(key_provider, algorithms)


# --------------------------------------------------------------------------- sign and verify


@pytest.mark.parametrize("algorithm", ["ES256", "ES384", "EdDSA"])
def test_generated_key_signs_a_card_a2a_sdk_verifies(tmp_path: Path, algorithm: str) -> None:
    key_set = JwksKeySet(tmp_path, algorithm=algorithm)
    card = sign(key_set)
    assert len(card.signatures) == 1
    header = protected_header(card)
    assert header == {"alg": algorithm, "kid": key_set.active_kid, "typ": "JOSE", "jku": JKU}
    seen: list[tuple[str | None, str | None]] = []
    verifier(key_set.public_jwks(), [algorithm], seen)(card)
    assert seen == [(key_set.active_kid, JKU)]


def test_generated_rs256_key_is_3072_bit_and_verifies(tmp_path: Path) -> None:
    key_set = JwksKeySet(tmp_path, algorithm="RS256")
    key = key_set.active_key()
    assert key.get_op_key("verify").key_size == 3072
    assert key["alg"] == "RS256" and key["kid"] == key.thumbprint()
    card = sign(key_set)
    verifier(key_set.public_jwks(), ["RS256"])(card)


def test_tampered_card_does_not_verify(tmp_path: Path) -> None:
    key_set = JwksKeySet(tmp_path)
    card = sign(key_set)
    check = verifier(key_set.public_jwks(), ["ES256"])
    check(card)
    for tamper in (lambda c: setattr(c, "name", "evil"),
                   lambda c: c.skills[0].tags.append("admin"),
                   lambda c: setattr(c.supported_interfaces[0], "url", "https://evil.example/")):
        forged = AgentCard()
        forged.CopyFrom(card)
        tamper(forged)
        with pytest.raises(InvalidSignaturesError):
            check(forged)


def test_verifier_refuses_an_algorithm_it_was_not_given(tmp_path: Path) -> None:
    key_set = JwksKeySet(tmp_path)
    with pytest.raises(InvalidSignaturesError):
        verifier(key_set.public_jwks(), ["RS256"])(sign(key_set))


def test_key_of_another_server_does_not_verify(tmp_path: Path) -> None:
    mine, theirs = JwksKeySet(tmp_path / "a"), JwksKeySet(tmp_path / "b")
    jwks = {"keys": [{**theirs.public_jwks()["keys"][0], "kid": mine.active_kid}]}
    with pytest.raises(InvalidSignaturesError):
        verifier(jwks, ["ES256"])(sign(mine))


def test_jku_left_out_when_no_url_is_known(tmp_path: Path) -> None:
    key_set = JwksKeySet(tmp_path)
    card = sign(key_set, jku="")
    assert protected_header(card) == {"alg": "ES256", "kid": key_set.active_kid, "typ": "JOSE"}
    verifier(key_set.public_jwks(), ["ES256"])(card)


# --------------------------------------------------------------------------- key files


def write_private(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def test_rsa_pem_file_signs_rs256(tmp_path: Path, rsa_key: jwk.JWK) -> None:
    pem = write_private(tmp_path / "rsa.pem", rsa_key.export_to_pem(private_key=True, password=None))
    key_set = JwksKeySet(tmp_path / "state", key_files=[pem])
    assert key_set.active_kid == rsa_key.thumbprint()
    card = sign(key_set)
    assert protected_header(card)["alg"] == "RS256"
    verifier(key_set.public_jwks(), ["RS256"])(card)
    assert not (tmp_path / "state" / STORE_FILE).exists()  # the operator's files: nothing is stored


def test_signing_algorithm_ps256_applies_to_an_rsa_file(tmp_path: Path, rsa_key: jwk.JWK) -> None:
    pem = write_private(tmp_path / "rsa.pem", rsa_key.export_to_pem(private_key=True, password=None))
    key_set = JwksKeySet(tmp_path / "state", key_files=[pem], algorithm="PS256")
    card = sign(key_set)
    assert protected_header(card)["alg"] == "PS256"
    assert key_set.public_jwks()["keys"][0]["alg"] == "PS256"
    verifier(key_set.public_jwks(), ["PS256"])(card)
    with pytest.raises(InvalidSignaturesError):
        verifier(key_set.public_jwks(), ["RS256"])(card)


def test_ec_pem_file_infers_its_algorithm(tmp_path: Path) -> None:
    key = jwk.JWK.generate(kty="EC", crv="P-384")
    pem = write_private(tmp_path / "ec.pem", key.export_to_pem(private_key=True, password=None))
    key_set = JwksKeySet(tmp_path / "state", key_files=[str(pem)], algorithm="RS256")  # RS256 applies to RSA keys only
    card = sign(key_set)
    assert protected_header(card)["alg"] == "ES384"
    verifier(key_set.public_jwks(), ["ES384"])(card)


def test_jwk_file_keeps_its_kid_and_later_files_stay_published(tmp_path: Path, rsa_key: jwk.JWK) -> None:
    ed = jwk.JWK.generate(kty="OKP", crv="Ed25519", kid="operator-ed-1")
    first = write_private(tmp_path / "ed.jwk", ed.export_private().encode())
    second = write_private(tmp_path / "rsa.pem", rsa_key.export_to_pem(private_key=True, password=None))
    key_set = JwksKeySet(tmp_path / "state", key_files=[first, second])
    assert key_set.active_kid == "operator-ed-1"
    card = sign(key_set)
    assert protected_header(card)["alg"] == "EdDSA"
    jwks = key_set.public_jwks()
    assert [k["kid"] for k in jwks["keys"]] == ["operator-ed-1", rsa_key.thumbprint()]
    verifier(jwks, ["EdDSA"])(card)
    # A card signed earlier with the second file's key still verifies while it is listed.
    older = JwksKeySet(tmp_path / "state2", key_files=[second])
    verifier(jwks, ["RS256"])(sign(older))
    assert [(d["kid"], d["status"], d["retiredAt"]) for d in key_set.describe()] == [
        ("operator-ed-1", "active", None), (rsa_key.thumbprint(), "retired", None)]


def test_rotation_is_refused_with_key_files(tmp_path: Path) -> None:
    pem = write_private(tmp_path / "ec.pem", jwk.JWK.generate(kty="EC", crv="P-256").export_to_pem(
        private_key=True, password=None))
    clock = Clock()
    key_set = JwksKeySet(tmp_path / "state", key_files=[pem], rotate_days=1, clock=clock)
    kid = key_set.active_kid
    with pytest.raises(SigningKeyError) as caught:
        key_set.rotate()
    assert str(caught.value) == FILES_ROTATION_MESSAGE
    clock.advance(30)
    assert key_set.active_kid == kid  # no automatic rotation either


@pytest.mark.parametrize(("content", "message"), [
    (b"not a key", "is not an unencrypted PEM or JWK private key"),
    (b'{"kty": "oct", "k": "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}', "must be an asymmetric private key"),
    (b"PUBLIC", "holds a public key only"),
    (b"SMALL_RSA", "at least 2048 bits"),
    (b'{"kty": "EC", "crv": "P-256", "alg": "ES384", "x": "X", "y": "Y", "d": "D"}', "does not fit"),
])
def test_unusable_key_files_are_refused(tmp_path: Path, content: bytes, message: str) -> None:
    if content == b"PUBLIC":
        content = jwk.JWK.generate(kty="EC", crv="P-256").export_to_pem()
    elif content == b"SMALL_RSA":
        content = jwk.JWK.generate(kty="RSA", size=1024).export_to_pem(private_key=True, password=None)
    elif b'"x": "X"' in content:
        good = jwk.JWK.generate(kty="EC", crv="P-256").export_private(as_dict=True)
        content = json.dumps({**good, "alg": "ES384"}).encode()
    path = write_private(tmp_path / "key", content)
    with pytest.raises(SigningKeyError, match=message):
        JwksKeySet(tmp_path / "state", key_files=[path])


def test_missing_key_file_and_rsa_alg_conflict(tmp_path: Path, rsa_key: jwk.JWK) -> None:
    with pytest.raises(SigningKeyError, match="Cannot read signing key file"):
        JwksKeySet(tmp_path / "state", key_files=[tmp_path / "absent.pem"])
    declared = write_private(tmp_path / "rsa.jwk", json.dumps({**rsa_key.export_private(as_dict=True),
                                                               "alg": "RS256"}).encode())
    with pytest.raises(SigningKeyError, match="declares alg RS256 but signing-algorithm is PS256"):
        JwksKeySet(tmp_path / "state", key_files=[declared], algorithm="PS256")
    assert JwksKeySet(tmp_path / "state", key_files=[declared]).active_key()["alg"] == "RS256"


# --------------------------------------------------------------------------- the store


def test_store_is_owner_only_and_holds_the_keys(tmp_path: Path, clock: Clock) -> None:
    state = tmp_path / "state"
    key_set: SigningKeySet = JwksKeySet(state, clock=clock)  # the records.py protocol
    assert isinstance(key_set, JwksKeySet)
    path = state / STORE_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    document = json.loads(path.read_bytes())
    assert document["version"] == 1
    [entry] = document["keys"]
    assert entry["kid"] == jwk.JWK(**entry["jwk"]).thumbprint() == key_set.active_kid
    assert entry["alg"] == "ES256" and entry["createdAt"] == int(clock.now) and entry["retiredAt"] is None
    assert "d" in entry["jwk"]
    key_set.rotate()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not [p.name for p in state.iterdir() if p.name.endswith(".tmp")]
    # A second start uses the stored key instead of generating one.
    assert JwksKeySet(state, clock=clock).active_kid == key_set.active_kid


def test_public_jwks_and_describe_hold_no_private_material(tmp_path: Path, clock: Clock) -> None:
    key_set = JwksKeySet(tmp_path, algorithm="EdDSA", clock=clock)
    old = key_set.active_kid
    key_set.rotate()
    private_d = key_set.active_key()["d"]
    for entry in key_set.public_jwks()["keys"]:
        assert not set(PRIVATE_MEMBERS) & set(entry)
        assert entry["use"] == "sig" and entry["alg"] == "EdDSA"
    described = key_set.describe()
    assert [d["kid"] for d in described] == [key_set.active_kid, old]
    for item in described:
        assert set(item) == {"kid", "alg", "status", "createdAt", "retiredAt"}
    assert private_d not in json.dumps(described)
    assert described[0]["status"] == "active" and described[0]["retiredAt"] is None
    assert described[1] == {"kid": old, "alg": "EdDSA", "status": "retired", "createdAt": int(clock.now),
                            "retiredAt": int(clock.now)}


def test_rotation_grace_then_expiry(tmp_path: Path, clock: Clock) -> None:
    key_set = JwksKeySet(tmp_path, clock=clock, grace_days=7)
    old_card = sign(key_set, make_card("before"))
    old_kid = key_set.active_kid
    clock.advance(1)
    new_kid = key_set.rotate()
    assert new_kid != old_kid and key_set.active_kid == new_kid
    new_card = sign(key_set, make_card("after"))
    assert protected_header(new_card)["kid"] == new_kid

    # During the grace period both verify from the published JWKS.
    clock.advance(6.9)
    jwks = key_set.public_jwks()
    assert [k["kid"] for k in jwks["keys"]] == [new_kid, old_kid]
    verifier(jwks, ["ES256"])(old_card)
    verifier(jwks, ["ES256"])(new_card)

    # After it, the old key is gone from the JWKS (still in the store, reported expired, until the next write).
    clock.advance(0.2)
    jwks = key_set.public_jwks()
    assert [k["kid"] for k in jwks["keys"]] == [new_kid]
    with pytest.raises(InvalidSignaturesError):
        lenient_verifier(jwks, ["ES256"])(old_card)
    verifier(jwks, ["ES256"])(new_card)
    assert [(d["kid"], d["status"]) for d in key_set.describe()] == [(new_kid, "active"), (old_kid, "expired")]
    stored = [k["kid"] for k in json.loads((tmp_path / STORE_FILE).read_bytes())["keys"]]
    assert stored == [new_kid, old_kid]

    newest = key_set.rotate()
    stored = [k["kid"] for k in json.loads((tmp_path / STORE_FILE).read_bytes())["keys"]]
    assert stored == [newest, new_kid]
    assert [(d["kid"], d["status"]) for d in key_set.describe()] == [(newest, "active"), (new_kid, "retired")]


def test_zero_grace_drops_the_old_key_at_once(tmp_path: Path, clock: Clock) -> None:
    key_set = JwksKeySet(tmp_path, clock=clock, grace_days=0)
    key_set.rotate()
    assert [k["kid"] for k in key_set.public_jwks()["keys"]] == [key_set.active_kid]


def test_automatic_rotation_after_rotate_days(tmp_path: Path, clock: Clock) -> None:
    key_set = JwksKeySet(tmp_path, clock=clock, rotate_days=30, grace_days=2)
    first = key_set.active_kid
    clock.advance(29.99)
    assert key_set.active_kid == first
    clock.advance(0.02)
    second = key_set.active_kid
    assert second != first
    assert [(d["kid"], d["status"]) for d in key_set.describe()] == [(second, "active"), (first, "retired")]
    card = sign(key_set)
    assert protected_header(card)["kid"] == second
    clock.advance(29)
    assert key_set.active_kid == second
    clock.advance(1.01)
    third = key_set.active_kid
    assert third not in (first, second)
    stored = [k["kid"] for k in json.loads((tmp_path / STORE_FILE).read_bytes())["keys"]]
    assert stored == [third, second]  # the first expired (2-day grace) and was deleted at that write


def test_active_key_touches_no_disk_until_due(tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    key_set = JwksKeySet(tmp_path, clock=clock, rotate_days=1, refresh_interval=3600)
    calls: list[str] = []

    def counted(name: str) -> Callable[..., Any]:
        real = getattr(keys_module, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return real(*args, **kwargs)

        return call

    for name in ("_read_store", "_path_signature", "atomic_write"):
        monkeypatch.setattr(keys_module, name, counted(name))
    signer = JwksCardSigner(key_set, lambda: JKU)
    for _ in range(50):
        signer(make_card())
        key_set.active_key()
    assert calls == []
    clock.advance(1.01)
    key_set.active_key()
    assert "atomic_write" in calls


def test_failed_automatic_rotation_keeps_signing(tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    key_set = JwksKeySet(tmp_path, clock=clock, rotate_days=1)
    kid = key_set.active_kid

    def disk_full(*_args: Any, **_kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(keys_module, "atomic_write", disk_full)
    clock.advance(2)
    assert key_set.active_kid == kid
    verifier(key_set.public_jwks(), ["ES256"])(sign(key_set))
    monkeypatch.undo()
    clock.advance(0.01)  # the retry waits a minute
    assert key_set.active_kid != kid


def test_malformed_store_is_refused_not_replaced(tmp_path: Path) -> None:
    path = tmp_path / STORE_FILE
    write_private(path, b'{"version": 1, "keys": []}')
    with pytest.raises(SigningKeyError, match="exactly one active key"):
        JwksKeySet(tmp_path)
    write_private(path, b"{oops")
    with pytest.raises(SigningKeyError, match="not JSON"):
        JwksKeySet(tmp_path)
    assert path.read_bytes() == b"{oops"


def test_store_broken_while_running_keeps_the_loaded_keys(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    key_set = JwksKeySet(tmp_path, refresh_interval=0)
    kid = key_set.active_kid
    (tmp_path / STORE_FILE).write_bytes(b"{truncated")
    with caplog.at_level("WARNING"):
        for _ in range(3):
            assert key_set.active_kid == kid
    assert sum("Could not re-read" in r.message for r in caplog.records) == 1
    verifier(key_set.public_jwks(), ["ES256"])(sign(key_set))


def test_group_readable_store_is_restricted(tmp_path: Path) -> None:
    JwksKeySet(tmp_path)
    path = tmp_path / STORE_FILE
    path.chmod(0o644)
    JwksKeySet(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_configured_algorithm_applies_from_the_next_rotation(tmp_path: Path) -> None:
    first = JwksKeySet(tmp_path, algorithm="ES256")
    later = JwksKeySet(tmp_path, algorithm="EdDSA")
    assert later.active_kid == first.active_kid and later.active_key()["alg"] == "ES256"
    later.rotate()
    assert later.active_key()["alg"] == "EdDSA"


# --------------------------------------------------------------------------- several processes


def test_second_instance_adopts_a_rotation(tmp_path: Path, clock: Clock) -> None:
    server = JwksKeySet(tmp_path, clock=clock, refresh_interval=0)
    cli = JwksKeySet(tmp_path, clock=clock, refresh_interval=0)
    assert server.active_kid == cli.active_kid
    old_card = sign(server)
    new_kid = cli.rotate()
    assert server.active_kid == new_kid
    card = sign(server)
    assert protected_header(card)["kid"] == new_kid
    verifier(server.public_jwks(), ["ES256"])(card)
    verifier(server.public_jwks(), ["ES256"])(old_card)
    assert server.public_jwks() == cli.public_jwks()
    # And back: a rotation by the server keeps what the CLI wrote.
    newest = server.rotate()
    assert cli.active_kid == newest
    assert len(json.loads((tmp_path / STORE_FILE).read_bytes())["keys"]) == 3


def test_rotation_by_another_instance_is_seen_after_the_refresh_interval(tmp_path: Path, clock: Clock,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monotonic = [1000.0]
    monkeypatch.setattr(keys_module.time, "monotonic", lambda: monotonic[0])
    server = JwksKeySet(tmp_path, clock=clock, refresh_interval=2)
    server.active_key()
    old = server.active_kid
    new = JwksKeySet(tmp_path, clock=clock).rotate()
    assert server.active_kid == old  # looked at no sooner than every 2 s
    monotonic[0] += 2.5
    assert server.active_kid == new


def test_due_rotation_happens_once_for_two_instances(tmp_path: Path, clock: Clock) -> None:
    a = JwksKeySet(tmp_path, clock=clock, rotate_days=1, refresh_interval=3600)
    b = JwksKeySet(tmp_path, clock=clock, rotate_days=1, refresh_interval=3600)
    clock.advance(1.5)
    rotated = a.active_kid
    assert b.active_kid == rotated  # b found the store already rotated under the lock
    assert len(json.loads((tmp_path / STORE_FILE).read_bytes())["keys"]) == 2


def test_concurrent_rotations_by_processes_lose_no_key(tmp_path: Path) -> None:
    JwksKeySet(tmp_path)
    script = textwrap.dedent(f"""
        import sys
        from iac_code_signing_jwks.keys import JwksKeySet
        key_set = JwksKeySet({str(tmp_path)!r}, refresh_interval=3600)
        print(" ".join(key_set.rotate() for _ in range(5)))
    """)
    processes = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(3)]
    rotated = []
    for process in processes:
        out, _ = process.communicate(timeout=60)
        assert process.returncode == 0
        rotated += out.split()
    document = json.loads((tmp_path / STORE_FILE).read_bytes())
    stored = {entry["kid"] for entry in document["keys"]}
    assert set(rotated) <= stored and len(stored) == 16
    assert sum(entry["retiredAt"] is None for entry in document["keys"]) == 1


# --------------------------------------------------------------------------- the plugin


def kernel_stub(tmp_path: Path, *, card_signer: str = "jwks", interfaces: list[InterfaceInfo] | None = None,
                **settings: Any) -> SimpleNamespace:
    config = SimpleNamespace(**JwksSigningConfig(**settings).model_dump(), card_signer=card_signer)
    return SimpleNamespace(config=config, state_dir=tmp_path, interfaces=interfaces or [])


def test_plugin_registers_the_jwks_signer_and_its_keys(tmp_path: Path) -> None:
    plugins = make_kernel({"persistence-dir": str(tmp_path)}).plugins
    signers = plugins.card_signers()
    assert "jwks" in signers
    spec = signers["jwks"].record
    assert spec.create_signer is plugin.create_signer and spec.create_key_set is plugin.create_key_set
    models = {p.record for p in plugins.config_models()}
    assert JwksSigningConfig in models


def test_config_keys_parse_with_dashes_and_are_validated(tmp_path: Path) -> None:
    def configured(**settings: Any) -> Any:  # the effective settings, as the server parses them
        return make_kernel({"persistence-dir": str(tmp_path), **settings}).config

    config = configured(**{"signing-key-files": ["/k.pem"], "signing-algorithm": "eddsa", "signing-rotate-days": 30,
                           "signing-grace-days": 1.5, "signing-jwks-url": JKU})
    assert config.signing_key_files == ["/k.pem"] and config.signing_algorithm == "EdDSA"  # type: ignore[attr-defined]
    assert config.signing_rotate_days == 30 and config.signing_grace_days == 1.5  # type: ignore[attr-defined]
    defaults = configured()
    assert defaults.signing_key_files == [] and defaults.signing_algorithm == "ES256"  # type: ignore[attr-defined]
    assert defaults.signing_rotate_days == 0 and defaults.signing_grace_days == 7  # type: ignore[attr-defined]
    with pytest.raises(StartupError, match="must be one of ES256, ES384, RS256, PS256, EdDSA"):
        configured(**{"signing-algorithm": "HS256"})
    with pytest.raises(StartupError, match="signing-grace-days"):
        configured(**{"signing-grace-days": -1})
    with pytest.raises(StartupError, match="unknown configuration key 'signing-keyfiles'"):
        configured(**{"signing-keyfiles": []})
    for field in JwksSigningConfig.model_fields.values():
        assert field.description


def test_create_signer_only_for_card_signer_jwks(tmp_path: Path) -> None:
    assert plugin.create_signer(kernel_stub(tmp_path, card_signer="")) is None  # type: ignore[arg-type]
    assert plugin.create_signer(kernel_stub(tmp_path, card_signer="hmac")) is None  # type: ignore[arg-type]
    assert not (tmp_path / STORE_FILE).exists()
    assert plugin.create_signer(kernel_stub(tmp_path, card_signer="JWKS")) is not None  # type: ignore[arg-type]


def test_signer_computes_jku_from_the_interfaces_at_sign_time(tmp_path: Path) -> None:
    kernel = kernel_stub(tmp_path)
    signer = plugin.create_signer(kernel)  # type: ignore[arg-type]
    assert signer is not None
    assert "jku" not in protected_header(signer(make_card()))
    kernel.interfaces = [InterfaceInfo("127.0.0.1:50051", "GRPC"), InterfaceInfo("http://127.0.0.1:8080", "HTTP+JSON"),
                         InterfaceInfo("http://127.0.0.1:8080/", "JSONRPC")]
    card = signer(make_card())
    assert protected_header(card)["jku"] == "http://127.0.0.1:8080/.well-known/jwks.json"
    key_set = plugin.create_key_set(kernel.config, tmp_path)
    assert signer.current_kid() == key_set.active_kid == protected_header(card)["kid"]
    verifier(key_set.public_jwks(), ["ES256"])(card)

    configured = plugin.create_signer(kernel_stub(tmp_path, signing_jwks_url=JKU))  # type: ignore[arg-type]
    assert configured is not None
    assert protected_header(configured(make_card()))["jku"] == JKU


def test_create_key_set_is_shared_per_state_dir(tmp_path: Path) -> None:
    config = JwksSigningConfig()
    first = plugin.create_key_set(config, tmp_path)
    assert plugin.create_key_set({"signing-algorithm": "ES256"}, tmp_path / ".") is first
    assert plugin.create_key_set(config, tmp_path / "other") is not first


def test_create_key_set_reports_a_bad_key_file_as_a_startup_error(tmp_path: Path) -> None:
    with pytest.raises(StartupError, match="card-signer jwks: Cannot read signing key file"):
        plugin.create_key_set({"signing-key-files": [str(tmp_path / "absent.pem")]}, tmp_path)


def test_signer_caches_the_prepared_key_per_kid(tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    key_set = JwksKeySet(tmp_path, clock=clock)
    signer = JwksCardSigner(key_set, lambda: JKU)
    made: list[str] = []
    real = signer._make_signer

    def make_signer(entry: KeyEntry, jku: str) -> Callable[[AgentCard], AgentCard]:
        made.append(entry.kid)
        return real(entry, jku)

    monkeypatch.setattr(signer, "_make_signer", make_signer)
    for _ in range(5):
        signer(make_card())
    key_set.rotate()
    card = signer(make_card())
    assert made == [made[0], key_set.active_kid]
    verifier(key_set.public_jwks(), ["ES256"])(card)


async def test_served_card_verifies_against_the_served_jwks() -> None:
    async with start_server({"card-signer": "jwks", "signing-algorithm": "EdDSA"}) as server:
        async with aiohttp.ClientSession() as session:
            async with session.get(server.url + ".well-known/agent-card.json") as response:
                assert response.status == 200
                document = await response.json()
            header = json.loads(base64url_decode(document["signatures"][0]["protected"].encode("ascii")))
            assert header["jku"] == server.url + ".well-known/jwks.json" and header["alg"] == "EdDSA"
            async with session.get(header["jku"]) as response:
                assert response.status == 200
                jwks = await response.json()
        card = ParseDict(document, AgentCard(), ignore_unknown_fields=True)
        verifier(jwks, ["EdDSA"])(card)
        assert server.kernel.signing_keys is not None
        assert header["kid"] == server.kernel.signing_keys.active_key()["kid"]
