"""Message catalogs: every id translated in every language, safe formatting, no bleeding between turns."""

from __future__ import annotations

import asyncio
import gettext
import importlib.util
import logging
from pathlib import Path
from types import ModuleType

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po

from iac_code.language import i18n
from iac_code.language import messages as m
from iac_code.language.i18n import SUPPORTED, Translator, build_translations, placeholders, translator

LANGUAGES = [language for language in SUPPORTED if language != "en"]
UPDATE_CATALOGS = Path(__file__).resolve().parent.parent / "tools" / "update_catalogs.py"


def catalog(language: str) -> Catalog:
    with i18n.catalog_resource(language).open("rb") as fp:
        return read_po(fp, locale=language, domain=i18n.DOMAIN)


def sample_values(message: str) -> dict[str, str]:
    return {name: f"<{name}>" for name in placeholders(message) or ()}


# --------------------------------------------------------------------------- the catalogs


def test_supported_languages() -> None:
    assert SUPPORTED == ("en", "zh", "es", "fr", "de", "ja", "pt")
    assert len(set(m.ALL_MESSAGES)) == len(m.ALL_MESSAGES) > 0


def test_every_msgid_is_a_valid_format_string() -> None:
    for message in m.ALL_MESSAGES:
        assert placeholders(message) is not None, message
        assert message.format(**sample_values(message))


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_message_is_translated(language: str) -> None:
    entries = catalog(language)
    missing = [message for message in m.ALL_MESSAGES
               if (entry := entries.get(message)) is None or not entry.string.strip() or entry.fuzzy]
    assert not missing, f"{language}: untranslated or fuzzy: {missing}"
    stale = [entry.id for entry in list(entries)[1:] if entry.id not in m.ALL_MESSAGES]
    assert not stale, f"{language}: ids no longer in messages.py (run tools/update_catalogs.py): {stale}"


@pytest.mark.parametrize("language", LANGUAGES)
def test_translations_keep_exactly_the_placeholders(language: str) -> None:
    for entry in list(catalog(language))[1:]:
        found = placeholders(entry.string)
        assert found is not None, f"{language}: malformed format string {entry.string!r}"
        assert found == placeholders(entry.id), f"{language}: {entry.id!r} -> {entry.string!r}"


@pytest.mark.parametrize("language", SUPPORTED)
def test_every_message_renders_with_its_values(language: str) -> None:
    t = translator(language)
    for message in m.ALL_MESSAGES:
        values = sample_values(message)
        text = t(message, **values)
        assert text.strip()
        assert "{" not in text and "}" not in text, (language, text)
        for shown in values.values():
            assert shown in text, (language, message, text)


