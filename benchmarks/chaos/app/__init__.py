"""The chaos project's own app: the jobs it runs and the side tables they write."""
