"""``python -m sot run|explain|report``: see `sot.cli`."""
from __future__ import annotations

import sys

from sot.cli import main

if __name__ == "__main__":
    sys.exit(main())
