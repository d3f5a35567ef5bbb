"""A connection from this broker to another, on the event loop: Kafka's ``BlockingSend`` for
the replica fetchers and the AlterPartition channel.

One request at a time, each at the highest version both sides speak (learnt with
ApiVersions when the connection opens, capped by the caller), answered within
``timeout_s``. Any failure closes the connection and raises ``BrokerNotAvailableError``;
the caller backs off and the next request connects again.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from ..errors import BrokerNotAvailableError, InvalidResponseError, SeglogError, error_for
from ..protocol import ApiKey, decode_response, encode_request, supported_versions

_SIZE = struct.Struct(">i")
_MAX_RESPONSE = 1 << 30


class BrokerConnection:
    def __init__(self, host: str, port: int, client_id: str, timeout_s: float) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._versions: dict[int, tuple[int, int]] = {}
        self._correlation = 0
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port})"

    async def request(self, api_key: ApiKey, body: dict[str, Any], max_version: int | None = None) -> tuple[int, dict]:
        """Send ``body`` and return (version used, decoded response)."""
        async with self._lock:
            try:
                if self._writer is None:
                    await asyncio.wait_for(self._connect(), self.timeout_s)
                version = self._version(api_key, max_version)
                return version, await asyncio.wait_for(self._call(api_key, version, body), self.timeout_s)
            except (TimeoutError, OSError, asyncio.IncompleteReadError, SeglogError) as e:
                self.close()
                raise BrokerNotAvailableError(
                    f"request {api_key.name} to {self.host}:{self.port} failed: {e}"
                ) from None

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def _connect(self) -> None:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        answer = await self._call(ApiKey.API_VERSIONS, 0, {})
        if answer["error_code"]:
            raise error_for(answer["error_code"], what=f"{self.host}:{self.port} refused ApiVersions")
        self._versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]}

    def _version(self, api_key: ApiKey, max_version: int | None) -> int:
        theirs = self._versions.get(int(api_key))
        if theirs is None:
            raise BrokerNotAvailableError(f"{self.host}:{self.port} does not serve {api_key.name}")
        low, high = supported_versions(api_key)
        high = min(high, theirs[1], high if max_version is None else max_version)
        if high < max(low, theirs[0]):
            raise BrokerNotAvailableError(f"no {api_key.name} version in common with {self.host}:{self.port}")
        return high

    async def _call(self, api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        assert self._reader is not None and self._writer is not None
        self._correlation += 1
        parts = encode_request(api_key, version, self._correlation, self.client_id, body)
        self._writer.writelines(p if isinstance(p, bytes | bytearray) else bytes(p) for p in parts)
        await self._writer.drain()
        size = _SIZE.unpack(await self._reader.readexactly(4))[0]
        if not 4 <= size <= _MAX_RESPONSE:
            raise InvalidResponseError(f"response size {size} from {self.host}:{self.port} is out of range")
        frame = await self._reader.readexactly(size)
        if _SIZE.unpack_from(frame)[0] != self._correlation:
            raise InvalidResponseError(f"{self.host}:{self.port} answered another request than {api_key.name}")
        return decode_response(api_key, version, frame)
