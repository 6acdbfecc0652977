"""What every plan handler shares: :class:`RawDataset`, the lazy :class:`PlanContext`, and the builders of
path and catalog-table datasets.

Handlers (:mod:`spark_plugin.plan_inputs`, :mod:`spark_plugin.plan_outputs`) get the
:class:`~spark_plugin.plan_tree.PlanNode` (from the one ``toJSON()`` call) and a :class:`PlanContext` that
fetches the JVM object behind it only when a detail is missing from the JSON (paths, locations, modes, JDBC
options). The rules are ports of the JVM OpenLineage integration's visitors (``LogicalRelationDatasetBuilder``,
``InsertIntoHadoopFsRelationVisitor``, ``CreateDataSourceTableAsSelectCommandVisitor``,
``TableContentChangeDatasetBuilder``...), named in each handler's docstring.
"""
from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

import attrs

from emitter import naming
from emitter.deferred import facet_v2
from spark_plugin import plan_tree
from spark_plugin.plan_tree import PlanNode

if TYPE_CHECKING:  # the real classes for the type checker; at run time their deferred constructors (emitter.deferred)
    from openlineage.client.facet_v2 import catalog_dataset, schema_dataset
else:
    catalog_dataset, schema_dataset = facet_v2.catalog_dataset, facet_v2.schema_dataset

log = logging.getLogger(__name__)


Schema = schema_dataset.SchemaDatasetFacet
Catalog = catalog_dataset.CatalogDatasetFacet


@attrs.frozen
class RawDataset:
    """A dataset before facets are built: identity, schema, symlink, lifecycle."""

    namespace: str
    name: str
    schema: Schema | None = None
    symlink: tuple[str, str] | None = None  # (namespace, name) of the TABLE identifier
    lifecycle: str | None = None  # CREATE, OVERWRITE, DROP, TRUNCATE, ALTER, RENAME
    previous: tuple[str, str] | None = None  # RENAME: (namespace, name) before
    catalog: Catalog | None = None  # the Hive ``catalog`` facet (see :func:`hive_catalog`)
    #: suffix for the action job name (the JVM's JobNameSuffixProvider), outputs only
    suffix: str | None = None
    #: the ``inputStatistics`` input facet's fields as (field, value) pairs, inputs only (plan_inputs reads them)
    input_stats: tuple[tuple[str, int], ...] = ()
    #: inputs read through a query (a JDBC ``query``): each field of the relation -> this dataset's columns it is
    #: computed from, for column lineage; None when the relation's fields are this dataset's columns of the same name
    columns: tuple[tuple[str, tuple[str, ...]], ...] | None = None


