"""The benchmark's jobs, one definition per system, all running `work`."""
