"""Regenerate ``iac_code.pot`` from :mod:`iac_code.language.messages` and merge it into every ``.po`` catalog.

A developer tool, not part of any distribution: it rewrites the catalogs in
``core/iac_code/language/locales/`` of this repository.

Workflow for a new or changed user-visible text:

1. Add or edit an ``N_("...")`` constant in ``core/iac_code/language/messages.py``
   (English text, ``{name}`` placeholders; it is picked up by ``ALL_MESSAGES``).
2. Run ``uv run python tools/update_catalogs.py``. It rewrites
   ``locales/iac_code.pot`` and merges it into each
   ``locales/<lang>/LC_MESSAGES/iac_code.po`` with Babel's ``Catalog.update``:
   new ids get an empty ``msgstr`` (untranslated); an id whose English text
   changed keeps its old translation flagged ``fuzzy`` (with the old id as
   ``#| msgid``) when Babel finds a close match; ids no longer in messages.py
   are dropped. Empty and fuzzy entries are not used at run time (the English
   text is shown). The script prints what each catalog still needs.
3. Translate the empty entries and review the fuzzy ones (then delete the
   ``fuzzy`` flag). Keep every ``{placeholder}`` exactly as in the msgid.
4. ``uv run pytest -q tests/test_i18n.py`` fails while any id lacks a
   translation in any language or a translation's placeholders differ.

``--check`` writes nothing and exits 1 when a file is out of date (for CI).
Files are only rewritten when their content changes, so the dates in the
headers do not churn. Only ``.po`` files ship: :mod:`iac_code.language.i18n` compiles
them in memory at first use.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from io import BytesIO
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po

from iac_code.language import messages
from iac_code.language.i18n import DEFAULT_LANGUAGE, DOMAIN, SUPPORTED, placeholders

LOCALES = Path(__file__).resolve().parent.parent / "core" / "iac_code" / "language" / "locales"
TEMPLATE = LOCALES / f"{DOMAIN}.pot"
HEADER = "# Messages of the iac-code A2A server.\n# Generated from core/iac_code/language/messages.py by tools/update_catalogs.py."
PROJECT = "iac-code"


def catalog_path(language: str) -> Path:
    return LOCALES / language / "LC_MESSAGES" / f"{DOMAIN}.po"


def build_template() -> Catalog:
    names: dict[str, list[str]] = {}
    for name, value in vars(messages).items():
        if name.isupper() and isinstance(value, str):
            names.setdefault(value, []).append(name)
    template = Catalog(domain=DOMAIN, project=PROJECT, header_comment=HEADER, charset="utf-8")
    for message_id in messages.ALL_MESSAGES:
        singular = message_id[0] if isinstance(message_id, tuple) else message_id
        fields = placeholders(singular)
        template.add(message_id, auto_comments=sorted(names.get(singular, [])),
                     flags=("python-brace-format",) if fields else ())
    return template


def render(catalog: Catalog) -> bytes:
    buffer = BytesIO()
    write_po(buffer, catalog, width=100, ignore_obsolete=True, include_previous=True)
    return buffer.getvalue()


def read(path: Path, language: str | None = None) -> Catalog:
    with path.open("rb") as fp:
        return read_po(fp, locale=language, domain=DOMAIN)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a catalog is out of date")
    args = parser.parse_args(argv)

    template = build_template()
    if TEMPLATE.exists():  # keep the previous creation date while the template is unchanged
        template.creation_date = read(TEMPLATE).creation_date
        if render(template) != TEMPLATE.read_bytes():
            template.creation_date = datetime.datetime.now(datetime.UTC)
    outputs = {TEMPLATE: render(template)}

    for language in SUPPORTED:
        if language == DEFAULT_LANGUAGE:
            continue
        path = catalog_path(language)
        if path.exists():
            catalog = read(path, language)
        else:
            catalog = Catalog(locale=language, domain=DOMAIN, project=PROJECT, header_comment=HEADER,
                              charset="utf-8")
        catalog.update(template)
        outputs[path] = render(catalog)
        messages_ = list(catalog)[1:]
        untranslated = sum(1 for m in messages_ if not (all(m.string) if isinstance(m.string, tuple) else m.string))
        fuzzy = sum(1 for m in messages_ if m.fuzzy)
        print(f"{language}: {len(messages_)} messages, {untranslated} untranslated, {fuzzy} fuzzy")

    stale = [path for path, data in outputs.items() if not path.exists() or path.read_bytes() != data]
    for path in stale:
        if args.check:
            print(f"out of date: {path.relative_to(LOCALES)}")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(outputs[path])
            print(f"wrote {path.relative_to(LOCALES)}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
