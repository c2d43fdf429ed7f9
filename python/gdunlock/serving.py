"""What the vLLM load format (vllm_plugin.py) and the SGLang loader class
(sglang_loader.py) share: their options, the refusal of checkpoints that
are not safetensors, the device and the weights themselves. Nothing here
imports vLLM or SGLang, so these rules are tested without them."""
import copy
import glob
import os
import re

from .iterator import DEFAULT_MEMORY_BUDGET, inside_model_folder, weights_iterator
from .kept_engines import prepare

# model_loader_extra_config keys of gdunlock's own, with what each must be.
OPTIONS = {
    "select": "a regular expression: only tensors whose name it matches (re.search) are read",
    "memory_budget": "an integer >= 0: bytes read ahead of the model's weight loaders",
}

_PICKLES = ("*.bin", "*.pt", "*.pth")

CONVERT = ("python -c \"from transformers import AutoModelForCausalLM as M; "
           "M.from_pretrained('{src}').save_pretrained('{src}-safetensors')\"")


def split_options(extra_config, framework_keys=()):
    """extra_config (the engine's model_loader_extra_config) -> (gdunlock's
    options, checked; the framework's own keys among framework_keys). Any
    other key is refused, naming those understood."""
    if extra_config is None:
        extra_config = {}
    if not isinstance(extra_config, dict):
        raise ValueError(f"model_loader_extra_config for the gdunlock loader must be a dict, "
                         f"not {type(extra_config).__name__}")
    unknown = sorted(set(extra_config) - set(OPTIONS) - set(framework_keys))
    if unknown:
        known = "; ".join(f"{k}: {v}" for k, v in OPTIONS.items())
        theirs = f" (and the engine's {', '.join(framework_keys)})" if framework_keys else ""
        raise ValueError(f"model_loader_extra_config keys {unknown} are not understood by the "
                         f"gdunlock loader; it takes {known}{theirs}")
    options = {"select": None, "memory_budget": DEFAULT_MEMORY_BUDGET}
    select = extra_config.get("select")
    if select is not None:
        if not isinstance(select, str):
            raise ValueError(f"select must be {OPTIONS['select']}, not {select!r}")
        try:
            options["select"] = re.compile(select)
        except re.error as e:
            raise ValueError(f"select {select!r} is not a regular expression: {e}") from None
    budget = extra_config.get("memory_budget", DEFAULT_MEMORY_BUDGET)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise ValueError(f"memory_budget must be {OPTIONS['memory_budget']}, not {budget!r}")
    options["memory_budget"] = budget
    return options, {k: v for k, v in extra_config.items() if k in framework_keys}


def refuse_pickles(folder, other_loader):
    """Raises when folder holds PyTorch pickle checkpoints (.bin, .pt,
    .pth) and no .safetensors file: gdunlock reads safetensors only.
    other_loader says how the engine loads such files itself."""
    if not os.path.isdir(folder) or glob.glob(os.path.join(glob.escape(folder),
                                                           "*.safetensors")):
        return
    pickles = sorted(os.path.basename(p) for pattern in _PICKLES
                     for p in glob.glob(os.path.join(glob.escape(folder), pattern)))
    if pickles:
        raise_not_safetensors(folder, pickles, other_loader)


def refuse_files(files, other_loader):
    """Raises when one of files (the engine's choice) is not .safetensors."""
    others = [f for f in files if not f.endswith(".safetensors")]
    if others:
        raise_not_safetensors(os.path.dirname(others[0]),
                              [os.path.basename(f) for f in others], other_loader)


def raise_not_safetensors(folder, names, other_loader):
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    raise ValueError(f"the gdunlock loader reads .safetensors checkpoints only, and {folder} "
                     f"has PyTorch pickle files ({shown}) instead. Convert them once: "
                     f"{CONVERT.format(src=folder)} and serve the new folder, or load these "
                     f"files with {other_loader}")


def config_with(load_config, **fields):
    """A shallow copy of an engine's LoadConfig with fields replaced: what
    the engines' own loader code is handed where it would refuse ours."""
    config = copy.copy(load_config)
    for name, value in fields.items():
        setattr(config, name, value)
    return config


def resolve_device(device):
    """The device the engine builds its model on -> the one to read into:
    "cuda" without an index is this worker's current GPU (the engines set
    it per rank before loading)."""
    import torch

    if device is None:
        device = "cuda"
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def start_engine(device):
    """Starts gdunlock's engine for device (a torch.device) in the
    background, for the time the serving engine spends building its model
    before it asks for weights (kept_engines.prepare). Other device types
    are left for the iterator to refuse."""
    if device.type in ("cuda", "cpu"):
        prepare(device)


def on_first_rank():
    """True unless this process is a torch.distributed rank other than 0
    (the one progress bar of a tensor-parallel load)."""
    import torch.distributed as dist

    return not dist.is_available() or not dist.is_initialized() or dist.get_rank() == 0


def keep_all(*rules):
    """One select= callable from rules (callables or None): a tensor is
    read when every rule keeps it; None when there is no rule."""
    rules = [r for r in rules if r is not None]
    if not rules:
        return None
    return lambda name: all(r(name) for r in rules)


def regex_rule(pattern):
    return None if pattern is None else (lambda name: pattern.search(name) is not None)


def weights(files, device, options, select=None, progress=False):
    """(name, tensor) of every tensor of files, full tensors on device, read
    through gdunlock.weights_iterator; select (a callable) joins the
    options' regular expression. The engine lists the files of the model
    folder: each must lie inside the folder it is listed in
    (inside_model_folder). Nothing is opened before the first tensor is
    asked for, and the engine is given back when the walk ends or the
    consumer stops."""
    files = [f if os.path.isdir(f) else inside_model_folder(f, os.path.dirname(os.path.abspath(f)))
             for f in files]
    it = weights_iterator(sorted(files), device=device, memory_budget=options["memory_budget"],
                          select=keep_all(regex_rule(options["select"]), select),
                          progress=progress)
    try:
        yield from it
    finally:
        it.close()
