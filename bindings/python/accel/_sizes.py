"""Sizes as Accelerate writes them ("10GB", "500MiB", an int of bytes), free of torch: the Accelerator's
save_model and the device maps both read them."""

# Accelerate's size units: decimal and binary, and a lowercase final "b" counting bits ("5Gb").
_SIZE_UNITS = {"GIB": 2**30, "MIB": 2**20, "KIB": 2**10, "GB": 10**9, "MB": 10**6, "KB": 10**3}


def convert_file_size_to_int(size):
    """Bytes in size: an int as it is; a string of a number and a unit ("5GB" = 5 * 10**9, "2GiB" = 2 * 2**30,
    "5Gb" = 5 * 10**9 / 8). ValueError for anything else or a negative size."""
    if isinstance(size, int) and not isinstance(size, bool):
        value = size
    else:
        text = str(size).strip()
        unit = next((unit for unit in _SIZE_UNITS if text.upper().endswith(unit)), None)
        try:
            value = int(float(text[:-len(unit)]) * _SIZE_UNITS[unit]) if unit else -1
        except ValueError:
            value = -1
        if unit and not unit.endswith("IB") and text.endswith("b"):
            value //= 8
    if value < 0:
        raise ValueError(f"`size` {size} is not in a valid format. Use an integer for bytes, or a string with an "
                         "unit (like '5.0GB').")
    return value
