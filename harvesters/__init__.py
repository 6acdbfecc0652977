"""Cron-run readers of SQL logs (SQL Server Extended Events, Snowflake query history) that emit lineage."""
