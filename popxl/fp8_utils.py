"""Host-side float8 helpers. float8 arrives later: every function raises NotImplementedError."""

__all__ = ["find_exponential_range", "log_histogram", "CandidateConfig", "calculate_metric_mse",
           "calculate_candidate_metric", "host_fp8_mse_scale", "host_pow2scale_cast_to_fp8",
           "host_pow2scale_cast_from_fp8", "host_fp8_mse_scale_pb"]


def _later(name: str):
    raise NotImplementedError(f"popxl.fp8_utils.{name}: float8 arrives later.")


def find_exponential_range(fp_def):
    _later("find_exponential_range")


def log_histogram(src, ftype):
    _later("log_histogram")


class CandidateConfig:
    def __init__(self, format, src_ftype, dest_ftype, src_type):
        _later("CandidateConfig")


def calculate_metric_mse(histogram, limits, src_bias_starting_indices, candidate):
    _later("calculate_metric_mse")


def calculate_candidate_metric(hist_norm, limits, candidate, metric_type=None):
    _later("calculate_candidate_metric")


def host_fp8_mse_scale(src, dtype=None) -> int:
    _later("host_fp8_mse_scale")


def host_pow2scale_cast_to_fp8(src, dtype=None, log2_scale: int = 0, nan_on_overflow: bool = True):
    _later("host_pow2scale_cast_to_fp8")


def host_pow2scale_cast_from_fp8(src, dtype=None, log2_scale: int = 0):
    _later("host_pow2scale_cast_from_fp8")


def host_fp8_mse_scale_pb(src, dtype=None) -> int:
    _later("host_fp8_mse_scale_pb")
