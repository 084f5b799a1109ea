"""One unit of a module sharded by zero_stage 3 (accel._torch_sharded): the flat buffer its parameters are
views of, in the library's layout, whose storage exists only while the unit is gathered."""
import torch


def storage_of(tensor):
    return tensor.untyped_storage() if hasattr(tensor, "untyped_storage") else tensor.storage()._storage


class Unit:
    def __init__(self, model, index, numel, dtype, master_dtype, device):
        self.model = model
        self.index = index
        self.flat = torch.empty(numel, dtype=dtype, device=device)
        self.master_dtype = master_dtype  # the shares' dtype: the parameters' exact values
        self.members = []  # (parameter, offset in the layout)
        self.grads = None  # the gradients' buffer while backwards accumulate into it
        self.grad_views = {}  # id(parameter) -> its view of grads
        self.gathered = False
        self.prefetched = False  # its gather in flight, into flat
        self.waiting = set()  # id(parameter) whose gradient this backward has not accumulated yet
        self.done = False  # handed to the library in this backward

    def views(self, flat):
        return [(parameter, flat.narrow(0, offset, parameter.numel()).view(parameter.shape))
                for parameter, offset in self.members]

    def drop_grads(self):
        """The gradient buffer goes, and the parameters' .grad with it."""
        for parameter, _ in self.members:
            parameter.grad = None
        self.grads, self.grad_views = None, {}

    def _allocate(self):
        storage_of(self.flat).resize_(self.flat.numel() * self.flat.element_size())

    def _free(self):
        storage_of(self.flat).resize_(0)

    def gather(self):
        """flat holds the unit's values (collective, unless a prefetch of it only needs waiting for)."""
        if self.gathered:
            return
        if not self.prefetched:
            self._allocate()
        self.prefetched, self.gathered = False, True
        self.model.unit_gather(self.index, self.flat)

    def prefetch(self):
        """The unit's gather started (collective), unless it is gathered or on its way."""
        if not (self.gathered or self.prefetched):
            self._allocate()
            self.model.unit_prefetch(self.index, self.flat)
            self.prefetched = True

    def release(self):
        if self.prefetched:  # the library writes into flat until its gather
            self.gather()
        if self.gathered:
            self._free()
            self.gathered = False

    def lend_exact(self, device=None):
        """Its parameters hold views of a new buffer of their own dtype (the shares') with their exact values
        rather than of flat, which a mixed precision policy lowers to param_dtype (collective: the shares
        gathered), the buffer moved to device if given (FSDP's offload_to_cpu: one unit at a time on the unit's
        device). Returns their data of before, for take_back."""
        if self.prefetched:
            self.release()
        exact = torch.empty(self.flat.numel(), dtype=self.master_dtype, device=self.flat.device)
        self.model.unit_gather(self.index, exact)
        if device is not None:
            exact = exact.to(device)
        lent = []
        for parameter, view in self.views(exact):
            lent.append(parameter.data)
            parameter.data = view
        return lent

    def take_back(self, lent, rehook):
        """The parameters hold lend_exact's data of before again, and rehook(parameter) for each while flat has
        memory: a change of a parameter's dtype or device drops its gradient accumulator, and on torch < 2.1 the
        hook on it (whose making reads the parameter's storage)."""
        gathered = self.gathered
        self._allocate()
        for (parameter, _), data in zip(self.members, lent):
            parameter.data = data
            rehook(parameter)
        if not gathered:
            self._free()
