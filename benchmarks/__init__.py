"""draco's benchmarks: `python -m benchmarks` (see README, "Benchmarks")."""
