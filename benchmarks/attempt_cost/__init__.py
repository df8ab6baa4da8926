"""The per-job cost of one worker's path, in-process, and what each per-attempt piece adds."""
