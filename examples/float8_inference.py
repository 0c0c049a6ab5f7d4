"""float8 inference on the simulated GC200 (Bow-era float8 AMP): a convolution and a dense layer
in float8 with power-of-two scales, compared with a float32 run of the same model.

As in the PopXL user guide's float8 inference example:
- the weights are float8 variables, encoded on the host with a log2 scale that fits their range
  (`popxl.fp8_utils.host_fp8_mse_scale`);
- the images arrive as float32 and are cast on the device with `ops.pow2scale_cast_to_fp8`;
- `ops.conv_pow2scaled` / `ops.matmul_pow2scaled` take the log2 scale that undoes the operands'
  scales, so their float16 results are in the model's own units;
- the activations between the layers are float16 (ReLU), cast to float8 again for the dense layer.

Run it with `python examples/float8_inference.py` (`--batch`, `--size`, `--channels`).
"""
import argparse

import numpy as np
import popxl
import popxl.ops as ops
from popxl.fp8_utils import host_fp8_mse_scale, host_pow2scale_cast_to_fp8


def build_float32(ir, args, w_conv, w_dense):
    with ir.main_graph:
        x_stream = popxl.h2d_stream((args.batch, 3, args.size, args.size), popxl.float32, name="images")
        x = ops.host_load(x_stream)
        h = ops.relu(ops.conv(x, popxl.variable(w_conv, name="w_conv")))
        logits = ops.reshape(h, (args.batch, -1)) @ popxl.variable(w_dense, name="w_dense")
        out = popxl.d2h_stream(logits.shape, logits.dtype, name="logits")
        ops.host_store(out, logits)
    return x_stream, out


def build_float8(ir, args, w_conv, w_dense, s_x, s_h):
    """The same model in float8: s_x / s_h are the log2 scales of the images / hidden activations."""
    s_wc = host_fp8_mse_scale(w_conv, popxl.float8_143)
    s_wd = host_fp8_mse_scale(w_dense, popxl.float8_143)
    with ir.main_graph:
        x_stream = popxl.h2d_stream((args.batch, 3, args.size, args.size), popxl.float32, name="images")
        x = ops.host_load(x_stream)
        wc8 = popxl.variable(w_conv, popxl.float8_143, name="w_conv8", log2_scale=s_wc)
        wd8 = popxl.variable(w_dense, popxl.float8_143, name="w_dense8", log2_scale=s_wd)
        x8 = ops.pow2scale_cast_to_fp8(x, popxl.constant(s_x, popxl.int32, name="s_x"), popxl.float8_143)
        # conv(x * 2**s_x, w * 2**s_wc) * 2**-(s_x + s_wc) = conv(x, w), in float16
        h = ops.conv_pow2scaled(x8, wc8, popxl.constant(-(s_x + s_wc), popxl.int32, name="s_conv"))
        h = ops.relu(h)
        h8 = ops.pow2scale_cast_to_fp8(ops.reshape(h, (args.batch, -1)), popxl.constant(s_h, popxl.int32, name="s_h"),
                                       popxl.float8_143)
        logits = ops.matmul_pow2scaled(h8, wd8, popxl.constant(-(s_h + s_wd), popxl.int32, name="s_dense"))
        out = popxl.d2h_stream(logits.shape, logits.dtype, name="logits")
        ops.host_store(out, logits)
    return x_stream, out, (s_wc, s_wd)


def run(ir, x_stream, out_stream, images):
    session = popxl.Session(ir, "ipu_model")
    with session:
        return session.run({x_stream: images})[out_stream], session


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--size", type=int, default=16)
    p.add_argument("--channels", type=int, default=8)
    p.add_argument("--classes", type=int, default=10)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    images = rng.random((args.batch, 3, args.size, args.size), dtype=np.float32)
    w_conv = rng.normal(0, 0.2, (args.channels, 3, 3, 3)).astype(np.float32)
    features = args.channels * (args.size - 2) ** 2
    w_dense = rng.normal(0, 1 / np.sqrt(features), (features, args.classes)).astype(np.float32)

    ir32 = popxl.Ir()
    x32, o32 = build_float32(ir32, args, w_conv, w_dense)
    ref, s32 = run(ir32, x32, o32, images)

    # scales for the activations, from the float32 run's data ranges (a calibration pass)
    s_x = host_fp8_mse_scale(images, popxl.float8_143)
    hidden = np.maximum(0, _conv_np(images, w_conv))
    s_h = host_fp8_mse_scale(hidden.astype(np.float32), popxl.float8_143)
    ir8 = popxl.Ir()
    x8, o8, (s_wc, s_wd) = build_float8(ir8, args, w_conv, w_dense, s_x, s_h)
    out, s8 = run(ir8, x8, o8, images)

    rel = float(np.linalg.norm(out.astype(np.float64) - ref) / np.linalg.norm(ref))
    agree = float(np.mean(out.argmax(1) == ref.argmax(1)))
    w_bytes32 = w_conv.nbytes + w_dense.nbytes
    w_bytes8 = w_conv.size + w_dense.size
    t = s8.target
    print(f"conv 3->{args.channels} (3x3) + dense {features}->{args.classes}, batch {args.batch}, on a simulated "
          f"{t.name} ({t.num_tiles} tiles)")
    print(f"  log2 scales: images {s_x}, conv weights {s_wc}, hidden {s_h}, dense weights {s_wd}")
    print(f"  float8 logits vs float32: relative error {rel:.3f}, same class for {agree:.0%} of the batch")
    print(f"  weights: {w_bytes8:,} bytes in float8, {w_bytes32:,} in float32")
    print(f"  simulated cycles: float8 {s8.total_cycles:,}, float32 {s32.total_cycles:,}")
    assert out.dtype == np.float16 and out.shape == ref.shape
    assert rel < 0.1, rel
    return {"float8": out, "float32": ref, "relative_error": rel, "cycles_float8": s8.total_cycles,
            "cycles_float32": s32.total_cycles, "scales": (s_x, s_wc, s_h, s_wd)}


def _conv_np(x, w):
    """Valid 3x3 convolution in NumPy (for the calibration of the hidden activations' scale)."""
    n, c, hgt, wid = x.shape
    k = w.shape[-1]
    oh, ow = hgt - k + 1, wid - k + 1
    cols = np.stack([x[:, :, i:i + oh, j:j + ow] for i in range(k) for j in range(k)], axis=2)  # n, c, k*k, oh, ow
    return np.einsum("ncpij,mcp->nmij", cols, w.reshape(w.shape[0], c, k * k))


if __name__ == "__main__":
    main()
