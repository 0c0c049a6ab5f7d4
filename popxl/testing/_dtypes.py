from popxl import dtypes

__all__ = ["get_all_dtypes", "get_all_int_dtypes"]


def get_all_dtypes():
    """Every popxl dtype."""
    return [dtypes.bool, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16,
            dtypes.uint32, dtypes.uint64, dtypes.float8_143, dtypes.float8_152, dtypes.float16, dtypes.float32,
            dtypes.float64, dtypes.complex64, dtypes.complex128]


def get_all_int_dtypes(include_signed=True, include_unsigned=True):
    """The integer dtypes, signed and/or unsigned."""
    return [d for d in get_all_dtypes()
            if d.is_int and ((d.is_signed and include_signed) or (not d.is_signed and include_unsigned))]
