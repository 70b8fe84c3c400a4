"""A custom import-linter contract: these packages may import from a package only some of its modules.

import-linter's ``forbidden`` contract names what may not be imported, so "nothing of the kernel
but ``iac_code.api``" would have to list every other kernel module and be kept in step with the
kernel. ``api_only`` says it directly (configured in the root ``pyproject.toml``)::

    [[tool.importlinter.contracts]]
    name = "Plugins import from the kernel only iac_code.api"
    type = "api_only"
    importers = ["iac_code_transport_http", "..."]
    package = "iac_code"
    allowed = ["iac_code.api"]

Options: ``importers`` (module expressions; each matched module and its descendants are checked),
``package`` (the package whose modules are guarded), ``allowed`` (the modules of ``package`` that
may be imported, with their descendants), and as in the built-in contracts ``ignore_imports``,
``unmatched_ignore_imports_alerting`` and ``broken_contract_guidance``. Only direct imports count
(``TYPE_CHECKING`` ones included): that ``iac_code.api`` itself imports the kernel is the point.
"""

from __future__ import annotations

from typing import Any

import grimp
from importlinter import Contract, ContractCheck, fields, output
from importlinter.application import contract_utils
from importlinter.domain import helpers


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def illegal_imports(graph: grimp.ImportGraph, importers: set[str], package: str,
                    allowed: set[str]) -> list[dict[str, Any]]:
    """Each direct import from one of ``importers`` of a module in ``package`` that ``allowed`` does not cover."""
    found: list[dict[str, Any]] = []
    for importer in sorted(importers):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if _within(imported, package) and not any(_within(imported, a) for a in allowed):
                details = graph.get_import_details(importer=importer, imported=imported)
                found.append({"importer": importer, "imported": imported,
                              "line_numbers": tuple(d["line_number"] for d in details)})
    return found


class ApiOnlyContract(Contract):
    """``importers`` import from ``package`` only the ``allowed`` modules (see the module docstring)."""

    type_name = "api_only"

    importers = fields.ListField(subfield=fields.ModuleExpressionField())
    package = fields.ModuleField()
    allowed = fields.ListField(subfield=fields.ModuleField())
    ignore_imports = fields.SetField(subfield=fields.ImportExpressionField(), required=False)
    unmatched_ignore_imports_alerting = fields.EnumField(contract_utils.AlertLevel,
                                                         default=contract_utils.AlertLevel.ERROR)
    broken_contract_guidance = fields.TextField(required=False)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        removal = contract_utils.remove_ignored_imports_and_report(
            graph=graph, ignore_imports=self.ignore_imports,  # type: ignore[arg-type]
            unmatched_alerting=self.unmatched_ignore_imports_alerting)  # type: ignore[arg-type]
        importers = {module.name for module in helpers.module_expressions_to_modules(
            graph=graph, expressions=self.importers, as_packages=True, raise_if_unmatched=True)}  # type: ignore[arg-type]
        links = illegal_imports(graph, importers, self.package.name,  # type: ignore[attr-defined]
                                {module.name for module in self.allowed})  # type: ignore[attr-defined]
        return ContractCheck(kept=not links, warnings=list(removal.warnings),
                             ignored_import_count=removal.ignored_import_count, metadata={"illegal_imports": links})

    def render_broken_contract(self, check: ContractCheck) -> None:
        allowed = ", ".join(module.name for module in self.allowed)  # type: ignore[attr-defined]
        output.print_error(f"Only {allowed} may be imported from {self.package.name}:",  # type: ignore[attr-defined]
                           bold=False)
        output.new_line()
        for link in check.metadata["illegal_imports"]:
            lines = ", ".join(str(n) for n in link["line_numbers"])
            output.print_error(f"- {link['importer']} -> {link['imported']} (l.{lines})", bold=False)
            output.new_line()
        contract_utils.render_broken_contract_guidance(self.broken_contract_guidance)  # type: ignore[arg-type]
