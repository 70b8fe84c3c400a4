"""The plugin module, registered under the ``iac_code`` entry-point group as ``csv``."""

from __future__ import annotations

from iac_code.api import HttpRouteSpec, PartDecoderSpec, RouterSpec, hookimpl
from iac_code_example_csv import decoder, preview, router

IAC_CODE_API_VERSION = "1.0"


@hookimpl
def iac_code_part_decoders() -> list[PartDecoderSpec]:
    return [
        PartDecoderSpec(name="csv", kind="text", media_types=(decoder.MEDIA_TYPE,), decode=decoder.decode),
        PartDecoderSpec(name="csv-raw", kind="raw", media_types=(decoder.MEDIA_TYPE,), decode=decoder.decode),
    ]


@hookimpl
def iac_code_routers() -> list[RouterSpec]:
    return [RouterSpec(name="csv", rank=router.rank, description="Prompts about CSV go to routes tagged csv.")]


@hookimpl
def iac_code_http_routes() -> list[HttpRouteSpec]:
    return [HttpRouteSpec("POST", "/csv/preview", preview.handle, name="csv-preview")]
