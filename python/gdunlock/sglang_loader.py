"""SGLang loader class: `sglang.Engine(model_path=..., load_format=
GdunlockModelLoader)` (SGLang's get_model_loader makes an instance of a
class given as load_format).

SGLang's DefaultModelLoader reading through gdunlock.weights_iterator: full
tensors on each rank's GPU (SGLang's weight loaders narrow them by rank), a
tqdm bar on rank 0, .safetensors checkpoints only. SGLang tells a loader
nothing of the experts a rank holds: `model_loader_extra_config`'s "select"
(a regular expression, the same on every rank) is the filter there."""
import time

from sglang.srt.configs.load_config import LoadFormat
from sglang.srt.model_loader.loader import DefaultModelLoader
from sglang.srt.model_loader.weight_utils import maybe_add_mtp_safetensors

from . import serving

_OTHER_LOADER = "SGLang's own loader (load_format='auto')"


class GdunlockModelLoader(DefaultModelLoader):
    """model_loader_extra_config takes serving.OPTIONS ("select",
    "memory_budget"); SGLang's multithread keys mean nothing here and are
    refused."""

    def __init__(self, load_config):
        # DefaultModelLoader refuses extra-config keys it does not know: it
        # sees none of ours.
        self.options, _ = serving.split_options(load_config.model_loader_extra_config)
        super().__init__(serving.config_with(load_config, model_loader_extra_config={}))
        self.load_config = load_config
        # Where the model's parameters are: set by load_model from SGLang's
        # device config; None (and "cuda") is this rank's current GPU.
        self.device = None

    def load_model(self, *, model_config, device_config):
        """SGLang's load_model, gdunlock's engine started first: it gets
        ready while SGLang builds the model."""
        self.device = device_config.device
        serving.start_engine(serving.resolve_device(self.device))
        return super().load_model(model_config=model_config, device_config=device_config)

    def _prepare_weights(self, model_name_or_path, revision, fall_back_to_pt,
                         allow_patterns_overrides=None):
        """SGLang's download and choice of files as for load_format
        "safetensors" (it refuses formats it does not know), after refusing
        a local folder of PyTorch pickles."""
        serving.refuse_pickles(model_name_or_path, _OTHER_LOADER)
        own, self.load_config = self.load_config, serving.config_with(
            self.load_config, load_format=LoadFormat.SAFETENSORS)
        try:
            prepared = super()._prepare_weights(model_name_or_path, revision, fall_back_to_pt,
                                                allow_patterns_overrides)
        finally:
            self.load_config = own
        serving.refuse_files(prepared[1], _OTHER_LOADER)
        return prepared

    def _get_weights_iterator(self, source, *, resolved_source=None,
                              startup_prefetch_started=False, startup_prefetch_active=False):
        """The weights of one source as SGLang's safetensors path gives them
        (its multi-token-prediction files added, its draft-layer filter),
        read by gdunlock; names prefixed by source.prefix."""
        if resolved_source is None:
            folder, files, _ = self._prepare_weights(source.model_or_path, source.revision,
                                                     source.fall_back_to_pt,
                                                     source.allow_patterns_overrides)
            if source.model_config is not None:
                files = maybe_add_mtp_safetensors(files, folder, "model.safetensors.index.json",
                                                  source.model_config.hf_config)
        else:
            files = list(resolved_source.weight_files)
        weights = serving.weights(files, serving.resolve_device(self.device), self.options,
                                  progress=serving.on_first_rank())
        if self.load_config.draft_model_idx is not None:
            return self._filter_mtp_weights(weights, source.prefix,
                                            self.load_config.draft_model_idx)
        if self.counter_before_loading_weights == 0.0:
            self.counter_before_loading_weights = time.perf_counter()
        return ((source.prefix + name, tensor) for name, tensor in weights)
