"""TLS on a listener: its ``SSLContext`` from Kafka's ``ssl.*`` keys, the transport a connection
reads and writes through, and client certificates mapped to principals.

Keys (each also as ``listener.name.<listener>.<key>``, which wins for that listener), in their
PEM forms as Kafka's ``DefaultSslEngineFactory`` reads them:

    ssl.keystore.type=PEM   ssl.keystore.location: a file of the private key and its chain, or
                            ssl.keystore.certificate.chain + ssl.keystore.key: the same as text;
                            ssl.key.password when the key is encrypted
    ssl.truststore.type=PEM ssl.truststore.location or ssl.truststore.certificates: the CAs that
                            client certificates are checked against
    ssl.client.auth         none | requested | required
    ssl.enabled.protocols   TLSv1.2,TLSv1.3     ssl.cipher.suites: TLS 1.2 suites, Kafka's
                            (IANA) names or OpenSSL's
    ssl.principal.mapping.rules: DEFAULT, or RULE:pattern/replacement/[LU] rules

Secrets (passwords, key and certificate text) appear in no message: a key's value is named by
its key only.

TLS runs on memory BIOs (``_TlsSocket``): ciphertext is read from the kernel up to 256 KiB
at a time and decrypted in memory, and a connection's read takes all the records it holds
(a large produce request costs no turn of the loop per 16 KiB record); what TLS writes
leaves with one send per buffer (an SSLSocket makes two reads a record and one write a
record: against it, 13 % less broker CPU per MiB fetched and 28 % less per record
produced, medians of 3 alternated runs). A fetch's file regions cannot go with sendfile
(the kernel does not encrypt), so each is read with ``os.preadv`` into one buffer the
listener's connections share (a send is synchronous: no two use it at once), together
with the bytes around it, and encrypted a buffer at a time; the ciphertext the socket
does not take at once waits in the connection and goes first when there is room.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import re
import socket
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from ..config import BrokerConfig
from ..errors import InvalidConfigurationError
from ..security import ANONYMOUS, KafkaPrincipal
from .network import FileRegion

log = logging.getLogger(__name__)

# bytes filled per send: 8 TLS records of 16 KiB (32 KiB and 512 KiB measured no better, within
# this machine's noise: bench/broker.py --only tls)
SEND_BUFFER = 128 * 1024
RECEIVE_BUFFER = 256 * 1024  # ciphertext taken from the kernel in one read: 16 TLS records
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
# Kafka names cipher suites as IANA does, OpenSSL its own way: the TLS 1.2 AEAD suites in use
_IANA_CIPHERS = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
}
# TLS 1.3's suites, which OpenSSL always offers with TLS 1.3 (Python cannot narrow them)
_TLS13_CIPHERS = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"})


# --- the SSLContext of a listener ---------------------------------------------------------------


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The server side of TLS on ``listener``, from its ssl.* keys; an InvalidConfigurationError
    naming the key (never its value) when one is wrong."""
    keys = _ListenerKeys(config, listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.options |= ssl.OP_NO_RENEGOTIATION  # a client's renegotiation would stall a non-blocking send
    versions = sorted(_VERSIONS[v] for v in keys.value("ssl.enabled.protocols"))
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    _load_keystore(context, keys)
    context.verify_mode = _CLIENT_AUTH[keys.value("ssl.client.auth")]
    if context.verify_mode != ssl.CERT_NONE:
        _load_truststore(context, keys)
    suites = keys.value("ssl.cipher.suites")
    if suites:
        _set_ciphers(context, keys, suites)
    return context


class _ListenerKeys:
    """The ssl.* keys of one listener: each its listener's own value, else the broker-wide one,
    with the name of the key that gave it (errors name that key)."""

    def __init__(self, config: BrokerConfig, listener: str) -> None:
        self.config = config
        self.listener = listener

    def key(self, name: str) -> str:
        return self.config.listener_key(self.listener, name)

    def value(self, name: str) -> Any:
        return self.config[self.key(name)]


def _load_keystore(context: ssl.SSLContext, keys: _ListenerKeys) -> None:
    location = keys.value("ssl.keystore.location")
    chain, key = keys.value("ssl.keystore.certificate.chain"), keys.value("ssl.keystore.key")
    store_type = keys.value("ssl.keystore.type")
    if location is None and chain is None and key is None:
        raise InvalidConfigurationError(
            f"listener {keys.listener} is an SSL listener without a keystore: set {keys.key('ssl.keystore.location')}"
            f" (or {keys.key('ssl.keystore.certificate.chain')} and {keys.key('ssl.keystore.key')}), PEM"
        )
    if store_type != "PEM":
        raise InvalidConfigurationError(
            f"{keys.key('ssl.keystore.type')} is {store_type}: seglog reads PEM keystores only (ssl.keystore.type=PEM)"
        )
    password = keys.value("ssl.key.password")
    if location is not None:
        if chain is not None or key is not None:
            raise InvalidConfigurationError(
                f"{keys.key('ssl.keystore.location')} and {keys.key('ssl.keystore.certificate.chain')}/"
                f"{keys.key('ssl.keystore.key')} are both set: give the keystore one way"
            )
        _check_readable(keys.key("ssl.keystore.location"), location)
        _load_cert_chain(context, keys, location, None, password)
        return
    for name, text in (("ssl.keystore.certificate.chain", chain), ("ssl.keystore.key", key)):
        if not text:
            raise InvalidConfigurationError(f"{keys.key(name)} is not set: a PEM keystore given as text needs both")
    # load_cert_chain reads files only: the text goes through a private directory, gone at once
    with tempfile.TemporaryDirectory(prefix="seglog-tls-") as private:
        chain_file, key_file = os.path.join(private, "chain.pem"), os.path.join(private, "key.pem")
        for path, text in ((chain_file, chain), (key_file, key)):
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="ascii") as f:
                f.write(text)
        _load_cert_chain(context, keys, chain_file, key_file, password)


