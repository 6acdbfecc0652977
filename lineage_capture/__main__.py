"""``python -m lineage_capture``: the same as the ``lineage-capture`` command."""
import sys

from lineage_capture.cli import main

sys.exit(main())
