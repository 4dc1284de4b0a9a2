"""``python -m anchorlab.cli``: the ``anchorlab`` command."""

import sys

from anchorlab.cli import main

if __name__ == "__main__":
    sys.exit(main())
