"""Our own conformance suite for the `django.tasks` backend contract of SQLQueueBackend.

Each test states a behaviour the framework documents for `Task`, `TaskResult`, `TaskError`,
`TaskContext`, backends and signals, and checks that our backend has it, with tasks run by
real `runworkers` processes. Where we knowingly deviate, the test says what the framework
expects and is marked `xfail(strict=True)` with the issue that tracks the fix.
"""
