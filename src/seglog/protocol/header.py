"""Request and response headers, and the decoded request the broker works on.

    request header v0   api_key int16, api_version int16, correlation_id int32
                   v1   + client_id nullable string, int16 length (never compact, so that any
                        broker reads the header of any ApiVersions request)
                   v2   + tagged fields
    response header v0  correlation_id int32
                    v1  + tagged fields

Flexible versions take request header v2 and response header v1; ApiVersions answers with
response header v0 whatever its version.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from seglog.protocol.api_key import ApiKey


class RequestHeader(NamedTuple):
    api_key: ApiKey
    api_version: int
    correlation_id: int
    client_id: str | None


class Request(NamedTuple):
    header: RequestHeader
    body: Any  # the API's request data class (message_data.py)
    size: int  # its bytes as they came, header and body (Kafka's sizeInBytes: what a produce quota counts)
