"""``python -m kova``: the ``kova`` command line."""

import sys

from kova.cli import main

if __name__ == "__main__":
    sys.exit(main())
