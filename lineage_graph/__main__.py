"""``python -m lineage_graph graph ...`` (the same as ``lineage-capture graph ...``)."""
import sys

from .cli import main

sys.exit(main())
