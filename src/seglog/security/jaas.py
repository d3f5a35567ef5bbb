"""``sasl.jaas.config``: one JAAS login module as Kafka's ``JaasConfig`` reads it.

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

A module's class name, its control flag (required, requisite, sufficient, optional), options
``name=value`` (a value quoted with ``"`` or a bare word), and a closing ``;``. The options hold
passwords: no error names a value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import InvalidConfigurationError

_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<word>[^\s=;"]+)|(?P<punct>[=;]))', re.S)

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class LoginModule:
    name: str
    flag: str
    options: dict[str, str] = field(repr=False)  # passwords: never printed


def parse_jaas_config(text: str, key: str = "sasl.jaas.config") -> LoginModule:
    """The one login module of ``text``; InvalidConfigurationError naming ``key`` otherwise."""
    tokens = _tokens(text, key)
    modules: list[LoginModule] = []
    while tokens:
        modules.append(_module(tokens, key))
    if len(modules) != 1:
        raise InvalidConfigurationError(
            f"{key}: JAAS config property contains {len(modules)} login modules, should be 1 module"
        )
    return modules[0]


def _tokens(text: str, key: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    position, text = 0, text.rstrip()
    while position < len(text):
        m = _TOKEN.match(text, position)
        if m is None:
            raise InvalidConfigurationError(f"{key}: not a JAAS login module (an unterminated quote?)")
        position = m.end()
        kind = m.lastgroup
        assert kind is not None
        value = m[kind]
        if kind == "quoted":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        out.append((kind, value))
    return out


def _module(tokens: list[tuple[str, str]], key: str) -> LoginModule:
    def take() -> tuple[str, str]:
        if not tokens:
            raise InvalidConfigurationError(f"{key}: a JAAS login module must end with ';'")
        return tokens.pop(0)

    kind, name = take()
    if kind != "word":
        raise InvalidConfigurationError(f"{key}: a JAAS login module starts with its class name")
    kind, flag = take()
    if kind != "word" or flag.lower() not in _FLAGS:
        raise InvalidConfigurationError(f"{key}: login module {name}'s control flag must be one of {', '.join(_FLAGS)}")
    options: dict[str, str] = {}
    while True:
        kind, option = take()
        if kind == "punct" and option == ";":
            return LoginModule(name, flag.lower(), options)
        if kind != "word":
            raise InvalidConfigurationError(f"{key}: login module {name}: an option must be name=value")
        if take() != ("punct", "="):
            raise InvalidConfigurationError(f"{key}: login module {name}: option {option} has no '='")
        kind, value = take()
        if kind not in ("word", "quoted"):
            raise InvalidConfigurationError(f"{key}: login module {name}: option {option} has no value")
        options[option] = value