class PlanContext:
    """What handlers need from the JVM, fetched lazily and at most once per action."""

    def __init__(self, qe: Any, root: PlanNode, jroot: Any, spark_conf: Mapping[str, str],
                 nodes: plan_tree.JvmNodes | None = None) -> None:
        """``nodes``: the JVM objects of ``jroot``'s nodes found so far (shared by the reads of one plan)."""
        self.qe = qe
        self.root = root
        self._nodes = nodes or plan_tree.JvmNodes(jroot)
        self.conf = spark_conf
        #: Spark 3.5's cached DataFrames (whose relation keeps no logical plan): each ``InMemoryRelation`` (by
        #: ``id()``: a cached plan's nodes have paths of their own) -> the logical plans its physical plan was planned
        #: from, and the relations read there with their datasets (for column lineage; see
        #: :func:`spark_plugin.plan_inputs._in_memory_relation`)
        self.cached_plans: dict[int, list[tuple[PlanNode, plan_tree.JvmNodes]]] = {}
        self.cached_reads: list[tuple[PlanNode, list[RawDataset]]] = []

    @property
    def nodes(self) -> plan_tree.JvmNodes:
        """The JVM objects of this context's plan, by path."""
        return self._nodes

    def jvm_node(self, node: PlanNode) -> Any:
        """The JVM object of a node of the optimized plan."""
        return self._nodes.get(node.path)

    @cached_property
    def session(self) -> Any:
        return self.qe.sparkSession()

    @cached_property
    def catalog(self) -> Any:
        """The session catalog (``SessionCatalog``)."""
        return self.session.sessionState().catalog()

    @cached_property
    def jvm(self) -> Any:
        from py4j import protocol
        from py4j.java_gateway import JVMView

        # the gateway's default JVM view, reached from any proxy of it
        return JVMView(self.qe._gateway_client, jvm_name=protocol.DEFAULT_JVM_NAME, id=protocol.DEFAULT_JVM_ID)

    @cached_property
    def warehouse(self) -> str | None:
        """``spark.sql.warehouse.dir`` as Spark qualified it (``file:/...``), without trailing ``/``."""
        value = self.session.conf().get("spark.sql.warehouse.dir", None) or self.conf.get(
            "spark.sql.warehouse.dir"
        )
        if not value:
            return None
        namespace, name = naming.path_dataset(naming.escape_literal_path(value))  # qualified as a Hadoop Path
        return _location(namespace, name)

    @cached_property
    def metastore(self) -> str | None:
        """``hive://host:port`` of a remote Hive metastore when the session uses the Hive catalog."""
        if self.session.conf().get("spark.sql.catalogImplementation", "in-memory") != "hive":
            return None
        uris = (
            self.conf.get("spark.sql.hive.metastore.uris")
            or self.conf.get("spark.hadoop.hive.metastore.uris")
            or self.session.sparkContext().hadoopConfiguration().get("hive.metastore.uris")
        )
        if not uris:
            return None
        first = uris.split(",")[0].strip()
        authority = re.sub(r"^\w+://", "", first).split("/")[0]
        return f"hive://{authority}"

    @cached_property
    def hive_session(self) -> bool:
        """Whether the session's ``spark_catalog`` is Spark's own V2SessionCatalog over a Hive session
        catalog (the JVM's ``CatalogDatasetFacetUtils.isHiveCatalog``): False with an in-memory catalog
        or when ``spark_catalog`` is replaced (Delta's DeltaCatalog, Iceberg's SparkSessionCatalog)."""
        try:
            if self.catalog.getClass().getSimpleName() != "HiveSessionCatalog":
                return False
            v2 = self.session.sessionState().catalogManager().v2SessionCatalog()
            return bool(v2.getClass().getSimpleName() == "V2SessionCatalog")
        except Exception:  # noqa: BLE001 - a catalog plugin that cannot be loaded: not provably Hive
            return False

    @cached_property
    def hive_catalog_facet(self) -> Catalog | None:
        """The JVM's ``getCatalogDatasetFacetForHive``: name ``default``, type and framework ``hive``,
        the warehouse as a location (``file:/w``) and the metastore (``hive://host:port``) when one is
        configured; None when the warehouse is unknown (the JVM then skips the facet)."""
        if not self.warehouse:
            return None
        return Catalog(framework="hive", type="hive", name="default", metadataUri=self.metastore,
                       warehouseUri=self.warehouse, source="spark", catalogProperties=None)

    @cached_property
    def derby_home(self) -> str | None:
        return self.jvm.java.lang.System.getProperty("derby.system.home")

    def is_file(self, uri: str) -> bool:
        """Whether a location is a single file (local paths checked here, others by Hadoop FS)."""
        namespace, name = naming.path_dataset(uri)
        if namespace == "file":  # no py4j call for a local path
            return os.path.isfile(name)
        try:
            path = self.jvm.org.apache.hadoop.fs.Path(uri)
            conf = self.session.sessionState().newHadoopConf()
        except Exception:  # noqa: BLE001 - not a Hadoop path: name by the path as given
            return False
        return hadoop_is_file(path, conf)


def hadoop_is_file(path: Any, conf: Any) -> bool:
    """Whether a Hadoop ``Path`` is a single file, asked of its file system with the Hadoop configuration
    ``conf``; a path without a status (missing, a glob) or an unreachable file system is not a file (the path
    is then named as given, as the JVM names it)."""
    try:
        return bool(path.getFileSystem(conf).getFileStatus(path).isFile())
    except Exception:  # noqa: BLE001 - Py4JJavaError (FileNotFoundException, no such file system) or py4j
        return False


def _location(namespace: str, name: str) -> str:
    # the JVM's FilesystemDatasetUtils.toLocation: "file" + "/w" -> "file:/w"
    if ":/" not in namespace:
        namespace += ":/"
    return namespace.rstrip("/") + "/" + name.lstrip("/")


