"""Run and job facets the plugin puts on every event, and the ``facets.<name>.disabled`` filter."""
from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import attr

from emitter.deferred import Constructors, facet_v2
from emitter.records import COMPLETE, Dataset, RunRecord
from spark_plugin.config import DebugSettings, PluginConfig, jvm_list

if TYPE_CHECKING:  # the real classes for the type checker; at run time their deferred constructors (emitter.deferred)
    from openlineage.client.facet_v2 import ownership_job, processing_engine_run, tags_job, tags_run

    from spark_plugin import facet_classes as own
else:
    ownership_job, processing_engine_run = facet_v2.ownership_job, facet_v2.processing_engine_run
    tags_job, tags_run = facet_v2.tags_job, facet_v2.tags_run
    #: the plugin's own facet classes (:mod:`spark_plugin.facet_classes`), deferred: the driver never imports them
    own = Constructors("spark_plugin.facet_classes")

log = logging.getLogger("spark_plugin")

T = TypeVar("T")


def adapter_version() -> str:
    """This package's version (the ``openlineageAdapterVersion`` of ``processing_engine``): the one the wheel is
    built with (emitter/version.py), not looked up in the installed metadata
    (``importlib.metadata``: ~50 ms of the driver's CPU as its context is made)."""
    from emitter.version import VERSION

    return VERSION


def engine_facets(spark_version: str, spark_conf: Mapping[str, str], captured: Iterable[str]) -> dict[str, Any]:
    """``processing_engine`` and ``spark_properties``: the same on every event of one application."""
    return {
        "processing_engine": processing_engine_run.ProcessingEngineRunFacet(
            version=spark_version, name="spark", openlineageAdapterVersion=adapter_version()
        ),
        "spark_properties": own.SparkPropertiesRunFacet(
            properties={key: spark_conf[key] for key in captured if key in spark_conf}
        ),
    }


def config_run_facets(config: PluginConfig, environ: Mapping[str, str]) -> dict[str, Any]:
    """``environment-properties`` (see :func:`environment_facet`) and ``tags`` from ``run.tags`` (the JVM's
    ``TagsRunFacetBuilder``, none when unset), on every event's run."""
    facets: dict[str, Any] = {ENVIRONMENT: environment_facet(config.environment_variables, environ)}
    if config.run_tags:
        facets["tags"] = tags_run.TagsRunFacet(
            tags=[tags_run.TagsRunFacetFields(key=k, value=v, source=s) for k, v, s in config.run_tags])
    return facets


ENVIRONMENT = "environment-properties"
APPLICATION_DETAILS = "spark_applicationDetails"
JOB_DETAILS = "spark_jobDetails"


def environment_facet(names: Iterable[str], environ: Mapping[str, str]) -> dict[str, Any]:
    """The JVM's ``environment-properties`` facet (its ``CustomEnvironmentFacetBuilder``, on every event outside
    Databricks): the driver's values of the variables named by ``facets.custom_environment_variables``, ``{}`` when
    none is named (:func:`spark_plugin.facet_classes.environment_facet`)."""
    return own.environment_facet({name: environ.get(name) for name in names})






def application_details(sc: Any, spark_conf: Mapping[str, str]) -> own.SparkApplicationDetailsRunFacet:
    """``spark_applicationDetails`` of the application behind ``sc`` (a PySpark SparkContext), as the JVM's
    ``SparkApplicationDetailsFacet`` reads it: the YARN proxy, else the UI's reverse proxy URL; the YARN history
    server's URL when one is configured."""
    app_id = str(sc.applicationId)
    encoded = _java_url_encode(app_id)
    proxy = spark_conf.get("spark.org.apache.hadoop.yarn.server.webproxy.amfilter.AmIpFilter.param.PROXY_URI_BASES")
    if proxy is None and str(spark_conf.get("spark.ui.reverseProxy", "false")).strip().lower() == "true":
        reverse = spark_conf.get("spark.ui.reverseProxyUrl")
        proxy = f"{reverse.rstrip('/')}/proxy/{encoded}" if reverse is not None else None
    history = spark_conf.get("spark.yarn.historyServer.address")
    if history is not None:
        if not history.startswith("http"):
            policy = sc._jsc.hadoopConfiguration().get("yarn.http.policy", "HTTP_ONLY")
            history = f"{policy.replace('_ONLY', '').lower()}://{history}"
        history = f"{history.rstrip('/')}/history/{encoded}"
    return own.SparkApplicationDetailsRunFacet(
        master=sc.master, appName=sc.appName, applicationId=app_id,
        deployMode=spark_conf.get("spark.submit.deployMode", "client"), userName=sc.sparkUser(),
        driverHost=spark_conf.get("spark.driver.host"), uiWebUrl=sc.uiWebUrl, proxyUrl=proxy, historyUrl=history)


