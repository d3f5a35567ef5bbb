"""A stock Firefox (Debian's firefox-esr) driven over Marionette, its own remote protocol, for the
console's pages in a second browser: Playwright drives only its own patched Firefox builds (a
download, which this project does not do), and Debian packages no geckodriver.

Marionette is enabled by ``--marionette``; with the ``marionette.port`` preference 0 it listens on
a free port of 127.0.0.1 and writes that port into the profile's ``MarionetteActivePort``. Its
protocol, over that TCP connection, is JSON messages each framed as ``LENGTH:JSON`` (LENGTH the
JSON's bytes in decimal): the server speaks first, a hello ``{"applicationType": "gecko",
"marionetteProtocol": 3}``; a command is ``[0, id, "WebDriver:Name", {params}]`` and its answer
``[1, id, error, result]``, where error is null or ``{"error", "message", "stacktrace"}`` and the
commands are WebDriver's (W3C) under Marionette's names.

The profile keeps Firefox off the network: every update, telemetry, remote settings, safe-browsing
and prefetch channel is off; every name resolves to 127.0.0.1 without a DNS query (a Firefox
traced with these preferences connected to loopback only); and a request to an address left goes
to a proxy that refuses at 127.0.0.1:9 (loopback is never proxied: the console is reached).

A page's script errors (an uncaught exception, an unhandled rejection: what Playwright's
``pageerror`` reports from Chromium) reach no WebDriver command, so Firefox starts with
``-remote-allow-system-access`` and a script of its own (Marionette's chrome context) listens to
its console service for them from the start, before any page loads: ``script_errors``."""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

FIREFOX = Path("/usr/bin/firefox-esr")
START_TIMEOUT = 60.0  # seconds for Firefox to listen: a cold start on a loaded machine is slow
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # WebDriver's key of an element reference
OFFLINE_PREFS: dict[str, Any] = {
    "marionette.port": 0,  # a free port, written to MarionetteActivePort
    "app.update.disabledForTesting": True,
    "app.normandy.enabled": False,
    "app.normandy.api_url": "",
    "app.shield.optoutstudies.enabled": False,
    "browser.newtabpage.enabled": False,
    "browser.safebrowsing.blockedURIs.enabled": False,
    "browser.safebrowsing.downloads.enabled": False,
    "browser.safebrowsing.malware.enabled": False,
    "browser.safebrowsing.phishing.enabled": False,
    "browser.safebrowsing.provider.mozilla.updateURL": "",
    "browser.safebrowsing.provider.google4.updateURL": "",
    "browser.search.update": False,
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.homepage_override.mstone": "ignore",
    "browser.startup.page": 0,
    "browser.urlbar.speculativeConnect.enabled": False,
    "datareporting.healthreport.uploadEnabled": False,
    "datareporting.policy.dataSubmissionEnabled": False,
    "dom.push.connection.enabled": False,
    "extensions.blocklist.enabled": False,
    "extensions.getAddons.cache.enabled": False,
    "extensions.systemAddon.update.enabled": False,
    "extensions.update.enabled": False,
    "geo.provider.network.url": "",
    "media.gmp-manager.url": "",
    "messaging-system.rsexperimentloader.enabled": False,
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    "network.dns.disablePrefetch": True,
    "network.dns.native-is-localhost": True,  # a name is never looked up: every one is 127.0.0.1
    "network.http.speculative-parallel-limit": 0,
    "network.prefetch-next": False,
    "network.trr.mode": 5,  # no DNS over HTTPS
    "security.OCSP.enabled": 0,
    "security.remote_settings.crlite_filters.enabled": False,
    "security.remote_settings.intermediates.enabled": False,
    "services.settings.server": "data:,#remote-settings-off",
    "toolkit.telemetry.enabled": False,
    "toolkit.telemetry.server": "",
    "toolkit.telemetry.reportingpolicy.firstRun": False,
    # the catch-all: whatever still goes out meets a closed port (loopback is never proxied)
    "network.proxy.type": 1,
    "network.proxy.http": "127.0.0.1",
    "network.proxy.http_port": 9,
    "network.proxy.ssl": "127.0.0.1",
    "network.proxy.ssl_port": 9,
    "network.proxy.allow_hijacking_localhost": False,
}


# in the browser's chrome context: every error of a page's script (category "content javascript", not
# a warning: Firefox's CSS and parser notes are warnings) kept on the browser window for script_errors
LISTEN_FOR_SCRIPT_ERRORS = """
const errors = (window.seglogScriptErrors = []);
Services.console.registerListener({
  observe(message) {
    const warning = Ci.nsIScriptError.warningFlag | Ci.nsIScriptError.infoFlag;
    if (message instanceof Ci.nsIScriptError && message.category === "content javascript"
        && !(message.flags & warning)) {
      errors.push(`${message.errorMessage} (${message.sourceName}:${message.lineNumber})`);
    }
  },
});
"""


class MarionetteError(Exception):
    """A command Firefox answered with an error (its WebDriver error name and message)."""


