"""A PySpark application of RDDs only, for the spark-submit tests: a SparkContext, never a session.

``context_app.py <workdir>`` upper-cases ``<workdir>/in/lines.txt`` into ``<workdir>/out`` and counts the result.
"""
import sys

from pyspark import SparkConf, SparkContext


def main(workdir):
    sc = SparkContext(conf=SparkConf().setAppName("Context Only"))
    sc.setLogLevel("ERROR")
    try:
        sc.textFile(f"{workdir}/in").map(str.upper).saveAsTextFile(f"{workdir}/out")
        print("lines:", sc.textFile(f"{workdir}/out").count(), flush=True)
    finally:
        sc.stop()


if __name__ == "__main__":
    main(sys.argv[1])
