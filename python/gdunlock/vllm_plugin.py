"""vLLM load format `gdunlock`: `vllm serve MODEL --load-format gdunlock`.

pip's entry point `vllm.general_plugins` (pyproject.toml) names register(),
which vLLM calls in each of its processes (vllm.plugins.
load_general_plugins). The loader is vLLM's DefaultModelLoader reading
through gdunlock.weights_iterator: full tensors on each worker's GPU (vLLM's
weight loaders narrow them by rank), tqdm on rank 0, the experts of other
expert-parallel ranks left unread, and .safetensors checkpoints only.

vLLM is imported when register() runs, not with this module, as vLLM asks
of its plugins (they are loaded early, in every process)."""
import functools
import os
import time

from . import serving

LOAD_FORMAT = "gdunlock"

# DefaultModelLoader's own extra-config key that still means something here.
_VLLM_KEYS = ("enable_weights_track",)

_OTHER_LOADER = "vLLM's own loader (--load-format auto)"


def register():
    """The entry point: makes --load-format gdunlock known to this vLLM
    process (called once a process by load_general_plugins)."""
    from vllm.model_executor.model_loader import register_model_loader

    register_model_loader(LOAD_FORMAT)(loader_class())


@functools.lru_cache(maxsize=None)
def loader_class():
    """GdunlockModelLoader, a subclass of vLLM's DefaultModelLoader (made on
    the first call, when vLLM is imported)."""
    from vllm.config import get_current_vllm_config_or_none
    from vllm.model_executor.model_loader.default_loader import DefaultModelLoader
    from vllm.model_executor.model_loader.ep_weight_filter import should_skip_weight
    from vllm.model_executor.model_loader.weight_utils import (
        filter_mm_encoder_only_safetensors_files, filter_safetensors_files_by_weight_name)

    class GdunlockModelLoader(DefaultModelLoader):
        """--load-format gdunlock. model_loader_extra_config takes
        serving.OPTIONS ("select", "memory_budget") and vLLM's
        "enable_weights_track"."""

        def __init__(self, load_config):
            # DefaultModelLoader refuses extra-config keys it does not know:
            # it sees only its own.
            self.options, theirs = serving.split_options(
                load_config.model_loader_extra_config, _VLLM_KEYS)
            super().__init__(serving.config_with(load_config, model_loader_extra_config=theirs))
            self.load_config = load_config

        def load_model(self, vllm_config, model_config, *args, **kwargs):
            """vLLM's load_model, gdunlock's engine started first: it gets
            ready while vLLM builds the model."""
            serving.start_engine(self.weights_device(vllm_config))
            return super().load_model(vllm_config, model_config, *args, **kwargs)

        def _prepare_weights(self, model_name_or_path, subfolder, revision, fall_back_to_pt,
                             allow_patterns_overrides):
            """vLLM's download and choice of files as for --load-format
            safetensors (it refuses formats it does not know), after
            refusing a local folder of PyTorch pickles."""
            serving.refuse_pickles(os.path.join(model_name_or_path, subfolder or ""),
                                   _OTHER_LOADER)
            own, self.load_config = self.load_config, serving.config_with(self.load_config,
                                                           load_format="safetensors")
            try:
                prepared = super()._prepare_weights(model_name_or_path, subfolder, revision,
                                                    fall_back_to_pt, allow_patterns_overrides)
            finally:
                self.load_config = own
            serving.refuse_files(prepared[1], _OTHER_LOADER)
            return prepared

        def _get_weights_iterator(self, source):
            """The weights of one source, as DefaultModelLoader's safetensors
            path gives them: vLLM's filters of whole files first, then
            gdunlock's iterator, names prefixed by source.prefix."""
            if self.load_config.safetensors_load_strategy == "torchao":
                raise ValueError("torchao-serialized checkpoints need vLLM's safetensors "
                                 "loader to rebuild their tensor subclasses: serve them "
                                 "with --load-format safetensors")
            folder, files, _, index_file = self._prepare_weights(
                source.model_or_path, source.subfolder, source.revision,
                source.fall_back_to_pt, source.allow_patterns_overrides)
            if self._encoder_only_lm_prefixes is not None:
                files = filter_mm_encoder_only_safetensors_files(
                    files, folder, index_file, self._encoder_only_lm_prefixes,
                    weights_mapper=self._encoder_only_weights_mapper)
                if not files:
                    raise RuntimeError(f"--mm-encoder-only left no weight file of "
                                       f"{source.model_or_path} to read")
            if source.is_unused_weight is not None:
                files = filter_safetensors_files_by_weight_name(files, source.is_unused_weight)
            experts = self.local_expert_ids  # set by load_weights under expert parallelism
            keep_expert = None if experts is None else \
                (lambda name: not should_skip_weight(name, experts))
            weights = serving.weights(
                files, self.weights_device(), self.options, select=keep_expert,
                progress=self.load_config.use_tqdm_on_load and serving.on_first_rank())
            if self.counter_before_loading_weights == 0.0:
                self.counter_before_loading_weights = time.perf_counter()
            return ((source.prefix + name, tensor) for name, tensor in weights)

        def weights_device(self, config=None):
            """Where the model's parameters are, as vLLM's load_model builds
            the model: LoadConfig.device when set, else the device config's
            (config's, or the current vLLM config's); "cuda" is this worker's
            GPU."""
            device = self.load_config.device
            if device is None:
                config = config or get_current_vllm_config_or_none()
                device = config.device_config.device if config is not None else None
            return serving.resolve_device(device)

    return GdunlockModelLoader
