"""accel.utils.other: Accelerate's extract_model_from_parallel."""


def extract_model_from_parallel(model, keep_fp32_wrapper=True, keep_torch_compile=True):
    """The model without what prepare put around it (Accelerator.unwrap_model of the process's
    Accelerator); a model no Accelerator prepared is given back as it is."""
    from .. import state
    accelerator = state._live_accelerator()
    if accelerator is None:
        return model
    return accelerator.unwrap_model(model, keep_fp32_wrapper=keep_fp32_wrapper, keep_torch_compile=keep_torch_compile)