def _java_url_encode(text: str) -> str:
    # java.net.URLEncoder (form encoding): letters, digits and ".-*_" kept, space as "+"
    from urllib.parse import quote_plus

    return quote_plus(text, safe="*").replace("~", "%7E")


def config_job_facets(config: PluginConfig) -> dict[str, Any]:
    """``tags`` from ``job.tags`` and ``ownership`` from ``job.owners.<type>``, on every event's job (the JVM's
    ``TagsJobFacetBuilder`` and ``OwnershipJobFacetBuilder``); each only when configured."""
    facets: dict[str, Any] = {}
    if config.job_tags:
        facets["tags"] = tags_job.TagsJobFacet(
            tags=[tags_job.TagsJobFacetFields(key=k, value=v, source=s) for k, v, s in config.job_tags])
    if config.owners:
        facets["ownership"] = ownership_job.OwnershipJobFacet(
            owners=[ownership_job.Owner(name=name, type=kind) for kind, name in config.owners])
    return facets


def _keep(facets: Mapping[str, Any], disabled: frozenset[str]) -> dict[str, Any]:
    return {name: facet for name, facet in facets.items() if name not in disabled}


def _dataset(ds: Dataset, disabled: frozenset[str]) -> Dataset:
    return Dataset(ds.namespace, ds.name, facets=_keep(ds.facets, disabled), io_facets=_keep(ds.io_facets, disabled))


def without_disabled(record: RunRecord, disabled: frozenset[str]) -> RunRecord:
    """``record`` minus every run, job and dataset facet named in ``disabled``."""
    if not disabled:
        return record
    return attr.evolve(
        record,
        run_facets=_keep(record.run_facets, disabled),
        job_facets=_keep(record.job_facets, disabled),
        inputs=tuple(_dataset(ds, disabled) for ds in record.inputs),
        outputs=tuple(_dataset(ds, disabled) for ds in record.outputs),
    )


# ---- the ``debug`` run facet (the JVM's DebugRunFacet) --------------------------------------------------------

DEBUG = "debug"
#: The JVM integration's Micrometer meter names, for what this plugin counts and times the same way.
APP_START, APP_END = "openlineage.spark.event.app.start", "openlineage.spark.event.app.end"
SQL_START, SQL_END = "openlineage.spark.event.sql.start", "openlineage.spark.event.sql.end"
UNKNOWN_TIME = "openlineage.spark.unknownFacet.time"
#: Classes whose presence the JVM's facet reports (Delta, Iceberg, BigQuery).
CLASSES_TO_DEBUG = ("org.apache.spark.sql.delta.catalog.DeltaCatalog", "org.apache.iceberg.catalog.Catalog",
                    "com.google.cloud.spark.bigquery.BigQueryRelation")
#: JVM system properties of the ``system`` part, by field.
SYSTEM_PROPERTIES = (("javaVersion", "java.version"), ("javaVendor", "java.vendor"), ("osArch", "os.arch"),
                     ("osName", "os.name"), ("osVersion", "os.version"), ("userLanguage", "user.language"),
                     ("userTimezone", "user.timezone"))
#: Plan nodes read for ``logicalPlan`` at most (each costs a few py4j calls; the payload limit applies anyway).
MAX_DEBUG_NODES = 200




