"""The entry point: the ``selling`` and ``selling_solution_first`` pipelines (``iac_code_pipelines``) and their
state endpoint (``iac_code_http_routes``).

The pipelines and the route share the journals of one server: the first pipeline built registers the store under
the kernel object it was built for, the other reuses it, and the route looks it up when a request comes.
"""

from __future__ import annotations

import weakref
from typing import Any

from pydantic import BaseModel

from iac_code.api import HttpRouteSpec, PipelineServices, PipelineSpec, PriceSourceSpec, hookimpl
from iac_code_pipeline_selling.backups import BackupConfig, config_problems
from iac_code_pipeline_selling.batching import BatchingPipeline, BatchSettings, PipelineBatchConfig
from iac_code_pipeline_selling.deploy_config import DeployConfig
from iac_code_pipeline_selling.deploy_config import check as check_deploy
from iac_code_pipeline_selling.journal import JournalStore
from iac_code_pipeline_selling.price_sources import PriceConfig, builtin_price_sources
from iac_code_pipeline_selling.reviewing import ReviewConfig
from iac_code_pipeline_selling.selling import PIPELINE_NAME, SellingPipeline
from iac_code_pipeline_selling.solution_first import PIPELINE_NAME as SOLUTION_FIRST_NAME
from iac_code_pipeline_selling.solution_first import SolutionFirstPipeline
from iac_code_pipeline_selling.state_route import state_handler

IAC_CODE_API_VERSION = "1.0"
STATE_PATH = "/iac-code/pipeline/state"

_stores: dict[int, tuple[weakref.ReferenceType[Any] | None, JournalStore]] = {}


def store_for(kernel: Any) -> JournalStore | None:
    """The journals of the pipeline built for ``kernel`` (``None`` before one was built)."""
    entry = _stores.get(id(kernel))
    if entry is None:
        return None
    ref, store = entry
    if ref is not None and ref() is not kernel:
        return None
    return store


def _register(kernel: Any, store: JournalStore) -> None:
    try:
        ref: weakref.ReferenceType[Any] | None = weakref.ref(kernel, lambda _: _stores.pop(id(kernel), None))
    except TypeError:
        ref = None
    _stores[id(kernel)] = (ref, store)


def shared_store(services: PipelineServices) -> JournalStore:
    """The journals of the server ``services`` belong to (made on first use; every pipeline of it shares them)."""
    store = store_for(services.context)
    if store is None:
        store = JournalStore(services.state_dir)
        _register(services.context, store)
    return store


def batching(pipeline: Any, services: PipelineServices) -> BatchingPipeline:
    """``pipeline`` publishing its events in batches, as the server's ``pipeline-batch-*`` settings say."""
    return BatchingPipeline(pipeline, BatchSettings.from_config(getattr(services.context, "config", None)))


def create_selling(services: PipelineServices) -> BatchingPipeline:
    """Build the ``selling`` pipeline for one server (its journals under ``state_dir/pipeline``, its events batched)."""
    return batching(SellingPipeline(services, shared_store(services)), services)


def create_solution_first(services: PipelineServices) -> BatchingPipeline:
    """Build the ``selling_solution_first`` pipeline for one server (same journals as ``selling``, events batched)."""
    return batching(SolutionFirstPipeline(services, shared_store(services)), services)


class PipelineSellingConfig(PipelineBatchConfig, BackupConfig, DeployConfig, PriceConfig, ReviewConfig):
    """Every key of the selling pipelines: event batching, critical backups, the deploy, prices and the
    reviewing sub-step."""


@hookimpl
def iac_code_config_model() -> type[BaseModel]:
    return PipelineSellingConfig


@hookimpl
def iac_code_check_config(config: Any) -> list[str]:
    return [*config_problems(config), *check_deploy(config)]


@hookimpl
def iac_code_price_sources() -> list[PriceSourceSpec]:
    return builtin_price_sources()


@hookimpl
def iac_code_pipelines() -> list[PipelineSpec]:
    return [PipelineSpec(name=PIPELINE_NAME, create=create_selling,
                         description="Requirement → candidate architectures (template, cost) → choice → deploy → chat.",
                         interrupts=True),
            PipelineSpec(name=SOLUTION_FIRST_NAME, create=create_solution_first,
                         description="Requirement → choice of a solution → its template, price and parameters "
                                     "confirmed → deploy → chat.", interrupts=True)]


@hookimpl
def iac_code_http_routes(kernel: Any) -> list[HttpRouteSpec]:
    return [HttpRouteSpec("GET", STATE_PATH, state_handler(kernel, lambda: store_for(kernel)), name="pipeline-state")]


__all__ = ["IAC_CODE_API_VERSION", "PipelineSellingConfig", "batching", "iac_code_check_config",
           "iac_code_config_model", "iac_code_http_routes", "iac_code_pipelines", "iac_code_price_sources",
           "shared_store", "store_for"]
