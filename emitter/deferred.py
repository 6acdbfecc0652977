"""Facets described where they are found, built where the event is serialized.

Why: importing openlineage-python costs ~0.25 s of CPU. A Spark driver spends it while its JVM keeps both cores
busy, which is most of the plugin's cost to a short application. A producer running inside someone else's process
(the Spark plugin) describes each facet as a :class:`Deferred` call of the openlineage-python class instead; the
process that serializes the event (:func:`emitter.serialize.event_dict`, in the Spark plugin's delivery child)
makes the real instance then, so the host process never imports openlineage-python.

A producer writes the same code as with the classes themselves::

    if TYPE_CHECKING:  # the type checker sees (and checks the keywords against) the real classes
        from openlineage.client.facet_v2 import schema_dataset
    else:
        schema_dataset = facet_v2.schema_dataset  # at run time: their deferred constructors

    schema_dataset.SchemaDatasetFacet(fields=[schema_dataset.SchemaDatasetFacetFields(name="a", type="int")])

Reading a field that was passed (``facet.fields``) costs nothing; anything else (a default, a method) builds the
real instance, in whatever process asks. A :class:`Deferred` pickles as its call (module path, arguments).
"""
from __future__ import annotations

from importlib import import_module
from typing import Any


class Deferred:
    """One call of ``target`` (``"package.module:Attr.Path"``) with ``args`` and ``kwargs``, made by :meth:`build`
    (once; the arguments' own deferred calls first). Like the facet it stands for, it is not changed once made."""

    __slots__ = ("target", "args", "kwargs", "_built")

    def __init__(self, target: str, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> None:
        self.target = target
        self.args = args
        self.kwargs = kwargs or {}
        self._built: Any = None

    def build(self) -> Any:
        """The real object (an openlineage-python facet instance)."""
        if self._built is None:
            module, _, path = self.target.partition(":")
            made: Any = import_module(module)
            for part in path.split("."):
                made = getattr(made, part)
            self._built = made(*(built(a) for a in self.args), **{k: built(v) for k, v in self.kwargs.items()})
        return self._built

    def __getattr__(self, name: str) -> Any:
        # (only for names that are not slots: the fields a producer reads back)
        kwargs = object.__getattribute__(self, "kwargs")
        if name in kwargs:
            return kwargs[name]
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.build(), name)

    def __eq__(self, other: object) -> bool:
        return bool(self.build() == built(other))

    __hash__ = None  # type: ignore[assignment]  # as the attrs facets it stands for

    def __reduce__(self) -> tuple[Any, ...]:
        return (Deferred, (self.target, self.args, self.kwargs))

    def __repr__(self) -> str:
        arguments = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"Deferred({self.target.rpartition(':')[2]}({', '.join(arguments)}))"


def built(value: Any) -> Any:
    """``value`` with every :class:`Deferred` in it (in lists, tuples and dicts too) built."""
    kind = type(value)
    if kind is Deferred:
        return value.build()
    if kind is list or kind is tuple:
        return kind(built(v) for v in value)
    if kind is dict:
        return {k: built(v) for k, v in value.items()}
    return value


class Constructors:
    """``Constructors("pkg.module").name.Class(...)`` is ``Deferred("pkg.module:name.Class", ...)``: the deferred
    counterpart of ``from pkg.module import name; name.Class(...)``."""

    __slots__ = ("_module", "_path")

    def __init__(self, module: str, path: str = "") -> None:
        self._module = module
        self._path = path

    def __getattr__(self, name: str) -> Constructors:
        if name.startswith("__"):
            raise AttributeError(name)
        return Constructors(self._module, f"{self._path}.{name}" if self._path else name)

    def __call__(self, *args: Any, **kwargs: Any) -> Deferred:
        return Deferred(f"{self._module}:{self._path}", args, kwargs)


#: openlineage-python's facet modules: ``facet_v2.schema_dataset.SchemaDatasetFacet(...)``.
facet_v2 = Constructors("openlineage.client.facet_v2")
