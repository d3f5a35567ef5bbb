"""seglog's web console: the pages and JSON API of ``seglog console`` (``server``), over the
figures of a cluster read through Kafka's protocol (``figures``).

Layering: beside ``tools`` (the command line), using ``client`` and the tools' requests; nothing
imports it but ``cli``.
"""

from seglog.console.server import ConsoleServer, start

__all__ = ["ConsoleServer", "start"]
