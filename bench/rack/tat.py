"""What the benchmark ranks (gloo_allreduce.py, mpi_allreduce.py, switchml_host_allreduce.py) share: their statistic."""


def percentile(sorted_values, p):
    """Nearest-rank percentile of a sorted list."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), int(-(-p * len(sorted_values) // 100))))
    return sorted_values[rank - 1]
