"""lineage_graph: the lineage graph of OpenLineage run events from any producer (this project's, the JVM
openlineage-spark integration, Airflow, dbt): ingest into SQLite, derive the current graph, the job hierarchy and
the task DAG, answer questions in the terminal, draw a page. Imports no producer."""
