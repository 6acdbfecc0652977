"""This package's version, in one place: pyproject.toml builds the wheel with it (hatch reads the line below), the
events' producer URI carries it, and the Spark facets and ``--version`` report it without an ``importlib.metadata``
lookup. A module of its own: importing it imports nothing else (a Spark driver reads it)."""
VERSION = "0.1.0"
