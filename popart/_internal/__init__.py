"""PopART's internal bindings (`popart._internal.ir`), as views of the popxl IR (popxl/_pb)."""