class DebugMetrics:
    """The counters and timers of the debug facet's ``metrics`` (the JVM's Micrometer meters of the same names):
    only what this plugin really counts or times. Timers hold their total in microseconds, as the JVM writes them.
    Every meter carries the JVM's three common tags."""

    def __init__(self, tags: Mapping[str, str]) -> None:
        self._tags = [{"key": k, "value": v} for k, v in sorted(tags.items())]  # Micrometer sorts tags by key
        self._values: dict[str, float] = {}
        self._lock = threading.Lock()  # the app's main thread counts the application's start and end

    def count(self, name: str, amount: float = 1.0) -> None:
        with self._lock:
            self._values[name] = self._values.get(name, 0.0) + amount

    def add_time(self, name: str, seconds: float) -> None:
        self.count(name, seconds * 1e6)

    def nodes(self) -> list[dict[str, Any]]:
        """The meters as the JVM's MetricsNode list: name, value, tags."""
        with self._lock:
            values = list(self._values.items())
        return [{"name": name, "value": value, "tags": list(self._tags)} for name, value in values]


_recording = threading.local()  # the metrics of the application whose plan the current thread reads


@contextlib.contextmanager
def recording(metrics: DebugMetrics | None) -> Iterator[None]:
    """Make :func:`timed` on this thread record into ``metrics`` (None: time nothing)."""
    previous = getattr(_recording, "metrics", None)
    _recording.metrics = metrics
    try:
        yield
    finally:
        _recording.metrics = previous


