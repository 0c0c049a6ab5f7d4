"""popdist.poptorch needs PopTorch, which the simulator does not provide."""
raise ImportError("popdist.poptorch needs PopTorch, which this simulator does not provide; PopDist works here with "
                  "PopXL (popxl.Ir(replication='popdist')) and PopART (popdist.popart.configureSessionOptions / "
                  "getDevice)")
