"""The PopART user guide's first program: add two tensors with the Builder and run it.

    python examples/popart/simple_addition.py

Unchanged PopART code: the ONNX graph the Builder makes is translated into the popxl IR and runs
on a simulated IPU model device (the same lowering and engine as PopXL programs).
"""
import numpy as np

import popart


def main():
    builder = popart.Builder()

    # Build a simple graph
    i1 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 2, 32, 32]))
    i2 = builder.addInputTensor(popart.TensorInfo("FLOAT", [1, 2, 32, 32]))

    o = builder.aiOnnx.add([i1, i2])

    builder.addOutputTensor(o)

    # Get the ONNX protobuf from the builder to pass to the Session
    proto = builder.getModelProto()

    # Create a runtime environment
    anchors = {o: popart.AnchorReturnType("ALL")}
    dataFlow = popart.DataFlow(1, anchors)
    device = popart.DeviceManager().createCpuDevice()

    # Create the session from the graph, data feed and device information
    session = popart.InferenceSession(proto, dataFlow, device)

    session.prepareDevice()
    anchors = session.initAnchorArrays()

    data_a = np.random.rand(1, 2, 32, 32).astype(np.float32)
    data_b = np.random.rand(1, 2, 32, 32).astype(np.float32)
    stepio = popart.PyStepIO({i1: data_a, i2: data_b}, anchors)
    session.run(stepio)

    assert np.allclose(anchors[o], data_a + data_b)
    print(f"{o}: {anchors[o].shape} float32, equal to data_a + data_b")
    return anchors[o], data_a + data_b


if __name__ == "__main__":
    main()
