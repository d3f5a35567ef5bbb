"""``python -m seglog``: the ``seglog`` command."""

import sys

from .cli import main

sys.exit(main())
