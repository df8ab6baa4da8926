"""The chaos and soak harness: `python -m benchmarks.chaos --db sqlite --seconds 120`.

Producers enqueue a mix of jobs while two `runworkers` supervisors process them and the
harness kills workers, supervisors and database connections. At the end it checks every
guarantee of docs/guarantees.md against what really happened, and exits non-zero if one broke.
"""
