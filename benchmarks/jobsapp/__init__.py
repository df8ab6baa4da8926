"""The benchmark's jobs, one definition per system, all running `work`: `bench` for every
scenario, and `bench_slow`, the same work under another name, for the slow jobs of the mixed
scenario (a slow job is usually another kind of job). The scenarios of django-sqlqueue alone
have jobs of their own (jobs.py), such as `bench_cpu`, CPU-bound (`burn`), for io_beside_cpu."""
