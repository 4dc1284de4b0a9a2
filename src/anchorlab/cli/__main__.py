"""``python -m anchorlab.cli``: the ``anchorlab`` command."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
