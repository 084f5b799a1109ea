"""accel.utils.other: Accelerate's extract_model_from_parallel."""


def extract_model_from_parallel(model, keep_fp32_wrapper=True, keep_torch_compile=True, recursive=False):
    """The model without what prepare put around it (Accelerator.unwrap_model of the process's
    Accelerator); a model no Accelerator prepared is given back as it is. recursive: also every submodule
    that is a prepared model's wrapper is replaced by its module, in place, as Accelerate does."""
    from .. import state
    accelerator = state._live_accelerator()
    if accelerator is None:
        return model
    unwrap = accelerator.unwrap_model
    model = unwrap(model, keep_fp32_wrapper=keep_fp32_wrapper, keep_torch_compile=keep_torch_compile)
    if recursive and hasattr(model, "named_modules"):
        for parent in list(model.modules()):
            for name, child in list(parent.named_children()):
                unwrapped = unwrap(child, keep_fp32_wrapper=keep_fp32_wrapper, keep_torch_compile=keep_torch_compile)
                if unwrapped is not child:
                    setattr(parent, name, unwrapped)
    return model
