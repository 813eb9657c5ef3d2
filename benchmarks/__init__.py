"""draco's benchmarks: `python -m benchmarks` (see docs/development/benchmarks.md)."""