class Firefox:
    """A headless Firefox of a fresh profile and one Marionette session in it."""

    def __init__(self, width: int = 1280, height: int = 900) -> None:
        self._profile = tempfile.TemporaryDirectory(prefix="seglog-firefox-")
        profile = Path(self._profile.name)
        prefs = "".join(f"user_pref({json.dumps(k)}, {json.dumps(v)});\n" for k, v in OFFLINE_PREFS.items())
        (profile / "user.js").write_text(prefs)
        command = [str(FIREFOX), "--headless", "--marionette", "-remote-allow-system-access", "--no-remote"]
        command += ["--profile", str(profile)]
        env = {"MOZ_HEADLESS_WIDTH": str(width), "MOZ_HEADLESS_HEIGHT": str(height), "HOME": str(profile)}
        self._process = subprocess.Popen(
            [*command, "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        self._buffer = b""
        self._next_id = 0
        try:
            self._sock = socket.create_connection(("127.0.0.1", self._port(profile)), timeout=START_TIMEOUT)
            hello = self._read()
            if hello.get("marionetteProtocol") != 3:
                raise MarionetteError(f"not Marionette's protocol 3: {hello}")
            self.capabilities = self.command("WebDriver:NewSession", {"capabilities": {}})["capabilities"]
            self._in_chrome(LISTEN_FOR_SCRIPT_ERRORS)
        except BaseException:
            self.close()
            raise

    def _port(self, profile: Path) -> int:
        """The port Firefox listens on, once it wrote it (a partly written file reads as no number)."""
        written, deadline = profile / "MarionetteActivePort", time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise MarionetteError(f"{FIREFOX} exited with {self._process.returncode} before listening")
            text = written.read_text().strip() if written.exists() else ""
            if text.isdigit():
                return int(text)
            time.sleep(0.1)
        raise MarionetteError(f"{FIREFOX} did not listen for Marionette within {START_TIMEOUT:g} s")

    # --- the protocol ---------------------------------------------------------------------------------

    def command(self, name: str, params: dict[str, Any] | None = None) -> Any:
        """Send a command and return its result; MarionetteError when Firefox answers an error."""
        self._next_id += 1
        data = json.dumps([0, self._next_id, name, params or {}]).encode()
        self._sock.sendall(b"%d:%s" % (len(data), data))
        kind, answered, error, result = self._read()
        if kind != 1 or answered != self._next_id:
            raise MarionetteError(f"answer {kind, answered} to command {self._next_id} ({name})")
        if error is not None:
            raise MarionetteError(f"{name}: {error.get('error')}: {error.get('message')}")
        return result

    def _read(self) -> Any:
        while b":" not in self._buffer:
            self._buffer += self._received()
        length, _, rest = self._buffer.partition(b":")
        while len(rest) < int(length):
            rest += self._received()
        message, self._buffer = rest[: int(length)], rest[int(length) :]
        return json.loads(message)

    def _received(self) -> bytes:
        data = self._sock.recv(1 << 16)
        if not data:
            raise MarionetteError("Firefox closed the Marionette connection")
        return data

    # --- what a test does ----------------------------------------------------------------------------

    def navigate(self, url: str) -> None:
        self.command("WebDriver:Navigate", {"url": url})

    def run(self, script: str, *args: Any) -> Any:
        """A script's return value (the body of a function called with ``args`` as ``arguments``)."""
        return self.command("WebDriver:ExecuteScript", {"script": script, "args": list(args)})["value"]

    def _in_chrome(self, script: str) -> Any:
        """A script run in the browser's own (chrome) context rather than the page's."""
        self.command("Marionette:SetContext", {"value": "chrome"})
        try:
            return self.run(script)
        finally:
            self.command("Marionette:SetContext", {"value": "content"})

    def script_errors(self) -> list[str]:
        """The pages' script errors (message, source and line) since the last call, oldest first."""
        errors: list[str] = self._in_chrome("return window.seglogScriptErrors.splice(0)")
        return errors

    def until(self, script: str, *args: Any, equals: Any, timeout: float = 60.0) -> None:
        """Wait until the script returns ``equals``, asking again every 0.1 s; AssertionError (with
        the last value) after ``timeout``: a loaded machine is slower, not failing."""
        deadline = time.monotonic() + timeout
        while (found := self.run(script, *args)) != equals:
            if time.monotonic() > deadline:
                raise AssertionError(f"{script} {args}: {found!r}, not {equals!r}, after {timeout:g} s")
            time.sleep(0.1)

    def element(self, css: str) -> str:
        """The reference of the first element ``css`` selects; MarionetteError when none does."""
        found = self.command("WebDriver:FindElement", {"using": "css selector", "value": css})
        reference: str = found["value"][ELEMENT]
        return reference

    def click(self, css: str) -> None:
        """A click as a person's (WebDriver's: scrolled into view, at the element's centre)."""
        self.command("WebDriver:ElementClick", {"id": self.element(css)})

    def fill(self, css: str, text: str) -> None:
        """An input emptied and typed into, key by key."""
        found = self.element(css)
        self.command("WebDriver:ElementClear", {"id": found})
        self.command("WebDriver:ElementSendKeys", {"id": found, "text": text})

    def screenshot(self, path: Path) -> None:
        """The whole page as a PNG."""
        path.write_bytes(base64.b64decode(self.command("WebDriver:TakeScreenshot", {"full": True})["value"]))

    def close(self) -> None:
        """The session and Firefox ended, and its profile removed."""
        try:
            if hasattr(self, "_sock"):
                with contextlib.suppress(OSError, MarionetteError):  # already gone: ended below all the same
                    self.command("Marionette:Quit", {"flags": ["eForceQuit"]})
                self._sock.close()
            else:  # it never listened: nobody to ask to quit
                self._process.terminate()
            try:
                self._process.wait(30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(30)
        finally:
            self._profile.cleanup()

    def __enter__(self) -> Firefox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
