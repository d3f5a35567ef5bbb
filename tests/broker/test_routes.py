"""The routing table: one handler per API, ranges cut to what the codec handles."""

from __future__ import annotations

from typing import Any

import pytest

from seglog.broker.routes import Route, routing_table, served_versions
from seglog.protocol import ApiKey, supported_versions


async def _handler(version: int, body: Any) -> Any:
    return None


def test_ranges_are_cut_to_what_the_protocol_package_handles() -> None:
    low, high = supported_versions(ApiKey.METADATA)
    table = routing_table({ApiKey.METADATA: Route(_handler, (low - 5 if low else 0, high + 50))})
    assert table[ApiKey.METADATA].versions == (low, high)
    assert served_versions(table) == {int(ApiKey.METADATA): (low, high)}


def test_an_api_without_a_schema_or_a_version_in_common_is_left_out() -> None:
    high = supported_versions(ApiKey.PRODUCE)[1]
    table = routing_table(
        {ApiKey.SASL_AUTHENTICATE: Route(_handler, (0, 2))},  # no schema declared
        {ApiKey.PRODUCE: Route(_handler, (high + 1, high + 3))},
    )
    assert table == {}


def test_an_api_two_modules_claim_is_refused() -> None:
    with pytest.raises(ValueError, match="FETCH is routed twice"):
        routing_table({ApiKey.FETCH: Route(_handler, (4, 16))}, {ApiKey.FETCH: Route(_handler, (4, 12))})
