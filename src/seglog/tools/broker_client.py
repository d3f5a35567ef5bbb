"""A small blocking Kafka client over ``seglog.protocol``, for the command line's
``--bootstrap-server`` forms: one connection to one broker, each request sent at the
highest version both sides speak (learnt with ApiVersions), its answer decoded."""

from __future__ import annotations

import socket
import struct
from typing import Any

from ..errors import BrokerNotAvailableError, InvalidResponseError, SeglogError, error_for
from ..protocol import ApiKey, decode_response, encode_request, supported_versions

_SIZE = struct.Struct(">i")
_MAX_RESPONSE = 1 << 30


class BrokerClient:
    def __init__(
        self, bootstrap: str, timeout: float = 30.0, client_id: str = "seglog-cli", source_host: str | None = None
    ) -> None:
        self.address = bootstrap.split(",")[0].strip()
        host, sep, port = self.address.rpartition(":")
        if not sep or not port.isdigit():
            raise BrokerNotAvailableError(f"--bootstrap-server {bootstrap!r} is not HOST:PORT")
        try:
            source = (source_host, 0) if source_host is not None else None  # a test cuts others, not this one
            self._sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout, source_address=source)
        except OSError as e:
            raise BrokerNotAvailableError(f"cannot connect to {self.address}: {e.strerror or e}") from None
        self._client_id = client_id
        self._correlation = 0
        versions = self._call(ApiKey.API_VERSIONS, 0, {})
        if versions["error_code"]:
            raise error_for(versions["error_code"], what=f"{self.address} refused ApiVersions")
        self.versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in versions["api_keys"]}

    def version(self, api_key: ApiKey) -> int:
        theirs = self.versions.get(int(api_key))
        if theirs is None:
            raise SeglogError(f"the broker at {self.address} does not serve {api_key.name}")
        ours = supported_versions(api_key)
        high = min(theirs[1], ours[1])
        if high < max(theirs[0], ours[0]):
            raise SeglogError(f"no {api_key.name} version in common with the broker at {self.address}")
        return high

    def request(self, api_key: ApiKey, body: dict[str, Any], version: int | None = None) -> dict[str, Any]:
        return self._call(api_key, self.version(api_key) if version is None else version, body)

    def send_only(self, api_key: ApiKey, body: dict[str, Any]) -> None:
        """A request the broker does not answer (Produce with acks=0)."""
        self._send(api_key, self.version(api_key), body)

    def _send(self, api_key: ApiKey, version: int, body: dict[str, Any]) -> int:
        self._correlation += 1
        parts = encode_request(api_key, version, self._correlation, self._client_id, body)
        try:
            self._sock.sendall(b"".join(bytes(p) if not isinstance(p, bytes | bytearray) else p for p in parts))
        except OSError as e:
            raise BrokerNotAvailableError(f"lost the connection to {self.address}: {e.strerror or e}") from None
        return self._correlation

    def _call(self, api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        correlation = self._send(api_key, version, body)
        size = _SIZE.unpack(self._read(4))[0]
        if not 4 <= size <= _MAX_RESPONSE:
            raise InvalidResponseError(f"response size {size} from {self.address} is out of range")
        frame = self._read(size)
        if _SIZE.unpack_from(frame)[0] != correlation:
            raise InvalidResponseError(f"{self.address} answered another request than {api_key.name}")
        return decode_response(api_key, version, frame)

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            try:
                chunk = self._sock.recv(min(n - len(out), 1 << 20))
            except OSError as e:
                raise BrokerNotAvailableError(f"lost the connection to {self.address}: {e.strerror or e}") from None
            if not chunk:
                raise BrokerNotAvailableError(f"{self.address} closed the connection")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> BrokerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
