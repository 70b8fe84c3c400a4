"""Per-turn translation of the server's user-visible texts.

The English source texts live in :mod:`iac_code.language.messages` (gettext msgids with
``{name}`` placeholders). Each other language has a gettext catalog,
``locales/<lang>/LC_MESSAGES/iac_code.po``, read with Babel and compiled in
memory the first time that language is used (then cached for the process).
Only ``.po`` files ship; the repository's developer tool ``tools/update_catalogs.py``
regenerates the template and merges new ids into the catalogs.

There is no global locale: a turn asks :func:`translator` for its language and
passes the :class:`Translator` (or its language) along, so concurrent turns in
different languages never affect each other.

Placeholders are filled with :meth:`str.format` *after* translation. A
translation whose placeholders differ from its msgid's is dropped when the
catalog loads, and formatting never raises: when the translated text cannot be
formatted with the given values the English text is formatted instead, and when
that fails too the raw English text is returned.
"""

from __future__ import annotations

import functools
import gettext
import logging
import string
from collections.abc import Iterable, Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from io import BytesIO

from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.support import Translations

logger = logging.getLogger(__name__)

SUPPORTED = ("en", "zh", "es", "fr", "de", "ja", "pt")
DEFAULT_LANGUAGE = "en"
DOMAIN = "iac_code"

_FORMATTER = string.Formatter()


def placeholders(text: str) -> frozenset[str] | None:
    """The ``{name}`` fields of a format string; ``None`` when it is malformed."""
    try:
        return frozenset(field for _, field, _, _ in _FORMATTER.parse(text) if field is not None)
    except ValueError:
        return None


class Translator:
    """Renders msgids from :mod:`iac_code.language.messages` in one language.

    ``t(m.PERMISSION_PROMPT, title=...)`` translates, then fills placeholders.
    Immutable and safe to share between tasks and threads.
    """

    __slots__ = ("language", "_translations")

    def __init__(self, language: str, translations: gettext.NullTranslations) -> None:
        self.language = language
        self._translations = translations

    def __call__(self, message: str, /, **values: object) -> str:
        return _render(self._translations.gettext(message), message, values, self.language)

    def ngettext(self, singular: str, plural: str, n: int, /, **values: object) -> str:
        """The plural form for ``n`` (pass ``n`` in ``values`` too if the text shows it)."""
        english = singular if n == 1 else plural
        return _render(self._translations.ngettext(singular, plural, n), english, values, self.language)

    def __repr__(self) -> str:
        return f"Translator({self.language!r})"


def translator(language: str | None) -> Translator:
    """The translator for a (normalised) language code; unknown or ``None`` → English."""
    return _translator_for(language if language in SUPPORTED else DEFAULT_LANGUAGE)


@functools.lru_cache(maxsize=len(SUPPORTED))  # keys are SUPPORTED only
def _translator_for(language: str) -> Translator:
    return Translator(language, _load(language))


# --------------------------------------------------------------------------- catalogs


def catalog_resource(language: str) -> Traversable:
    """Where the ``.po`` catalog of ``language`` ships inside the package."""
    return resources.files("iac_code.language").joinpath("locales", language, "LC_MESSAGES", f"{DOMAIN}.po")


def _load(language: str) -> gettext.NullTranslations:
    if language == DEFAULT_LANGUAGE:
        return gettext.NullTranslations()
    try:
        with catalog_resource(language).open("rb") as fp:
            catalog = read_po(fp, locale=language, domain=DOMAIN)
        return build_translations(catalog, language)
    except Exception:  # a broken catalog must not break turns: fall back to English
        logger.exception("Message catalog for %r could not be loaded; using English", language)
        return gettext.NullTranslations()


def build_translations(catalog: Catalog, language: str) -> gettext.NullTranslations:
    """Compile a Babel catalog in memory, without its unusable entries.

    Fuzzy and untranslated entries are left out (English is shown), and so is
    any translation whose placeholders differ from its msgid's (for plurals:
    a form may only use placeholders of the singular or plural msgid).
    """
    for message in list(catalog)[1:]:
        if not message.id or not message.string:
            continue
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        expected = [placeholders(i) for i in ids]
        if any(e is None for e in expected):
            logger.warning("Catalog %r: msgid %r is not a valid format string", language, ids[0])
            message.string = _empty(message.string)
            continue
        allowed = frozenset().union(*expected)
        for text in strings:
            if not text:
                continue
            found = placeholders(text)
            if found is None or (found != expected[0] if len(ids) == 1 else not found <= allowed):
                logger.warning("Catalog %r: translation of %r has other placeholders than its msgid; "
                               "using English", language, ids[0])
                message.string = _empty(message.string)
                break
    buffer = BytesIO()
    write_mo(buffer, catalog, use_fuzzy=False)
    buffer.seek(0)
    return Translations(buffer, domain=DOMAIN)


def _empty(value: str | Iterable[str]) -> str | tuple[str, ...]:
    return "" if isinstance(value, str) else tuple("" for _ in value)


# --------------------------------------------------------------------------- formatting


def _render(text: str, english: str, values: Mapping[str, object], language: str) -> str:
    """``text`` formatted with ``values``; else the English text formatted; else the raw English."""
    try:
        return text.format(**values)
    except Exception:  # unknown/missing placeholder, bad format spec, a value whose __format__ fails
        _warn_unformattable(language, english)
    if text != english:
        try:
            return english.format(**values)
        except Exception:
            pass
    return english


@functools.lru_cache(maxsize=512)
def _warn_unformattable(language: str, english: str) -> None:
    """Log once per (language, msgid); values are never logged."""
    logger.warning("Message %r could not be formatted in %r; falling back to English", english, language)