def _load_cert_chain(
    context: ssl.SSLContext, keys: _ListenerKeys, chain_file: str, key_file: str | None, password: str | None
) -> None:
    where = keys.key("ssl.keystore.location" if key_file is None else "ssl.keystore.key")
    try:
        # a password always (b"" for none): without one OpenSSL would prompt on the terminal
        context.load_cert_chain(chain_file, key_file, password=(password or "").encode())
    except ssl.SSLError as e:
        if _is_encrypted(key_file or chain_file):  # OpenSSL says only "PEM lib" of a wrong password
            raise InvalidConfigurationError(
                f"the private key of {where} does not decrypt with {keys.key('ssl.key.password')}"
                if password
                else f"the private key of {where} is encrypted: set {keys.key('ssl.key.password')}"
            ) from None
        raise InvalidConfigurationError(
            f"{where} does not hold a PEM private key and its certificate chain ({e.reason or 'unreadable'})"
        ) from None


def _is_encrypted(path: str) -> bool:
    """Whether the PEM file holds an encrypted private key (PKCS#8's ENCRYPTED PRIVATE KEY, or
    the traditional form's Proc-Type: 4,ENCRYPTED header)."""
    with open(path, "rb") as f:
        return b"ENCRYPTED" in f.read()


def _load_truststore(context: ssl.SSLContext, keys: _ListenerKeys) -> None:
    location, certificates = keys.value("ssl.truststore.location"), keys.value("ssl.truststore.certificates")
    if location is None and certificates is None:
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)  # the system's CAs, as Kafka takes the JVM's
        return
    store_type = keys.value("ssl.truststore.type")
    if store_type != "PEM":
        raise InvalidConfigurationError(
            f"{keys.key('ssl.truststore.type')} is {store_type}: seglog reads PEM truststores only "
            "(ssl.truststore.type=PEM)"
        )
    where = keys.key("ssl.truststore.location" if location is not None else "ssl.truststore.certificates")
    try:
        if location is not None:
            _check_readable(where, location)
            context.load_verify_locations(cafile=location)
        else:
            context.load_verify_locations(cadata=certificates)
    except (ssl.SSLError, ValueError) as e:
        reason = e.reason if isinstance(e, ssl.SSLError) else None
        raise InvalidConfigurationError(f"{where} holds no PEM certificates ({reason or 'unreadable'})") from None


