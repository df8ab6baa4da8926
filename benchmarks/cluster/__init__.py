"""The multi-host harness: `python -m benchmarks.cluster --hosts 3 --seconds 60 --partition`.

Several hosts, each a network namespace running `runworkers -n 2`, share one private
PostgreSQL that the harness starts; producers enqueue the chaos harness's job mix while the
harness cuts a host off, restarts the database and kills workers. At the end it checks that
nothing was lost or left stuck and that every double execution is explained by a fault, then
times a drain of a no-op backlog (throughput and database CPU per host count).

Also a Django app (its `jobs` module holds the drain's no-op job).
"""
