"""Variable-update ops (optimisers and gradient accumulation). All of them change a tensor in place."""
from .accumulate import (accumulate_, accumulate_mean_, accumulate_moving_average_,
                         accumulate_moving_average_square_, accumulate_square_, accumulator_scale_,
                         accumulator_zero_, sparse_accumulate_)
from .adam_updater import adam_updater, adamax_updater, lamb_updater
from .adam_var_update import adam_var_update
from .copy_var_update import copy_var_update_

__all__ = ["accumulate_", "accumulate_square_", "accumulate_mean_", "accumulate_moving_average_",
           "accumulate_moving_average_square_", "accumulator_scale_", "accumulator_zero_", "sparse_accumulate_",
           "adam_updater", "lamb_updater", "adamax_updater", "adam_var_update", "copy_var_update_"]
