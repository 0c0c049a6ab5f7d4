"""Host-side planners that spread one operation over many tiles (the counterpart of poplin's
planners). They are built only on `ipu/` and the codelets, and return `ipu` programs."""
from .matmul_build import (MatMulPlan, build_matmul, canonical_problem, map_output,  # noqa: F401
                           mapping_for_output, plan_for_shapes, plan_matmul)
