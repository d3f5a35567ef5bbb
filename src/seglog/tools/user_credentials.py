"""``seglog configs --entity-type users``: SCRAM credentials as ``kafka-configs.sh`` alters and
describes them over ``--bootstrap-server`` (Kafka 3.x: AlterUserScramCredentials and
DescribeUserScramCredentials, KIP-554).

    --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=...]'
    --alter --delete-config SCRAM-SHA-512
    --describe

The password is salted here, as Kafka's admin client does: the broker receives the salt and the
salted password, never the password.
"""

from __future__ import annotations

import argparse
import secrets

from ..client import ClusterClient, check
from ..errors import InvalidConfigurationError
from ..protocol import ApiKey
from ..protocol.message_data import (
    AlterUserScramCredentialsRequestData,
    AlterUserScramCredentialsResponseData,
    DescribeUserScramCredentialsRequestData,
    DescribeUserScramCredentialsResponseData,
)
from ..security.scram import MECHANISMS, MECHANISMS_BY_ID, MIN_ITERATIONS
from .arguments import UsageError, parse_configs

SALT_BYTES = 32


def user_configs(args: argparse.Namespace, client: ClusterClient) -> int:
    user = args.entity_name
    if args.describe:
        return _describe(client, user)
    Request = AlterUserScramCredentialsRequestData
    upsertions = [_upsertion(user, mechanism, value) for mechanism, value in parse_configs(args.add_config).items()]
    deletions = [
        Request.ScramCredentialDeletion(name=user, mechanism=_mechanism_id(m.strip()))
        for item in args.delete_config or []
        for m in item.split(",")
        if m.strip()
    ]
    if not upsertions and not deletions:
        raise UsageError("--alter needs --add-config or --delete-config")
    request = Request(deletions=deletions, upsertions=upsertions)
    altered: AlterUserScramCredentialsResponseData = client.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, request)
    for r in altered.results:
        check(r.error_code, f"cannot alter the SCRAM credentials of user {r.user}", r.error_message)
    print(f"Completed updating config for user {user}.")
    return 0


def _mechanism_id(name: str) -> int:
    mechanism = MECHANISMS.get(name.upper())
    if mechanism is None:
        raise UsageError(
            f"{name}: seglog configs --entity-type users alters SCRAM credentials only ({', '.join(MECHANISMS)})"
        )
    return mechanism.mechanism_id


def _upsertion(user: str, name: str, value: str) -> AlterUserScramCredentialsRequestData.ScramCredentialUpsertion:
    """``[iterations=N,]password=P`` as the salted credential the request carries."""
    mechanism = MECHANISMS_BY_ID[_mechanism_id(name)]
    options = dict(part.partition("=")[::2] for part in value.split(","))
    password = options.get("password")
    if not password:
        raise UsageError(f"{name}: a SCRAM credential needs password=... (e.g. {name}=[password=secret])")
    try:
        iterations = int(options.get("iterations", MIN_ITERATIONS))
    except ValueError:
        raise InvalidConfigurationError(f"{name}: iterations must be a number") from None
    salt = secrets.token_bytes(SALT_BYTES)
    return AlterUserScramCredentialsRequestData.ScramCredentialUpsertion(
        name=user,
        mechanism=mechanism.mechanism_id,
        iterations=iterations,
        salt=salt,
        salted_password=mechanism.salted_password(password, salt, iterations),
    )


def _describe(client: ClusterClient, user: str) -> int:
    request = DescribeUserScramCredentialsRequestData(
        users=[DescribeUserScramCredentialsRequestData.UserName(name=user)]
    )
    found: DescribeUserScramCredentialsResponseData = client.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, request)
    check(found.error_code, "cannot describe SCRAM credentials", found.error_message)
    for r in found.results:
        if r.error_code:  # a user without credentials: nothing to show, as kafka-configs.sh shows nothing
            continue
        credentials = ", ".join(
            f"{MECHANISMS_BY_ID[c.mechanism].name}=iterations={c.iterations}"
            for c in r.credential_infos
            if c.mechanism in MECHANISMS_BY_ID
        )
        print(f"SCRAM credential configs for user-principal '{r.user}' are {credentials}")
    return 0
