"""SGLang load format `gdunlock`: `sglang serve --model-path MODEL
--load-format gdunlock` (or `python -m sglang.launch_server ...`).

pip's entry point `sglang.srt.plugins` (pyproject.toml) names register(),
which SGLang calls in each of its processes before it parses arguments or
builds a model (sglang.srt.plugins.load_plugins). It adds "gdunlock" to
--load-format's choices (add_load_format_choices) and has the LoadConfig
each model runner builds take the name for gdunlock's loader class
(sglang_loader.GdunlockModelLoader, imported only then): LoadConfig turns a
name into its LoadFormat enumeration, which has no member of ours, and
get_model_loader makes an instance of a class given as load_format.

SGLang is imported when register() runs, not with this module."""

LOAD_FORMAT = "gdunlock"
_VERIFY = "sglang.srt.configs.load_config.LoadConfig._verify_load_format"


def register():
    """The entry point: --load-format gdunlock known to this SGLang process."""
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType
    from sglang.srt.server_args import LOAD_FORMAT_CHOICES, add_load_format_choices

    if LOAD_FORMAT not in LOAD_FORMAT_CHOICES:
        add_load_format_choices([LOAD_FORMAT])
    HookRegistry.register(_VERIFY, name_to_loader_class, HookType.BEFORE)


def name_to_loader_class(load_config, *args, **kwargs):
    """Before LoadConfig checks its format: the name "gdunlock" (any case)
    becomes the loader class."""
    name = load_config.load_format
    if isinstance(name, str) and name.lower() == LOAD_FORMAT:
        from .sglang_loader import GdunlockModelLoader
        load_config.load_format = GdunlockModelLoader
