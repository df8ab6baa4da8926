"""The worker runtime: what runs in `runworkers` processes.

`supervisor` starts and replaces worker processes, runs `maintenance`, and shares a `budget` of
jobs with its workers under `--stop-after`; each `worker` claims jobs (through databases/), runs
them (`runner`), records outcomes (`recording`), keeps its leases alive (`heartbeat`) and
reports what it did (`activity_log`).
"""
