"""``python -m seglog.protocol``: write ``message_data.py`` from the declarations in ``messages/``."""

from seglog.protocol.compiler import main

main()
