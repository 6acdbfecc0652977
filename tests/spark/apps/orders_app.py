"""A small PySpark application for the spark-submit tests: knows nothing about lineage.

``orders_app.py <workdir> <ending>`` writes ``<workdir>/lake/orders``, prints the row count, then ends
the way ``<ending>`` says (the ENDINGS table).
"""
import os
import signal
import sys
import threading
import time

from pyspark.sql import SparkSession


def failing_write(spark, workdir):
    spark.range(1).selectExpr("CAST(raise_error('boom in a task') AS STRING) AS x").write.mode("overwrite").parquet(
        f"{workdir}/lake/failed")


def main(workdir, ending):
    if ending == "info_logging_first":  # Python logging configured before the session (and the plugin) exist
        import logging

        logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
    spark = SparkSession.builder.appName("Orders App").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        spark.range(5).withColumnRenamed("id", "order_id").write.mode("overwrite").parquet(f"{workdir}/lake/orders")
        print("rows:", spark.read.parquet(f"{workdir}/lake/orders").count(), flush=True)
        ENDINGS[ending](spark, workdir)
    finally:
        if ending != "no_stop":
            spark.stop()


def slow_write(spark, workdir):
    """A write of about 2 s (four 0.5 s tasks, one core): long enough for the execution poll to send its START."""
    spark.range(4).repartition(4).selectExpr(
        "id", "reflect('java.lang.Thread', 'sleep', CAST(500 AS BIGINT)) AS slept").write.mode("overwrite").parquet(
        f"{workdir}/lake/slow")


def terminated(spark, workdir):
    """A scheduler's kill (a timeout, ``kill <pid>``): SIGTERM to this process, which then waits to be ended."""
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(60)


def terminated_in_an_action(spark, workdir):
    """SIGTERM while the main thread waits on a long write (blocked in py4j)."""
    threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGTERM)).start()  # the write takes 8 s
    spark.range(8).repartition(8).selectExpr(
        "id", "reflect('java.lang.Thread', 'sleep', CAST(1000 AS BIGINT)) AS slept").write.mode("overwrite").parquet(
        f"{workdir}/lake/slow")
    time.sleep(60)


def terminated_in_an_rdd_action(spark, workdir):
    """SIGTERM while the main thread waits on a long RDD save (8 s)."""
    threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
    spark.sparkContext.parallelize(range(8), 8).map(lambda n: (time.sleep(1), n)[1]).saveAsTextFile(
        f"{workdir}/lake/rdd_slow")
    time.sleep(60)


def own_sigterm_handler(spark, workdir):
    """The application handles SIGTERM itself (exit code 7): its handler, not the plugin's, decides."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(7))
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(60)


def raise_error(spark, workdir):
    raise ValueError("boom from the app")


def info_logging(spark, workdir):
    """The application logs at INFO through Python's logging, then writes again: only its own lines show."""
    import logging

    logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
    logging.getLogger("app").info("writing again")
    spark.range(3).write.mode("overwrite").parquet(f"{workdir}/lake/again")


#: how the application ends after its one write
ENDINGS = {
    "stop": lambda spark, workdir: None,  # spark.stop() in the finally block
    "no_stop": lambda spark, workdir: None,  # the interpreter's exit ends it
    "action_fails": failing_write,  # a failing action's exception propagates out of the app
    "raise": raise_error,
    "exit3": lambda spark, workdir: sys.exit(3),
    "info_logging": info_logging,
    "info_logging_first": info_logging,
    "slow_write": slow_write,  # then spark.stop() at once, as the write's end is being reported
    "sigterm": terminated,
    "sigterm_in_an_action": terminated_in_an_action,
    "own_sigterm_handler": own_sigterm_handler,
    "sigterm_in_an_rdd_action": terminated_in_an_rdd_action,
}

if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
