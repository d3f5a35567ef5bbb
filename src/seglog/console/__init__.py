"""seglog's web console: the pages and JSON API of ``seglog console`` (``server``), over the
figures of a cluster read through Kafka's protocol (``figures``).

Layering: beside ``tools`` (the command line), using ``client`` and the tools' requests; nothing
imports it but ``cli``, and ``seglog broker --http-port`` (``tools.broker``), which serves it
in the broker's process.
"""

from seglog.console.server import ConsoleServer, serve_in_broker, start

__all__ = ["ConsoleServer", "serve_in_broker", "start"]