def trim_path(name: str) -> str:
    """The JVM's ``JobNameSuffixProvider.trimPath``: last two path segments joined by ``_``."""
    trimmed = naming.trim_partitions(name)
    if trimmed.rfind("/") > 0:
        parts = [p for p in trimmed.split("/")]
        while parts and parts[-1] == "":  # Java's split drops trailing empty strings
            parts.pop()
        return "_".join(parts[-2:]) if len(parts) >= 2 else parts[-1]
    return trimmed


def path_raw(uri: str, schema: Schema | None = None, **kwargs: Any) -> RawDataset:
    """A dataset named by a file system location, partition folders trimmed."""
    namespace, name = naming.path_dataset(uri)
    return RawDataset(namespace, naming.trim_partitions(name), schema, **kwargs)


# --- catalog tables -------------------------------------------------------------------------------


def hive_catalog(ctx: PlanContext, raw: RawDataset, *, always: bool = False) -> RawDataset:
    """``raw`` with the Hive ``catalog`` facet where the JVM integration adds it: ``always`` for the
    Hive-only nodes whose visitors call ``catalog()`` (HiveTableRelation, InsertIntoHiveTable,
    CreateHiveTableAsSelectCommand, InsertIntoHiveDirCommand); otherwise only for a table of a Hive
    session catalog (the visitors building from a CatalogTable: create, drop, truncate, alter, CTAS).
    Tables read through a LogicalRelation and InsertIntoHadoopFsRelationCommand get none, as in the JVM."""
    if always or ctx.hive_session:
        return attrs.evolve(raw, catalog=ctx.hive_catalog_facet)
    return raw


def _identifier(ident_json: Mapping[str, Any] | None) -> tuple[str | None, str]:
    ident = ident_json or {}
    return ident.get("database"), ident.get("table", "")


def table_location(ctx: PlanContext, jtable: Any) -> str:
    """A CatalogTable's location: ``storage.locationUri`` or the catalog's default table path."""
    location = jtable.storage().locationUri()
    if location.isDefined():
        return location.get().toString()
    return ctx.catalog.defaultTablePath(jtable.identifier()).toString()


def table_raw(
    ctx: PlanContext,
    location: str,
    database: str | None,
    table: str,
    schema: Schema | None = None,
    **kwargs: Any,
) -> RawDataset:
    """A catalog table: named by its location plus a TABLE symlink (the JVM's ``PathUtils.fromTableIdentifier``).

    Symlink: ``hive://{metastore}`` + ``db.table`` with a remote Hive metastore; else, when the table
    lives under ``spark.sql.warehouse.dir``, ``file:{warehouse}`` + ``db.table``; else none.
    """
    raw = path_raw(location, schema, **kwargs)
    table_name = f"{database}.{table}" if database else table
    symlink = None
    if ctx.metastore:
        symlink = (ctx.metastore, table_name)
    elif ctx.warehouse:
        here = _location(raw.namespace, raw.name)
        if here.startswith(ctx.warehouse.rstrip("/") + "/"):
            symlink = (ctx.warehouse, table_name)
    return attrs.evolve(raw, symlink=symlink)


def catalog_table_raw(
    ctx: PlanContext, jtable: Any, table_json: Mapping[str, Any] | None, **kwargs: Any
) -> RawDataset:
    """A CatalogTable JVM object (its JSON gives identifier and schema without py4j calls)."""
    if table_json:
        database, table = _identifier(table_json.get("identifier"))
    else:
        ident = jtable.identifier()
        database = ident.database().get() if ident.database().isDefined() else None
        table = ident.table()
    return table_raw(ctx, table_location(ctx, jtable), database, table, **kwargs)


def lookup_table_raw(
    ctx: PlanContext,
    ident_json: Mapping[str, Any],
    jident: Any,
    *,
    with_schema: bool = False,
    **kwargs: Any,
) -> RawDataset | None:
    """A table by identifier through the session catalog (with its current schema if asked);
    None when it does not exist (any more)."""
    try:
        jtable = ctx.catalog.getTableMetadata(jident)
    except Exception:  # noqa: BLE001 - a table that does not exist (any more): None
        return None
    schema = plan_tree.struct_schema(jtable.schema().json()) if with_schema else None
    database, table = _identifier(ident_json)
    database = database or jtable.database() or None
    return table_raw(ctx, table_location(ctx, jtable), database, table, schema, **kwargs)
