"""Time emitter.redact.redact on typical event strings (ns per call).

Run: .venv/bin/python benchmarks/redact_speed.py"""
import sys
import timeit

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
from emitter.redact import redact

samples = {
 "sql_no_trigger": ("INSERT INTO analytics.daily_orders (order_id, customer_id, amount, order_date) "
                    "SELECT o.id, o.customer_id, SUM(l.amount), CAST(o.created_at AS DATE) "
                    "FROM sales.orders o JOIN sales.lines l ON l.order_id = o.id GROUP BY 1, 2, 4"),
 "sql_with_key_word": ("CREATE TABLE analytics.daily_orders (order_id INT PRIMARY KEY, customer_id INT NOT NULL, "
                       "amount DECIMAL(18,2), order_date DATE, "
                       "CONSTRAINT fk FOREIGN KEY (customer_id) REFERENCES sales.customers(id)) "
                       "WITH (DATA_COMPRESSION = PAGE)"),
 "jdbc_with_password": ("jdbc:sqlserver://sqlprod01.corp.example.com:1433;databaseName=warehouse;user=etl_loader;"
                        "password=Sup3r$ecret!;encrypt=true;trustServerCertificate=false;"
                        "applicationName=openlineage_parent_id=ns/dag.task/0190"),
 "namespace": "postgres://db.example.com:5432",
 "producer_url": "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/integration/spark",
}
for k, s in samples.items():
    n = 200000 if len(s) < 50 else 50000
    t = min(timeit.repeat(lambda s=s: redact(s), number=n, repeat=5)) / n
    print(f"{k:22s} len={len(s):3d}  {t*1e9:8.0f} ns/call")
big = ("SELECT o.id, o.customer_id, c.api_key_hash, 'x' AS label FROM sales.orders o "
       "JOIN sales.customers c ON c.id = o.customer_id "
       "WHERE o.token_count > 5 AND c.email LIKE '%@example.com' UNION ALL\n" * 60)
t = min(timeit.repeat(lambda: redact(big), number=20, repeat=3)) / 20
print(f"big_sql_triggered      len={len(big)}  {t*1e6:8.0f} us/call")
patho = "password={" + "a" * 20000 + " '" + "b" * 20000
t = min(timeit.repeat(lambda: redact(patho), number=5, repeat=3)) / 5
print(f"pathological           len={len(patho)}  {t*1e6:8.0f} us/call")
