"""The ``lineage-capture`` command: one entry point for the harvesters, delivery, the demo and the graph.

It only dispatches: each subcommand lives in its own package (``harvesters``, ``emitter``, ``lineage_graph``)
and is imported when called, so ``lineage-capture --version`` or a cron ``harvest`` starts fast.
"""
