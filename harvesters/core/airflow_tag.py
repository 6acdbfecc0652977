"""One call for a task's own code: the application name, Snowflake QUERY_TAG and SQL comment that tell the
harvesters which Airflow task run issued a statement.

A script run by Airflow (``python_task::task1`` connecting to SQL Server or Snowflake) calls
:func:`task_tag` once and puts what it returns where the harvester looks::

    from harvesters.core.airflow_tag import task_tag

    tag = task_tag("python_task::task1")
    pyodbc.connect(f"Driver=...;Server=db01;App={tag.app_name}")        # SQL Server: the application name
    cursor.execute("ALTER SESSION SET QUERY_TAG = %s", (tag.query_tag,))  # Snowflake: the query tag
    cursor.execute(tag.sql_comment + "INSERT INTO ...")                  # any statement: a leading comment

Inside an Airflow task run with the OpenLineage provider (``apache-airflow-providers-openlineage``), the parent
and root ids are computed by the provider's own macros (``lineage_parent_id``, ``lineage_root_parent_id`` of
``airflow.providers.openlineage.plugins.macros``) for the running task instance, so they are exactly the ids of
the provider's own events for that task. A script Airflow starts as a process of its own (BashOperator) has no
task instance: the DAG passes the ids in the environment (``OPENLINEAGE_PARENT_ID`` and
``OPENLINEAGE_ROOT_PARENT_ID``, the variables openlineage-dbt reads too), templated with the same macros::

    env={"OPENLINEAGE_PARENT_ID": "{{ macros.OpenLineageProviderPlugin.lineage_parent_id(task_instance) }}",
         "OPENLINEAGE_ROOT_PARENT_ID": "{{ macros.OpenLineageProviderPlugin.lineage_root_parent_id(task_instance) }}"}

Elsewhere (no Airflow), every form is the plain task name (the SQL comment is empty).

The forms are the ones the harvesters read (:func:`harvesters.core.tasks.find_parent_ids`, the JSON query tag
of :mod:`harvesters.snowflake.history`): ``openlineage_parent_id=<ns>/<dag.task>/<runId>`` and
``openlineage_root_parent_id=...`` in the application name or a comment, keys of the same names in a JSON tag.
SQL Server keeps 128 characters of an application name: when the task name and both ids do not fit, the
application name is the task name alone (never a cut id) and the statements carry the ids in
:attr:`AirflowTag.sql_comment`.
"""
from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Any

import attrs

from harvesters.core.tasks import compact_parent_id

#: SQL Server's limit on the application name (``program_name()`` is nvarchar(128)).
APP_NAME_LIMIT = 128
PARENT_ENV, ROOT_PARENT_ENV = "OPENLINEAGE_PARENT_ID", "OPENLINEAGE_ROOT_PARENT_ID"


