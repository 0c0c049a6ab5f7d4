"""Hypothesis profiles of the fuzz tests.

    python -m pytest tests/fuzz                                  # "ci": fixed seed, a few dozen programs
    IPU_SIM_FUZZ_PROFILE=long python -m pytest tests/fuzz -s     # by hand: random seeds, 1,000 programs
    IPU_SIM_FUZZ_PROFILE=long IPU_SIM_FUZZ_EXAMPLES=5000 ...     # as many as you like

The long profile prints how many programs it ran (and the seed to replay a failure).
"""
import os

from hypothesis import HealthCheck, settings

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile("ci", max_examples=int(os.environ.get("IPU_SIM_FUZZ_EXAMPLES", 30)), derandomize=True,
                          deadline=None, database=None, suppress_health_check=_SLOW_OK, print_blob=True)
settings.register_profile("long", max_examples=int(os.environ.get("IPU_SIM_FUZZ_EXAMPLES", 1000)), deadline=None,
                          database=None, suppress_health_check=_SLOW_OK, print_blob=True)
settings.load_profile(os.environ.get("IPU_SIM_FUZZ_PROFILE", "ci"))