def _update_catalogs() -> ModuleType:
    """The developer tool ``tools/update_catalogs.py`` (not part of any distribution), imported by its path."""
    spec = importlib.util.spec_from_file_location("update_catalogs", UPDATE_CATALOGS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_catalogs_are_up_to_date_with_messages(capsys: pytest.CaptureFixture[str]) -> None:
    update_catalogs = _update_catalogs()
    assert update_catalogs.main(["--check"]) == 0, capsys.readouterr().out
    template = update_catalogs.TEMPLATE
    assert template.exists() and template.parent == Path(i18n.__file__).parent / "locales"


# --------------------------------------------------------------------------- translator()


def test_chinese_translates_and_fills_placeholders() -> None:
    t = translator("zh")
    assert t.language == "zh"
    assert t(m.TASK_CANCELED) == "任务已取消。"
    title = t(m.TITLE_CREATE_STACK, product="ROS")
    assert title == "创建 ROS 资源栈"
    assert t(m.PERMISSION_PROMPT, title=title, target="ros CreateStack") == "创建 ROS 资源栈（ros CreateStack）？"
    assert t(m.TARGET_IN_REGION, operation="ros CreateStack", region="cn-hangzhou") == "cn-hangzhou 地域的 ros CreateStack"


@pytest.mark.parametrize("language", LANGUAGES)
def test_each_language_translates(language: str) -> None:
    t = translator(language)
    assert t.language == language
    assert t(m.OPTION_DENY) != m.OPTION_DENY
    assert t(m.TASK_CANCELED) != m.TASK_CANCELED


@pytest.mark.parametrize("language", [None, "", "xx", "zh-CN", "ZH", "english", 42])
def test_unknown_or_missing_language_is_english(language: object) -> None:
    t = translator(language)  # type: ignore[arg-type]
    assert t.language == "en"
    assert t(m.TASK_CANCELED) == m.TASK_CANCELED
    assert t(m.TITLE_RUN_TOOL, tool="bash") == "Run bash"


def test_english_returns_the_msgid() -> None:
    t = translator("en")
    for message in m.ALL_MESSAGES:
        assert t(message, **sample_values(message)) == message.format(**sample_values(message))
    assert t("Not in any catalog {x}", x=1) == "Not in any catalog 1"


def test_translators_are_cached_per_language() -> None:
    assert translator("ja") is translator("ja")
    assert translator(None) is translator("en") is translator("xx")


def test_values_are_inserted_after_translation() -> None:
    # A value that looks like a msgid or a format string is shown verbatim, never translated or expanded.
    t = translator("de")
    assert t(m.TITLE_RUN_TOOL, tool=m.TASK_CANCELED) == f"{m.TASK_CANCELED} ausführen"
    assert t(m.TITLE_RUN_TOOL, tool="{tool}") == "{tool} ausführen"
    assert t(m.TARGET_COMMAND, target="x", command="echo {HOME}") == "x; Befehl: echo {HOME}"


async def test_concurrent_turns_in_different_languages_do_not_bleed() -> None:
    async def turn(language: str) -> list[str]:
        t = translator(language)
        seen = []
        for message in m.ALL_MESSAGES:
            await asyncio.sleep(0)  # interleave with the other turns
            seen.append(t(message, **sample_values(message)))
        return seen

    languages = list(SUPPORTED) * 3
    results = await asyncio.gather(*(turn(language) for language in languages))
    for language, seen in zip(languages, results, strict=True):
        t = translator(language)
        assert seen == [t(message, **sample_values(message)) for message in m.ALL_MESSAGES]
    assert results[SUPPORTED.index("zh")] != results[SUPPORTED.index("fr")] != results[SUPPORTED.index("en")]
    zh = results[SUPPORTED.index("zh")][m.ALL_MESSAGES.index(m.TASK_CANCELED)]
    fr = results[SUPPORTED.index("fr")][m.ALL_MESSAGES.index(m.TASK_CANCELED)]
    assert (zh, fr) == ("任务已取消。", "Tâche annulée.")


# --------------------------------------------------------------------------- safe fallbacks


class FixedTranslations(gettext.NullTranslations):
    """Returns the same (possibly broken) translation for every id, bypassing catalog checks."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def gettext(self, message: str) -> str:
        return self.text

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        return self.text


class Unformattable:
    def __format__(self, spec: str) -> str:
        raise RuntimeError("boom")


@pytest.mark.parametrize("broken", ["{titel} erlauben?", "{title erlauben?", "{title} {extra}", "{title!z}",
                                    "{title:%Q}", "{0}", "{}", "title}"])
def test_broken_translation_falls_back_to_english(broken: str) -> None:
    t = Translator("de", FixedTranslations(broken))
    assert t(m.PROMPT_WRITE_FILE, file="a.yaml") == "Write a.yaml in the workspace?"
    assert t.ngettext(m.PROMPT_WRITE_FILE, "Write {file} twice?", 2, file="a.yaml") == "Write a.yaml twice?"


def test_missing_values_fall_back_to_the_raw_english_text() -> None:
    assert translator("zh")(m.PROMPT_WRITE_FILE) == m.PROMPT_WRITE_FILE
    assert translator("fr")(m.TARGET_STACK, target="t") == m.TARGET_STACK
    assert translator("en")(m.TARGET_STACK, stack="s") == m.TARGET_STACK
    assert translator("ja")(m.TITLE_RUN_TOOL, tool=Unformattable()) == m.TITLE_RUN_TOOL
    # Extra values are ignored, as str.format does.
    assert translator("es")(m.TASK_CANCELED, unused=1) == "Tarea cancelada."


def test_catalog_entries_with_other_placeholders_are_dropped_at_load() -> None:
    test_catalog = Catalog(locale="de", domain=i18n.DOMAIN, fuzzy=False)
    test_catalog.add(m.TITLE_RUN_TOOL, "{tool} ausführen")
    test_catalog.add(m.TITLE_DELETE_STACK, "{produkt}-Stack löschen")  # renamed
    test_catalog.add(m.PROMPT_WRITE_FILE, "Eine Datei schreiben?")  # placeholder lost
    test_catalog.add(m.TARGET_IN_REGION, "{operation} in {region} ({extra})")  # extra placeholder
    test_catalog.add(m.TITLE_CLOUD_RUN, "{operation.__class__}")  # attribute access
    test_catalog.add(m.TITLE_CREATE_STACK, "{product")  # malformed
    test_catalog.add(m.OPTION_DENY, "Ablehnen", flags=["fuzzy"])  # not reviewed
    test_catalog.add(m.TASK_CANCELED, "")  # untranslated
    t = Translator("de", build_translations(test_catalog, "de"))

    assert t(m.TITLE_RUN_TOOL, tool="grep") == "grep ausführen"
    assert t(m.TITLE_DELETE_STACK, product="ROS") == "Delete ROS stack"
    assert t(m.PROMPT_WRITE_FILE, file="X") == "Write X in the workspace?"
    assert t(m.TARGET_IN_REGION, operation="o", region="r", extra="e") == "o in r"
    assert t(m.TITLE_CLOUD_RUN, operation="ecs Describe") == "Run ecs Describe"
    assert t(m.TITLE_CREATE_STACK, product="ROS") == "Create ROS stack"
    assert t(m.OPTION_DENY) == "Deny"
    assert t(m.TASK_CANCELED) == "Task canceled."


def test_plural_forms() -> None:
    test_catalog = Catalog(locale="de", domain=i18n.DOMAIN, fuzzy=False)
    test_catalog.add(("{count} vSwitch", "{count} vSwitches"), ("{count} vSwitch", "{count} vSwitches (de)"))
    test_catalog.add(("one file", "{count} files"), ("eine Datei", "{count} Dateien"))
    test_catalog.add(("{count} zone", "{count} zones"), ("{count} Zone", "{anzahl} Zonen"))  # dropped
    t = Translator("de", build_translations(test_catalog, "de"))

    assert t.ngettext("{count} vSwitch", "{count} vSwitches", 1, count=1) == "1 vSwitch"
    assert t.ngettext("{count} vSwitch", "{count} vSwitches", 3, count=3) == "3 vSwitches (de)"
    assert t.ngettext("one file", "{count} files", 1, count=1) == "eine Datei"
    assert t.ngettext("one file", "{count} files", 2, count=2) == "2 Dateien"
    assert t.ngettext("{count} zone", "{count} zones", 2, count=2) == "2 zones"
    assert t.ngettext("{count} zone", "{count} zones", 2) == "{count} zones"

    english = translator("en")
    assert english.ngettext("{count} vSwitch", "{count} vSwitches", 1, count=1) == "1 vSwitch"
    assert english.ngettext("{count} vSwitch", "{count} vSwitches", 0, count=0) == "0 vSwitches"
    zh = translator("zh")  # an id not in the catalog: English rules
    assert zh.ngettext("{count} vSwitch", "{count} vSwitches", 2, count=2) == "2 vSwitches"


def test_an_unreadable_catalog_means_english(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(i18n, "catalog_resource", lambda language: tmp_path / "missing.po")
    with caplog.at_level(logging.ERROR, logger="iac_code.language.i18n"):
        translations = i18n._load("zh")
    assert Translator("zh", translations)(m.TASK_CANCELED) == m.TASK_CANCELED
    assert "could not be loaded" in caplog.text
