"""What the benchmark ranks (gloo_allreduce.py, mpi_allreduce.py, switchml_host_allreduce.py) share: their statistic and
the tensors (torch ranks)."""


def percentile(sorted_values, p):
    """Nearest-rank percentile of a sorted list."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), int(-(-p * len(sorted_values) // 100))))
    return sorted_values[rank - 1]


def peer_tensors(elements, rank, world):
    """This rank's float32 torch tensor and the sum every rank must get back: element i of rank r holds
    (r + 1) * (1 + i % 8), so the sum, n(n+1)/2 * (1 + i % 8), is exact in float32 and in SwitchML's block floating
    point (small integers in every chunk); `switchml worker bench --values peers` fills the same."""
    import torch
    pattern = (torch.arange(elements, dtype=torch.int64) % 8 + 1).to(torch.float32)
    return pattern * float(rank + 1), pattern * float(world * (world + 1) // 2)
