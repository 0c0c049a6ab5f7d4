"""popdist.tensorflow needs TensorFlow for the IPU, which the simulator does not provide."""
raise ImportError("popdist.tensorflow needs Graphcore's TensorFlow for the IPU, which this simulator does not "
                  "provide; PopDist works here with PopXL (popxl.Ir(replication='popdist')) and PopART "
                  "(popdist.popart.configureSessionOptions / getDevice)")
