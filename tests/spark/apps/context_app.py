"""A PySpark application of RDDs only, for the spark-submit tests: a SparkContext, never a session.

``context_app.py <workdir> [warnings]`` upper-cases ``<workdir>/in/lines.txt`` into ``<workdir>/out`` and counts the
result; with ``warnings`` it keeps Spark's log level (WARN), else it sets ERROR as many applications do.
"""
import sys

from pyspark import SparkConf, SparkContext


def main(workdir, level="ERROR"):
    sc = SparkContext(conf=SparkConf().setAppName("Context Only"))
    if level == "ERROR":
        sc.setLogLevel("ERROR")
    try:
        sc.textFile(f"{workdir}/in").map(str.upper).saveAsTextFile(f"{workdir}/out")
        print("lines:", sc.textFile(f"{workdir}/out").count(), flush=True)
    finally:
        sc.stop()


if __name__ == "__main__":
    main(sys.argv[1], "WARN" if sys.argv[2:] == ["warnings"] else "ERROR")
