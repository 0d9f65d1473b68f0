"""`make bench`: benchmarks that print medians, p99 and ratios measured in the same run."""