def timed(name: str, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, its time added to timer ``name`` of the metrics :func:`recording` set on this thread."""
    metrics = getattr(_recording, "metrics", None)
    if metrics is None:
        return fn(*args)
    start = time.perf_counter()
    try:
        return fn(*args)
    finally:
        metrics.add_time(name, time.perf_counter() - start)


def disabled_facet_names(spark_conf: Mapping[str, str], config: PluginConfig) -> list[str]:
    """The facets switched off, as the JVM's ``openlineage.spark.disabled.facets`` tag lists them (sorted)."""
    from spark_plugin.plan_lineage import JVM_DEFAULT_DISABLED, jvm_facet_enabled

    names = {name for name in JVM_DEFAULT_DISABLED if not jvm_facet_enabled(spark_conf, name)}
    names |= set(jvm_list(spark_conf.get("spark.openlineage.facets.disabled")))
    return sorted(names | config.disabled_facets)


def _node_id(node: Any) -> str:
    return f"{node.nodeName()}@{node.hashCode()}"  # the JVM's id: nodeName@hashCode


def plan_nodes(jplan: Any, limit: int = MAX_DEBUG_NODES) -> list[dict[str, Any]]:
    """The JVM's ``LogicalPlanNode`` list: every node in pre-order with its ``toString`` and its children's ids."""
    out: list[dict[str, Any]] = []
    stack = [(jplan, _node_id(jplan))]
    while stack and len(out) < limit:
        node, node_id = stack.pop()
        children = []
        iterator = node.children().iterator()
        while iterator.hasNext():
            child = iterator.next()
            children.append((child, _node_id(child)))
        out.append({"id": node_id, "desc": node.toString(), "children": [i for _, i in children]})
        stack.extend(reversed(children))  # pre-order: the first child's subtree next
    return out


def _openlineage_entries(spark_conf: Mapping[str, str]) -> dict[str, str]:
    """The ``spark.openlineage.*`` entries (prefix removed) without any that could hold a credential: keys naming
    a key (the JVM leaves those out), auth, headers or a secret (the emitter masks secret-looking values too)."""
    from emitter.redact import is_secret_key
    from spark_plugin.config import strip_prefix

    return {k: v for k, v in sorted(strip_prefix(spark_conf).items())
            if "key" not in k.lower() and ".auth." not in k and ".headers." not in k and not is_secret_key(k)}


class DebugFacets:
    """Builds the ``debug`` facet of one application's events (on the worker thread, at delivery): the same
    parts as the JVM's, from the driver's JVM through py4j. The parts that do not change during the application
    (system, Scala version, classes, catalog class) are read once."""

    def __init__(self, sc: Any, spark_conf: Mapping[str, str], config: PluginConfig, enabled: bool) -> None:
        self.sc = sc
        self.spark_conf = spark_conf
        self.settings: DebugSettings = config.debug
        self.enabled = enabled  # facets.debug.disabled=false: on every event; else only smart debug's
        self.metrics = DebugMetrics({
            "openlineage.spark.integration.version": adapter_version(),
            "openlineage.spark.version": sc.version,
            "openlineage.spark.disabled.facets": ";".join(disabled_facet_names(spark_conf, config)),
        })
        self.jsession: Any = None  # the session whose catalog class is reported
        self._static: dict[str, Any] | None = None
        self._warned_size = False

    def _static_parts(self) -> dict[str, Any]:
        if self._static is None:
            jvm = self.sc._jvm
            system = {"sparkDeployMode": self.spark_conf.get("spark.submit.deployMode", "client")}
            for field, prop in SYSTEM_PROPERTIES:
                system[field] = jvm.java.lang.System.getProperty(prop)
            loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
            details = []
            for name in CLASSES_TO_DEBUG:
                try:
                    package = jvm.java.lang.Class.forName(name, False, loader).getPackage()
                    version = package.getImplementationVersion() if package is not None else None
                    details.append({"className": name, "onClasspath": True, "packageVersion": version})
                except Exception:  # noqa: BLE001 - ClassNotFoundException: not on the classpath
                    details.append({"className": name, "onClasspath": False})
            catalog = None
            if self.jsession is not None:
                catalog = self.jsession.catalog().getClass().getCanonicalName()
            self._static = {"system": system, "scala": jvm.scala.util.Properties.versionNumberString(),
                            "classDetails": details, "catalogClass": catalog}
        return self._static

    def facet(self, nodes: list[dict[str, Any]] | None = None, logs: list[str] | None = None) -> own.DebugRunFacet:
        """The facet now: metrics as they stand, ``nodes`` (:func:`plan_nodes`) as its logical plan."""
        static = self._static_parts()
        jars = self.sc._jsc.sc().listJars().mkString("\n")
        content: dict[str, Any] = {
            "classpath": {"openLineageVersion": adapter_version(), "sparkVersion": self.sc.version,
                          "scalaVersion": static["scala"], "jars": [j for j in jars.split("\n") if j],
                          "classDetails": static["classDetails"]},
            "system": static["system"],
            "config": {"extraListeners": self.spark_conf.get("spark.extraListeners"),
                       "openLineageConfig": _openlineage_entries(self.spark_conf),
                       "catalogClass": static["catalogClass"],
                       "extensions": self.spark_conf.get("spark.sql.extensions")},
            "logicalPlan": {"nodes": nodes} if nodes is not None else None,
            "metrics": None if self.settings.metrics_disabled else {"metrics": self.metrics.nodes()},
            "logs": list(logs or []),
        }
        size_kb = len(json.dumps(content, default=str).encode()) // 1024
        if size_kb > self.settings.payload_limit_kb:  # the JVM's serializer: the reason instead of the facet
            if not self._warned_size:
                self._warned_size = True
                log.warning("lineage capture: debug facet of %d kilobytes over debug.payloadSizeLimitInKilobytes: "
                            "left out", size_kb)
            return own.DebugRunFacet(logs=[f"Skipping debug facet due to payload size: {size_kb} kilobytes"])
        return own.DebugRunFacet(**content)

    def _smart_logs(self, record: RunRecord) -> list[str] | None:
        """Smart debug's reasons for an action's COMPLETE event (``debug.smart``), None when it stays quiet."""
        if not self.settings.smart or record.event_type != COMPLETE or record.job_type.job_type == "APPLICATION":
            return None
        logs = [] if record.inputs else ["No input datasets detected"]
        if not record.outputs:
            logs.append("No output datasets detected")
        mode = self.settings.smart_mode.lower()
        active = not record.outputs if mode == "output-missing" else bool(logs)
        return logs if active else None

    def apply(self, records: list[RunRecord], qe: Any = None) -> list[RunRecord]:
        """``records`` with the ``debug`` facet where the JVM puts it: every event when enabled, else an action's
        COMPLETE that smart debug finds lacking inputs or outputs. A facet that cannot be read is left out."""
        out = []
        nodes: list[dict[str, Any]] | None = None  # the plan is read once for all the events of one action
        for record in records:
            logs = None if self.enabled else self._smart_logs(record)
            if self.enabled or logs is not None:
                try:
                    if nodes is None and qe is not None:
                        nodes = plan_nodes(qe.optimizedPlan())
                    facet = self.facet(nodes, logs)
                except Exception:  # noqa: BLE001 - a diagnostic facet never costs the event
                    log.debug("cannot build the debug facet", exc_info=True)
                else:
                    record = attr.evolve(record, run_facets={**record.run_facets, DEBUG: facet})
            out.append(record)
        return out