def _check_readable(key: str, path: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        raise InvalidConfigurationError(f"{key}: cannot read {path}: {e.strerror}", file=path) from None


def _set_ciphers(context: ssl.SSLContext, keys: _ListenerKeys, suites: tuple[str, ...]) -> None:
    names = [_IANA_CIPHERS.get(s, s) for s in suites if s not in _TLS13_CIPHERS]
    if not names:  # TLS 1.3's only: OpenSSL offers them whatever this says
        return
    try:
        context.set_ciphers(":".join(names))
    except ssl.SSLError:
        raise InvalidConfigurationError(
            f"{keys.key('ssl.cipher.suites')}: none of {', '.join(suites)} is a cipher suite OpenSSL knows"
        ) from None


# --- client certificates to principals ------------------------------------------------------------

# one rule of ssl.principal.mapping.rules (Kafka's SslPrincipalMapper): DEFAULT, or
# RULE:pattern/replacement/ with an optional L or U (lower or upper case the result)
_RULE = re.compile(
    r"\s*(?:(?P<default>DEFAULT)"
    r"|RULE:(?P<pattern>(?:\\.|[^\\/])*)/(?P<replacement>(?:\\.|[^\\/])*)/(?P<case>[LU]?))"
    r"\s*(?:,|$)"
)


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT, the name as it is
    replacement: str
    case: str

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        # Java's replaceAll: every match replaced, $n a group, \\c the character c
        result = self.pattern.sub(lambda m: _java_replacement(self.replacement, m), name)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


def _java_replacement(replacement: str, match: re.Match[str]) -> str:
    out, i = [], 0
    while i < len(replacement):
        ch = replacement[i]
        if ch == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif ch == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            out.append(match.group(int(replacement[i + 1])) or "")
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class PrincipalMapper:
    """``ssl.principal.mapping.rules``: a certificate's distinguished name (RFC 2253, as Java's
    ``X500Principal.getName()`` gives it) to a principal's name, by the first rule that applies."""

    def __init__(self, rules: str, key: str = "ssl.principal.mapping.rules") -> None:
        self.rules = _parse_rules(rules, key)

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            found = rule.apply(distinguished_name)
            if found is not None:
                return found
        raise ValueError(f"no rule of ssl.principal.mapping.rules applies to {distinguished_name!r}")


def _parse_rules(text: str, key: str) -> list[_Rule]:
    rules: list[_Rule] = []
    position = 0
    while position < len(text.rstrip()):
        m = _RULE.match(text, position)
        if m is None or m.end() == position:
            raise InvalidConfigurationError(f"{key}: invalid rule at {text[position:].strip()!r}")
        position = m.end()
        if m["default"]:
            rules.append(_Rule(None, "", ""))
            continue
        try:
            pattern = re.compile(m["pattern"])
        except re.error as e:
            raise InvalidConfigurationError(
                f"{key}: pattern {m['pattern']!r} is not a regular expression: {e}"
            ) from None
        rules.append(_Rule(pattern, m["replacement"], m["case"]))
    return rules or [_Rule(None, "", "")]  # an empty list is DEFAULT, as Kafka's


# RFC 2253's short names of attribute types (Java's X500Principal prints these as keywords)
_ATTRIBUTE_NAMES = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def distinguished_name(subject: tuple[tuple[tuple[str, str], ...], ...]) -> str:
    """A certificate's subject (``getpeercert()['subject']``, most significant RDN first) as
    RFC 2253 writes it: least significant first, ``+`` inside a multi-valued RDN, special
    characters escaped (``CN=client,OU=eng,O=Example\\, Inc.,C=US``)."""
    return ",".join(
        "+".join(f"{_ATTRIBUTE_NAMES.get(kind, kind)}={_escape(value)}" for kind, value in rdn)
        for rdn in reversed(subject)
    )


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


# --- a connection's transport ---------------------------------------------------------------------


class _Rest(NamedTuple):
    """The part of a file region a send has not taken yet."""

    handle: Any
    position: int
    size: int


class _TlsSocket(socket.socket):
    """A connection's socket as network.py reads it, with TLS on memory BIOs (an ``SSLObject``):
    ``recv_into`` and ``recv`` give plaintext, decrypted in memory from ciphertext taken from
    the kernel in one read of up to RECEIVE_BUFFER bytes (an SSLSocket makes two reads a 16 KiB
    record: 0.85-1.0 ms of CPU a MiB received against 0.66 here), and what TLS writes leaves
    with one send a buffer, not one a record (0.55-0.61 ms a MiB sent against 0.49)."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, ciphertext: memoryview) -> None:
        super().__init__(sock.family, sock.type, sock.proto, fileno=sock.detach())
        self.setblocking(False)
        self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._ciphertext = ciphertext  # the listener's: a read copies it into the BIO at once
        self._unsent: memoryview | None = None  # ciphertext the kernel did not take yet
        # the last read filled its buffer, and TLS may hold more (after the handshake, too: the
        # client's first request may have come with its last flight); else the kernel was
        # emptied and signals what comes next
        self._more = True

    def recv_into(self, buffer: Any, nbytes: int | None = None, flags: int = 0) -> int:
        """Plaintext into ``buffer``: all TLS has now, up to its size; BlockingIOError when it has none."""
        view = memoryview(buffer).cast("B")[: nbytes or None]
        n = 0
        self._more = False
        try:
            while n < len(view):
                try:
                    got = cast(int, self.tls.read(len(view) - n, view[n:]))  # into a buffer: a count
                except ssl.SSLWantReadError:
                    if self.receive_ciphertext():
                        continue
                    if n:
                        return n
                    raise BlockingIOError(errno.EAGAIN, "no TLS record to read") from None
                except ssl.SSLEOFError:  # the stream ended without the client's close_notify
                    if n:  # what came before the end first
                        return n
                    raise
                if got == 0:  # the client's close_notify: the end of the stream
                    return n
                n += got
            self._more = True
            return n
        finally:
            if self._outgoing.pending:  # TLS's own answers to what it read (a key update)
                self.flush()

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        buffer = bytearray(bufsize)
        return bytes(buffer[: self.recv_into(buffer)])

    def receive_ciphertext(self) -> bool:
        """Ciphertext from the kernel into TLS's incoming BIO (the end of the stream marked at
        its end); False when the socket has none now."""
        try:
            n = super().recv_into(self._ciphertext)
        except (BlockingIOError, InterruptedError):
            return False
        if n:
            self._incoming.write(self._ciphertext[:n])
        else:
            self._incoming.write_eof()
        return True

    def pending(self) -> int:
        """Bytes TLS holds that no read took yet, decrypted or not, when the kernel will not
        signal them (a partial record waits for the rest, which it signals)."""
        return (self.tls.pending() or self._incoming.pending) if self._more else 0

    def flush(self) -> bool:
        """What TLS wrote, to the kernel; False when the socket is full and some waits."""
        while True:
            if self._unsent is None:
                if not self._outgoing.pending:
                    return True
                self._unsent = memoryview(self._outgoing.read())
            try:
                sent = super().send(self._unsent)
            except (BlockingIOError, InterruptedError):
                return False
            self._unsent = self._unsent[sent:] if sent < len(self._unsent) else None


# a part that asks for nothing but the ciphertext TLS holds to be sent
_FLUSH = b""


class TlsTransport:
    """What a connection of an SSL listener reads and writes through: its socket (network.py
    reads it as it reads a plain one), the handshake, and ``write``."""

    def __init__(
        self,
        sock: socket.socket,
        context: ssl.SSLContext,
        mapper: PrincipalMapper,
        buffer: memoryview,
        ciphertext: memoryview,
    ) -> None:
        self.sock = _TlsSocket(sock, context, ciphertext)
        self._mapper = mapper
        self._buffer = buffer  # plaintext to send: the listener's, as ``ciphertext`` is

    async def handshake(self, peer: str) -> KafkaPrincipal | None:
        """The TLS handshake, waiting for the socket as it needs; the principal of the client's
        certificate (ANONYMOUS without one), or None when the handshake failed (logged: the
        connection is to be closed)."""
        loop = asyncio.get_running_loop()
        sock = self.sock
        try:
            while True:
                try:
                    sock.tls.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    await self._flush(loop)
                    while not sock.receive_ciphertext():
                        await _ready(loop, sock.fileno(), writing=False)
            await self._flush(loop)  # its last flight (TLS 1.3's session tickets)
            return self._principal()
        except (OSError, ValueError) as e:  # ssl.SSLError is an OSError; ValueError: no mapping rule applies
            log.info("failed authentication with %s (SSL handshake failed): %s", peer, e)
            with contextlib.suppress(OSError):
                sock.flush()  # TLS's alert, if the socket takes it now: the client learns why
            return None

    async def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        while not self.sock.flush():
            await _ready(loop, self.sock.fileno(), writing=True)

    def _principal(self) -> KafkaPrincipal:
        certificate = self.sock.tls.getpeercert()
        if not certificate:
            return ANONYMOUS
        subject = cast(tuple[tuple[tuple[str, str], ...], ...], certificate["subject"])
        return KafkaPrincipal("User", self._mapper.name(distinguished_name(subject)))

    def pending(self) -> int:
        return self.sock.pending()

    def write(self, parts: list[Any]) -> list[Any]:
        """As much of ``parts`` (bytes, file regions) as the socket takes now, encrypted a
        buffer at a time; what is left, to write once there is room (the ciphertext of a
        buffer the socket took only part of waits in the socket, flushed first)."""
        sock = self.sock
        if not sock.flush():
            return parts
        while parts:
            data, parts = self._fill(parts)
            if data:
                sock.tls.write(data)
            if not sock.flush():
                return parts or [_FLUSH]
        return []

    def _fill(self, parts: list[Any]) -> tuple[memoryview, list[Any]]:
        """The next bytes to send, from the head of ``parts``: a large bytes part as it is,
        else the shared buffer filled with bytes and file regions; and the parts after them."""
        buffer, fill = self._buffer, 0
        for i, part in enumerate(parts):
            room = len(buffer) - fill
            if isinstance(part, bytes | bytearray | memoryview):
                data = memoryview(part).cast("B")
                if fill == 0 and len(data) >= room:
                    return data, parts[i + 1 :]
                n = min(len(data), room)
                buffer[fill : fill + n] = data[:n]
                fill += n
                if n < len(data):
                    return buffer[:fill], [data[n:], *parts[i + 1 :]]
            else:
                n = _read_region(part, buffer[fill : fill + min(part.size, room)])
                fill += n
                if n < part.size:
                    return buffer[:fill], [_Rest(part.handle, part.position + n, part.size - n), *parts[i + 1 :]]
            if fill == len(buffer):
                return buffer, parts[i + 1 :]
        return buffer[:fill], []


def _read_region(region: FileRegion, into: memoryview) -> int:
    """``into`` filled from the region's file at its position; the bytes read."""
    n = 0
    while n < len(into):
        got = os.preadv(region.handle.fd, [into[n:]], region.position + n)
        if got == 0:  # the file is shorter than its slice (truncated meanwhile): the frame cannot be kept
            raise OSError(errno.EIO, "segment file ended inside a fetch response")
        n += got
    return n


async def _ready(loop: asyncio.AbstractEventLoop, fd: int, *, writing: bool) -> None:
    future = loop.create_future()
    add, remove = (loop.add_writer, loop.remove_writer) if writing else (loop.add_reader, loop.remove_reader)
    add(fd, future.set_result, None)
    try:
        await future
    finally:
        remove(fd)


def transport_factory(config: BrokerConfig, listener: str) -> Callable[[socket.socket], TlsTransport]:
    """What an SSL listener's socket server wraps each accepted socket in; the listener's keys
    are checked here, at startup."""
    context = server_context(config, listener)
    key = config.listener_key(listener, "ssl.principal.mapping.rules")
    mapper = PrincipalMapper(config[key], key)
    # the listener's plaintext to send and ciphertext received, one of each: a connection's
    # send or read is synchronous, none interleaves with another's
    buffer, ciphertext = memoryview(bytearray(SEND_BUFFER)), memoryview(bytearray(RECEIVE_BUFFER))
    return lambda sock: TlsTransport(sock, context, mapper, buffer, ciphertext)
