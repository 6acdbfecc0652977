"""Snowflake: query history (an export file, or read live) -> statements.

* :mod:`.history`: rows, tags, lineage (ACCESS_HISTORY, else the SQL text), the harvest loop;
* :mod:`.live`: the live sources (ACCOUNT_USAGE, INFORMATION_SCHEMA) through the connector or ODBC;
* :mod:`.command`: ``harvest snowflake``'s options and its source for :func:`harvesters.core.run.run_harvest`.
"""
