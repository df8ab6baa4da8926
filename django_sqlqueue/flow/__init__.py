"""Flow control: what may stop a due job from being claimed (docs/flow-control.md).

- `pausing`: pause and resume queues (`QueueState` rows); `paused`: the names claimers read
  once a second.
"""
