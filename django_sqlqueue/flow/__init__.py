"""Flow control's declarations (docs/flow-control.md), pure: what `@job(unique=…, concurrency=…,
rate_limit=…)` declared and the keys it gives each job. Where they act: the enqueue
(`enqueueing/unique.py`), the claim's gate (`databases/gate.py`), paused queues
(`operations.pause_queue`, `databases/paused.py`)."""
