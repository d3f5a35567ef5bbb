"""Kafka's security model, sans-IO: who a connection is (principals), how it proves it (SASL
mechanisms, for the broker's and the client's side alike) and what it may do (ACLs).

The broker runs these over its connections and against its stores (ZooKeeper or its log dir);
the client runs the SASL mechanisms' client side. Nothing here opens a socket or a file.
"""

from .acl import (
    CLUSTER_NAME,
    OPERATIONS_NOT_REQUESTED,
    SUPPORTED_OPERATIONS,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    operations_field,
    parse_principal,
    validate_binding,
)
from .authorizer import AclAuthorizer
from .principal import ANONYMOUS, KafkaPrincipal

__all__ = [
    "ANONYMOUS",
    "CLUSTER_NAME",
    "OPERATIONS_NOT_REQUESTED",
    "SUPPORTED_OPERATIONS",
    "AccessControlEntry",
    "AclAuthorizer",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "KafkaPrincipal",
    "PatternType",
    "ResourcePattern",
    "ResourceType",
    "operations_field",
    "parse_principal",
    "validate_binding",
]
