"""DescribeAcls, CreateAcls and DeleteAcls, as Kafka's ``AclApis`` answers them.

Describing ACLs needs Describe on the cluster, changing them Alter on the cluster
(CLUSTER_AUTHORIZATION_FAILED otherwise); a broker without an authorizer answers
SECURITY_DISABLED. A binding or filter the broker cannot take (an UNKNOWN or filter-only value,
an empty name, a Cluster not named kafka-cluster) fails alone with INVALID_REQUEST.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TypeVar

from ..errors import ErrorCode, SeglogError
from ..protocol import ApiKey
from ..protocol.message_data import (
    CreateAclsRequestData,
    CreateAclsResponseData,
    DeleteAclsRequestData,
    DeleteAclsResponseData,
    DescribeAclsRequestData,
    DescribeAclsResponseData,
)
from ..security import acl
from .acl_authorizer import BrokerAuthorizer
from .routes import Route, Routes

E = TypeVar("E", bound=IntEnum)
NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _enum(cls: type[E], code: int) -> E:
    """A wire code as the enum's member; one the enum lacks as its UNKNOWN (0)."""
    try:
        return cls(code)
    except ValueError:
        return cls(0)


def _filter(f: DescribeAclsRequestData | DeleteAclsRequestData.DeleteAclsFilter) -> acl.AclBindingFilter:
    selected = acl.AclBindingFilter(
        _enum(acl.ResourceType, f.resource_type_filter),
        f.resource_name_filter,
        _enum(acl.PatternType, f.pattern_type_filter),
        f.principal_filter,
        f.host_filter,
        _enum(acl.AclOperation, f.operation),
        _enum(acl.AclPermissionType, f.permission_type),
    )
    selected.validate()
    return selected


class AclApis:
    def __init__(self, authorizer: BrokerAuthorizer) -> None:
        self.authorizer = authorizer

    def routes(self) -> Routes:
        return {
            ApiKey.DESCRIBE_ACLS: Route(self.describe_acls, (0, 3)),
            ApiKey.CREATE_ACLS: Route(self.create_acls, (0, 3)),
            ApiKey.DELETE_ACLS: Route(self.delete_acls, (0, 3)),
        }

    def _refusal(self, operation: acl.AclOperation) -> tuple[ErrorCode, str] | None:
        """Why the request may not describe or change ACLs, if it may not."""
        if not self.authorizer.enabled:
            return ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER
        if not self.authorizer.authorize_cluster(operation):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
        return None

    async def describe_acls(self, version: int, body: DescribeAclsRequestData) -> DescribeAclsResponseData:
        refused = self._refusal(acl.AclOperation.DESCRIBE)
        if refused is not None:
            return DescribeAclsResponseData(error_code=refused[0], error_message=refused[1])
        try:
            bindings = self.authorizer.describe(_filter(body))
        except SeglogError as e:
            return DescribeAclsResponseData(error_code=e.error_code, error_message=e.message)
        by_pattern: dict[acl.ResourcePattern, list[DescribeAclsResponseData.AclDescription]] = {}
        for pattern, entry in sorted(bindings):
            by_pattern.setdefault(pattern, []).append(
                DescribeAclsResponseData.AclDescription(
                    principal=str(entry.principal),
                    host=entry.host,
                    operation=entry.operation,
                    permission_type=entry.permission_type,
                )
            )
        return DescribeAclsResponseData(
            error_message=None,
            resources=[
                DescribeAclsResponseData.DescribeAclsResource(
                    resource_type=p.resource_type, resource_name=p.name, pattern_type=p.pattern_type, acls=acls
                )
                for p, acls in by_pattern.items()
            ],
        )

    async def create_acls(self, version: int, body: CreateAclsRequestData) -> CreateAclsResponseData:
        refused = self._refusal(acl.AclOperation.ALTER)
        if refused is not None:
            return CreateAclsResponseData(
                results=[
                    CreateAclsResponseData.AclCreationResult(error_code=refused[0], error_message=refused[1])
                    for _ in body.creations
                ]
            )
        bindings: list[acl.AclBinding | SeglogError] = []
        for c in body.creations:
            try:
                pattern_type = _enum(acl.PatternType, c.resource_pattern_type)
                pattern = acl.ResourcePattern(_enum(acl.ResourceType, c.resource_type), c.resource_name, pattern_type)
                entry = acl.AccessControlEntry(
                    acl.parse_principal(c.principal),
                    c.host,
                    _enum(acl.AclOperation, c.operation),
                    _enum(acl.AclPermissionType, c.permission_type),
                )
                bindings.append(acl.AclBinding(pattern, entry))
            except SeglogError as e:
                bindings.append(e)
        valid = [b for b in bindings if isinstance(b, acl.AclBinding)]
        errors = iter(await self.authorizer.create(valid))
        results = []
        for b in bindings:
            error = b if isinstance(b, SeglogError) else next(errors)
            results.append(
                CreateAclsResponseData.AclCreationResult(
                    error_code=ErrorCode.NONE if error is None else error.error_code,
                    error_message=None if error is None else error.message,
                )
            )
        return CreateAclsResponseData(results=results)

    async def delete_acls(self, version: int, body: DeleteAclsRequestData) -> DeleteAclsResponseData:
        refused = self._refusal(acl.AclOperation.ALTER)
        if refused is not None:
            return DeleteAclsResponseData(
                filter_results=[
                    DeleteAclsResponseData.DeleteAclsFilterResult(
                        error_code=refused[0], error_message=refused[1], matching_acls=[]
                    )
                    for _ in body.filters
                ]
            )
        filters: list[acl.AclBindingFilter | SeglogError] = []
        for f in body.filters:
            try:
                filters.append(_filter(f))
            except SeglogError as e:
                filters.append(e)
        matched = iter(await self.authorizer.delete([f for f in filters if isinstance(f, acl.AclBindingFilter)]))
        results = []
        for selected in filters:
            if isinstance(selected, SeglogError):
                results.append(
                    DeleteAclsResponseData.DeleteAclsFilterResult(
                        error_code=selected.error_code, error_message=selected.message, matching_acls=[]
                    )
                )
                continue
            results.append(
                DeleteAclsResponseData.DeleteAclsFilterResult(
                    error_message=None, matching_acls=[_deleted(b) for b in sorted(next(matched))]
                )
            )
        return DeleteAclsResponseData(filter_results=results)


def _deleted(binding: acl.AclBinding) -> DeleteAclsResponseData.DeleteAclsMatchingAcl:
    pattern, entry = binding
    return DeleteAclsResponseData.DeleteAclsMatchingAcl(
        error_message=None,
        resource_type=pattern.resource_type,
        resource_name=pattern.name,
        pattern_type=pattern.pattern_type,
        principal=str(entry.principal),
        host=entry.host,
        operation=entry.operation,
        permission_type=entry.permission_type,
    )