@attrs.frozen
class AirflowTag:
    """A task's name and, inside an Airflow task run, its OpenLineage parent and root ids."""

    task: str
    parent_id: str | None = None  # <namespace>/<dag_id.task_id>/<task run id>
    root_parent_id: str | None = None  # <namespace>/<dag_id>/<dag run id>

    @property
    def ids(self) -> str:
        """``openlineage_parent_id=... openlineage_root_parent_id=...`` ("" outside Airflow)."""
        if not self.parent_id:
            return ""
        root = f" openlineage_root_parent_id={self.root_parent_id}" if self.root_parent_id else ""
        return f"openlineage_parent_id={self.parent_id}{root}"

    @property
    def sql_comment(self) -> str:
        """``/* openlineage_parent_id=... openlineage_root_parent_id=... */ `` to put before a statement's text
        ("" outside Airflow)."""
        return f"/* {self.ids} */ " if self.parent_id else ""

    @property
    def query_tag(self) -> str:
        """Snowflake's QUERY_TAG: ``{"openlineage_task": ..., "openlineage_parent_id": ..., ...}`` inside Airflow,
        the task name elsewhere (QUERY_TAG holds 2000 characters: everything fits)."""
        if not self.parent_id:
            return self.task
        tag = {"openlineage_task": self.task, "openlineage_parent_id": self.parent_id}
        if self.root_parent_id:
            tag["openlineage_root_parent_id"] = self.root_parent_id
        return json.dumps(tag, separators=(",", ":"))

    @property
    def app_name(self) -> str:
        """SQL Server's application name, at most 128 characters: the task name and the ids when all of it fits,
        else the task name and the compact form (``ol=<dag>/<task>/<run id>/<dag run id>``,
        :func:`harvesters.core.tasks.compact_parent_id`: no namespace, the harvest takes Airflow's from
        ``--parent-namespace``), else the task name alone (then put :attr:`sql_comment` before the statements)."""
        if not self.parent_id:
            return self.task[:APP_NAME_LIMIT]
        for ids in (self.ids, self.compact_ids):
            if ids and len(self.task) + 1 + len(ids) <= APP_NAME_LIMIT:
                return f"{self.task} {ids}"
        return self.task[:APP_NAME_LIMIT]

    @property
    def compact_ids(self) -> str:
        """The compact form of the ids ("" when it cannot be made: no parent, an id that is not a UUID)."""
        if not self.parent_id:
            return ""
        try:
            return compact_parent_id(self.parent_id, self.root_parent_id)
        except ValueError:
            return ""

    @property
    def app_name_fits(self) -> bool:
        """Whether :attr:`app_name` carries the ids (else the statements need :attr:`sql_comment`)."""
        return not self.parent_id or self.app_name != self.task[:APP_NAME_LIMIT]


def task_tag(task: str | None = None) -> AirflowTag:
    """The task's tag: ``task`` (default: the Airflow task's ``dag_id::task_id``, else ``unknown_task``) with the
    parent and root ids of the running Airflow task (the provider's macros), else of ``OPENLINEAGE_PARENT_ID`` /
    ``OPENLINEAGE_ROOT_PARENT_ID``, else none. Never raises: a failure to read Airflow gives the plain name."""
    found = _from_airflow() or _from_environment()
    if found is None:
        return AirflowTag(task or "unknown_task")
    job, parent, root = found
    name = task or ("::".join(job.split(".", 1)) if job else "unknown_task")
    return AirflowTag(name, parent, root)


def _from_environment() -> tuple[str, str, str | None] | None:
    parent = os.environ.get(PARENT_ENV, "").strip()
    if not parent:
        return None
    root = os.environ.get(ROOT_PARENT_ENV, "").strip() or None
    job = parent.rsplit("/", 2)[-2] if parent.count("/") >= 2 else ""
    return job, parent, root


def _from_airflow() -> tuple[str, str, str | None] | None:
    """(job name, parent id, root parent id) of the running task instance, by the provider's macros; None when
    no task is running in this process or the provider is not installed."""
    if "airflow" not in sys.modules:
        return None  # inside a task Airflow is imported already; importing it elsewhere would cost seconds
    instance = _current_task_instance()
    if instance is None:
        return None
    try:  # the Airflow running the task provides it: not a dependency of this package (hence by name)
        macros = importlib.import_module("airflow.providers.openlineage.plugins.macros")
    except ImportError:
        return None
    try:
        parent = macros.lineage_parent_id(instance)
        root_macro = getattr(macros, "lineage_root_parent_id", None)  # provider >= 2.0 (the root facet)
        root = root_macro(instance) if root_macro is not None else None
        job = macros.lineage_job_name(instance)
    except Exception:  # noqa: BLE001 - a provider that cannot tell leaves the plain task name
        return None
    return str(job), str(parent), str(root) if root else None


def _current_task_instance() -> Any | None:
    for module in ("airflow.sdk", "airflow.operators.python"):  # Airflow 3, then 2
        try:
            get_current_context = importlib.import_module(module).get_current_context
        except (ImportError, AttributeError):
            continue
        try:
            context = get_current_context()
        except Exception:  # noqa: BLE001 - "no context": not inside a running task
            return None
        return context.get("task_instance") or context.get("ti")
    return None
