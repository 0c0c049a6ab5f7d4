"""Host-side planners that spread one operation over many tiles (the counterpart of poplin's
planners). They are built only on `ipu/` and the codelets, and return `ipu` programs."""
from .matmul import (MatMulPlan, build_matmul, canonical_problem, map_output, mapping_for_output,  # noqa: F401
                     plan_for_shapes, plan_matmul)
