"""The benchmark's jobs, one definition per system, all running `work`: `bench` for every
scenario, and `bench_slow`, the same work under another name, for the slow jobs of the mixed
scenario (a slow job is usually another kind of job)."""
