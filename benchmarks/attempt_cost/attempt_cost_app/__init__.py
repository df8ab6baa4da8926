"""The measured job, in an app of its own: any checkout's `@job` can register it."""
