"""Add two numbers on the simulated IPU (the example of the popart.ir / PopXL user guide)."""
import numpy as np
import popxl
import popxl.ops as ops

ir = popxl.Ir()
main = ir.main_graph
with main:
    # host load
    input0 = popxl.h2d_stream([1], popxl.float32, name="input0_stream")
    a = ops.host_load(input0, "a")
    input1 = popxl.h2d_stream([1], popxl.float32, name="input1_stream")
    b = ops.host_load(input1, "b")

    # add
    o = ops.add(a, b)

    # host store
    o_d2h = popxl.d2h_stream(o.shape, o.dtype, name="output_stream")
    ops.host_store(o_d2h, o)

# run the IR on the simulated IPU
inputs = {input0: np.array([1.0], np.float32), input1: np.array([2.0], np.float32)}
session = popxl.Session(ir, "ipu_model")
with session:
    outputs = session.run(inputs)

print("Input a is: ", inputs[input0])
print("Input b is: ", inputs[input1])
print("Result is: ", outputs[o_d2h])
assert outputs[o_d2h][0] == 3.0
