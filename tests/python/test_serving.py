"""The vLLM load format `gdunlock` (gdunlock.vllm_plugin) and the SGLang
plugin and loader class (gdunlock.sglang_plugin, gdunlock.sglang_loader),
against vLLM's and SGLang's own classes: the entry points in pyproject.toml
register the format, vLLM's and SGLang's command lines and SGLang's engine
arguments reach the loader, the weights of
a saved Llama equal safetensors' (device "cpu"), the expert filter and
select= leave tensors unread, tqdm draws on rank 0 only, and PyTorch pickle
checkpoints are refused naming the fix.

vLLM and SGLang are large and not installed beside the other tests: their
tests skip there, saying why. scripts/test-serving.sh (CI runs it) makes a
venv with both for the newest releases and one for the pinned pair, and runs
this file in each with GDU_REQUIRE_SERVING=1, which turns a failed import
into an error instead of a skip. The rules both share (gdunlock.serving) are tested
everywhere."""
import collections
import contextlib
import importlib
import importlib.metadata
import io
import json
import os
import re
import sys
import tempfile
import unittest
from types import SimpleNamespace
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fixtures import ROOT, torch  # noqa: E402
from test_gdunlock_api import write_safetensors  # noqa: E402

from gdunlock import iterator, serving  # noqa: E402

REQUIRED = os.environ.get("GDU_REQUIRE_SERVING") == "1"
_KEPT = []  # torch.library definitions live as long as their Library object


def _cpu_torchvision():
    """PyPI's torchvision wheels are built for a CUDA torch. Under a CPU
    torch their operator library does not load, and `import torchvision`
    (which transformers and SGLang do) then fails registering a fake kernel
    for torchvision::nms, the one it registers unconditionally. Declaring
    that operator (and qnms) lets the Python parts import; no test calls
    them."""
    try:
        import torchvision  # noqa: F401
    except ImportError:
        return
    except RuntimeError as e:
        if "torchvision::nms" not in str(e):
            raise
        for name in [m for m in sys.modules if m.split(".")[0] == "torchvision"]:
            del sys.modules[name]
        lib = torch.library.Library("torchvision", "DEF")
        for op in ("nms", "qnms"):
            lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _KEPT.append(lib)
        import torchvision  # noqa: F401


def _load(*names):
    """The modules named, or (None, why they cannot be imported here)."""
    if torch is None:
        return None, "torch is not installed"
    try:
        _cpu_torchvision()
        if not torch.cuda.is_available():  # vLLM finds no platform of its own here
            os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
        return [importlib.import_module(n) for n in names], None
    except Exception as e:  # not installed, or installed for another torch
        if REQUIRED:
            raise
        return None, f"{names[0].split('.')[0]} cannot be imported here " \
                     f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"


VLLM, VLLM_WHY = _load("vllm.plugins", "vllm.config", "vllm.model_executor.model_loader",
                       "vllm.engine.arg_utils", "vllm.utils.argparse_utils",
                       "gdunlock.vllm_plugin")
SGLANG, SGLANG_WHY = _load("sglang.srt.server_args", "sglang.srt.configs.load_config",
                           "sglang.srt.model_loader.loader",
                           "sglang.srt.model_executor.model_runner_components.load_model_utils",
                           "gdunlock.sglang_loader")

_models = None


def models():
    """Checkpoints made once: a tiny Llama written by transformers'
    save_pretrained in 4 shards with its index, the same as a PyTorch
    pickle, and a file of per-expert tensors; with {name: tensor} read by
    safetensors for each."""
    global _models
    if _models is None:
        import safetensors.torch
        from transformers import LlamaConfig, LlamaForCausalLM

        top = tempfile.TemporaryDirectory()
        llama, pickles, moe = (os.path.join(top.name, d) for d in ("llama", "pickles", "moe"))
        torch.manual_seed(0)
        config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, vocab_size=128)
        model = LlamaForCausalLM(config).to(torch.bfloat16)
        model.save_pretrained(llama, max_shard_size="60KB")
        os.makedirs(pickles)
        config.save_pretrained(pickles)
        torch.save(model.state_dict(), os.path.join(pickles, "pytorch_model.bin"))
        os.makedirs(moe)
        experts = {"model.embed_tokens.weight": torch.randn(16, 8)}
        for e in range(4):
            for part in ("gate_proj", "down_proj"):
                name = f"model.layers.0.mlp.experts.{e}.{part}"
                experts[f"{name}.weight"] = torch.full((32, 8), float(e))
                experts[f"{name}.weight_scale"] = torch.tensor([float(e)])
        safetensors.torch.save_file(experts, os.path.join(moe, "model.safetensors"))
        shards = [f for f in sorted(os.listdir(llama)) if f.endswith(".safetensors")]
        want = {}
        for f in shards:
            want.update(safetensors.torch.load_file(os.path.join(llama, f)))
        _models = SimpleNamespace(top=top, llama=llama, pickles=pickles, moe=moe, config=config,
                                  shards=shards, llama_tensors=want, moe_tensors=experts)
    return _models


def tearDownModule():
    if _models is not None:
        _models.top.cleanup()


class FakeModel(torch.nn.Module if torch is not None else object):
    """What the engines call load_weights on: keeps what it is given."""

    def load_weights(self, weights):
        self.got = {name: tensor.clone() for name, tensor in weights}
        return set(self.got)


class RecordIterators:
    """Patches serving.weights_iterator to keep each iterator it makes, for
    their stats()."""

    def __init__(self):
        self.made = []

    def __enter__(self):
        def record(*args, **kwargs):
            self.made.append(iterator.weights_iterator(*args, **kwargs))
            return self.made[-1]
        self.patch = mock.patch.object(serving, "weights_iterator", side_effect=record)
        self.patch.start()
        return self

    def __exit__(self, *exc):
        self.patch.stop()


class SameTensors:
    def assert_same(self, got, want, device="cpu"):
        self.assertEqual(sorted(got), sorted(want))
        for name, tensor in want.items():
            self.assertEqual(got[name].dtype, tensor.dtype, name)
            self.assertEqual(got[name].device.type, device, name)
            self.assertTrue(torch.equal(got[name], tensor), name)

    def progress_text(self, read, rank=None):
        """What read() draws on stderr, as rank `rank` of a torch.distributed
        group (None: no group)."""
        err = io.StringIO()
        with contextlib.ExitStack() as stack:
            stack.enter_context(contextlib.redirect_stderr(err))
            if rank is not None:
                stack.enter_context(mock.patch("torch.distributed.is_initialized",
                                               return_value=True))
                stack.enter_context(mock.patch("torch.distributed.get_rank", return_value=rank))
            read()
        return err.getvalue()


class ServingRulesTest(unittest.TestCase):
    """gdunlock.serving, without vLLM or SGLang."""

    def test_options_checked_and_others_refused_by_name(self):
        options, theirs = serving.split_options({"select": r"\.layers\.1\.", "memory_budget": 0,
                                                 "enable_weights_track": True},
                                                ("enable_weights_track",))
        self.assertEqual(options["select"].pattern, r"\.layers\.1\.")
        self.assertEqual(options["memory_budget"], 0)
        self.assertEqual(theirs, {"enable_weights_track": True})
        defaults, _ = serving.split_options(None)
        self.assertEqual(defaults, {"select": None, "memory_budget": iterator.DEFAULT_MEMORY_BUDGET})
        with self.assertRaisesRegex(ValueError, r"\['num_threads'\].*select.*memory_budget"):
            serving.split_options({"num_threads": 4})
        for bad in ({"select": "("}, {"select": 3}, {"memory_budget": -1},
                    {"memory_budget": True}, {"memory_budget": "1G"}):
            with self.assertRaises(ValueError, msg=bad):
                serving.split_options(bad)
        with self.assertRaisesRegex(ValueError, "must be a dict"):
            serving.split_options(["select"])

    def test_pickles_refused_naming_the_fix(self):
        with tempfile.TemporaryDirectory() as d:
            for name in ("pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"):
                open(os.path.join(d, name), "wb").close()
            with self.assertRaises(ValueError) as caught:
                serving.refuse_pickles(d, "the other loader")
            text = str(caught.exception)
            for part in ("pytorch_model-00001-of-00002.bin", "save_pretrained",
                         "the other loader", d):
                self.assertIn(part, text)
            write_safetensors(os.path.join(d, "model.safetensors"), {"a": ("U8", [1], b"x")})
            serving.refuse_pickles(d, "the other loader")  # safetensors beside them: read those
        serving.refuse_pickles("org/model-on-the-hub", "the other loader")  # not a folder here
        with self.assertRaisesRegex(ValueError, r"consolidated\.pt"):
            serving.refuse_files(["/m/a.safetensors", "/m/consolidated.pt"], "the other loader")
        serving.refuse_files(["/m/a.safetensors"], "the other loader")

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_weights_full_tensors_selected_before_reading(self):
        with tempfile.TemporaryDirectory() as d:
            tensors = {f"layers.{i}.{k}": ("F32", [2, 3], bytes(range(i * 24 + j, i * 24 + j + 24)))
                       for i in range(3) for j, k in enumerate(("w", "b"))}
            write_safetensors(os.path.join(d, "a.safetensors"), tensors)
            options, _ = serving.split_options({"select": r"\.w$"})
            with RecordIterators() as record:
                got = dict(serving.weights([d], "cpu", options,
                                           select=lambda name: not name.startswith("layers.2.")))
            self.assertEqual(sorted(got), ["layers.0.w", "layers.1.w"])
            for name, tensor in got.items():
                self.assertEqual(tensor.shape, (2, 3))
                self.assertEqual(tensor.numpy().tobytes(), tensors[name][2])
            self.assertEqual(record.made[0].stats()["skipped"], 4)
            self.assertEqual(record.made[0].stats()["bytes_read"], 48)

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_device_and_first_rank(self):
        self.assertEqual(serving.resolve_device("cpu"), torch.device("cpu"))
        self.assertEqual(serving.resolve_device(torch.device("cuda", 2)), torch.device("cuda", 2))
        with mock.patch("torch.cuda.current_device", return_value=3):
            self.assertEqual(serving.resolve_device("cuda"), torch.device("cuda", 3))
            self.assertEqual(serving.resolve_device(None), torch.device("cuda", 3))
        self.assertTrue(serving.on_first_rank())
        with mock.patch("torch.distributed.is_initialized", return_value=True), \
                mock.patch("torch.distributed.get_rank", side_effect=[0, 1]):
            self.assertTrue(serving.on_first_rank())
            self.assertFalse(serving.on_first_rank())


def entry_point_folder(top):
    """A distribution's metadata on sys.path carrying pyproject.toml's
    entry points, as `pip install` writes them (entry_points.txt), so that
    importlib.metadata finds what the package declares without building it."""
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        groups = tomllib.load(f)["project"].get("entry-points", {})
    info = os.path.join(top, "gdunlock_from_pyproject-0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: gdunlock-from-pyproject\nVersion: 0\n")
    with open(os.path.join(info, "entry_points.txt"), "w") as f:
        for group, items in groups.items():
            f.write(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in items.items()) + "\n")


@unittest.skipIf(VLLM is None, VLLM_WHY)
class VllmLoadFormatTest(SameTensors, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        (cls.plugins, cls.config, cls.loaders, cls.arg_utils, cls.argparse_utils,
         cls.plugin) = VLLM
        cls.m = models()

    def loader(self, **load_config):
        if "gdunlock" not in self.loaders._LOAD_FORMAT_TO_MODEL_LOADER:
            self.plugin.register()
        load_config.setdefault("use_tqdm_on_load", False)  # bars where a test looks for them
        return self.loaders.get_model_loader(
            self.config.LoadConfig(load_format="gdunlock", **load_config))

    def source(self, path, prefix=""):
        return self.loaders.DefaultModelLoader.Source(path, None, prefix=prefix)

    def cpu_config(self, load_config):
        """vLLM's config of a CPU worker. From vLLM 0.34 its x86 CPU platform
        refuses a config without Triton's CPU backend (triton-cpu, not on
        PyPI; vllm/platforms/cpu.py, check_and_update_config), for kernels
        these tests never run: they say Triton is there while the config is
        made."""
        import vllm.triton_utils
        with mock.patch.object(vllm.triton_utils, "HAS_TRITON", True):
            return self.config.VllmConfig(device_config=self.config.DeviceConfig(device="cpu"),
                                          load_config=load_config)

    def test_entry_point_registers_the_format(self):
        registry = self.loaders._LOAD_FORMAT_TO_MODEL_LOADER
        registry.pop("gdunlock", None)
        with tempfile.TemporaryDirectory() as top, \
                mock.patch.dict(os.environ), mock.patch.object(sys, "path", [top] + sys.path), \
                mock.patch.object(self.plugins, "plugins_loaded", False):
            os.environ.pop("VLLM_PLUGINS", None)
            entry_point_folder(top)
            importlib.invalidate_caches()
            declared = [ep.value for ep in importlib.metadata.entry_points(
                group="vllm.general_plugins", name="gdunlock")
                if ep.dist.name == "gdunlock-from-pyproject"]
            self.assertEqual(declared, ["gdunlock.vllm_plugin:register"])
            self.plugins.load_general_plugins()
        loader = self.loaders.get_model_loader(self.config.LoadConfig(load_format="gdunlock"))
        self.assertIs(type(loader), self.plugin.loader_class())
        self.assertIsInstance(loader, self.loaders.DefaultModelLoader)

    def test_command_line_reaches_the_loader(self):
        parser = self.arg_utils.EngineArgs.add_cli_args(
            self.argparse_utils.FlexibleArgumentParser())
        args = parser.parse_args(["--model", self.m.llama, "--load-format", "gdunlock",
                                  "--model-loader-extra-config",
                                  json.dumps({"select": r"\.layers\.1\.",
                                              "memory_budget": 1 << 20})])
        load_config = self.arg_utils.EngineArgs.from_cli_args(args).create_load_config()
        self.loader()  # registered
        loader = self.loaders.get_model_loader(load_config)
        self.assertIs(type(loader), self.plugin.loader_class())
        self.assertEqual(loader.options["select"].pattern, r"\.layers\.1\.")
        self.assertEqual(loader.options["memory_budget"], 1 << 20)

    def test_load_weights_gives_safetensors_tensors_on_the_model_device(self):
        """DefaultModelLoader.load_weights (vLLM's own) with the device
        from vLLM's device config, as a worker loads."""
        loader = self.loader()
        vllm_config = self.cpu_config(loader.load_config)
        model = FakeModel()
        model_config = SimpleNamespace(model=self.m.llama, revision=None, quantization=None,
                                       is_moe=False, multimodal_config=None)
        with self.config.set_current_vllm_config(vllm_config), RecordIterators() as record:
            loader.load_weights(model, model_config)
        self.assert_same(model.got, self.m.llama_tensors)
        self.assertEqual(record.made[0].stats()["bytes_read"],
                         sum(t.nbytes for t in self.m.llama_tensors.values()))

    def test_engine_started_before_the_model_is_built(self):
        """load_model starts gdunlock's engine for the weights' device, then
        vLLM's load_model builds the model and loads: the start overlaps the
        build."""
        loader = self.loader()
        vllm_config = self.cpu_config(loader.load_config)
        order = []
        with mock.patch.object(serving, "prepare", lambda d: order.append(("prepare", str(d)))), \
                mock.patch.object(self.loaders.DefaultModelLoader, "load_model",
                                  lambda self, config, model_config: order.append(("vllm",))):
            loader.load_model(vllm_config, None)
        self.assertEqual(order, [("prepare", "cpu"), ("vllm",)])

    def test_expert_filter_leaves_other_ranks_experts_unread(self):
        loader = self.loader(device="cpu")
        loader.local_expert_ids = {1, 3}  # what load_weights sets under expert parallelism
        with RecordIterators() as record:
            got = dict(loader._get_weights_iterator(self.source(self.m.moe)))
        skipped = {n for n in self.m.moe_tensors if re.search(r"experts\.[02]\..*\.weight$", n)}
        self.assert_same(got, {n: t for n, t in self.m.moe_tensors.items() if n not in skipped})
        self.assertEqual(len(skipped), 4)
        self.assertEqual(record.made[0].stats()["skipped"], 4)
        self.assertEqual(record.made[0].stats()["bytes_read"],
                         sum(t.nbytes for n, t in self.m.moe_tensors.items() if n not in skipped))

    def test_select_from_extra_config_and_the_source_prefix(self):
        loader = self.loader(device="cpu", model_loader_extra_config={"select": r"\.layers\.1\."})
        got = dict(loader._get_weights_iterator(self.source(self.m.llama, prefix="draft.")))
        want = {f"draft.{n}": t for n, t in self.m.llama_tensors.items() if ".layers.1." in n}
        self.assertTrue(want)
        self.assert_same(got, want)

    def test_extra_config_keys(self):
        with self.assertRaisesRegex(ValueError, r"\['enable_multithread_load'\].*select"):
            self.loader(model_loader_extra_config={"enable_multithread_load": True})
        loader = self.loader(model_loader_extra_config={"enable_weights_track": True})
        self.assertIs(loader.enable_weights_track, True)  # DefaultModelLoader saw vLLM's key
        self.assertEqual(loader.load_config.model_loader_extra_config,
                         {"enable_weights_track": True})

    def test_pickle_checkpoint_refused_naming_the_fix(self):
        loader = self.loader(device="cpu")
        for call in (lambda: loader.download_model(SimpleNamespace(model=self.m.pickles,
                                                                   revision=None)),
                     lambda: list(loader._get_weights_iterator(self.source(self.m.pickles)))):
            with self.assertRaises(ValueError) as caught:
                call()
            for part in ("pytorch_model.bin", "--load-format auto", "save_pretrained"):
                self.assertIn(part, str(caught.exception))

    def test_torchao_checkpoints_refused(self):
        loader = self.loader(device="cpu", safetensors_load_strategy="torchao")
        with self.assertRaisesRegex(ValueError, "--load-format safetensors"):
            loader._get_weights_iterator(self.source(self.m.llama))

    def test_progress_bar_on_rank_zero_only(self):
        def read(use_tqdm_on_load=True):
            return lambda: list(self.loader(device="cpu", use_tqdm_on_load=use_tqdm_on_load)
                                ._get_weights_iterator(self.source(self.m.llama)))
        self.assertIn("gdunlock", self.progress_text(read()))
        self.assertIn("gdunlock", self.progress_text(read(), rank=0))
        self.assertNotIn("gdunlock", self.progress_text(read(), rank=1))
        self.assertNotIn("gdunlock", self.progress_text(read(use_tqdm_on_load=False)))


@unittest.skipIf(SGLANG is None, SGLANG_WHY)
class SglangLoaderTest(SameTensors, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server_args, cls.load_config, cls.loaders, cls.load_model_utils, cls.ours = SGLANG
        cls.m = models()
        # What a scheduler process holds before it loads (_prepare_weights reads it).
        args = cls.server_args.ServerArgs(
            model_path=cls.m.llama, load_format=cls.ours.GdunlockModelLoader, device="cpu",
            model_loader_extra_config=json.dumps({"select": r"\.layers\.1\."}))
        cls.server_args.set_global_server_args_for_scheduler(args)
        cls.args = args

    def loader(self, **config):
        config = self.load_config.LoadConfig(load_format=self.ours.GdunlockModelLoader, **config)
        loader = self.loaders.get_model_loader(config)
        loader.device = "cpu"  # what load_model takes from SGLang's device config
        return loader

    def test_engine_arguments_reach_the_loader(self):
        """Engine(load_format=<class>, model_loader_extra_config=...) becomes
        ServerArgs, then the LoadConfig each model runner builds."""
        config = self.load_model_utils.build_load_config(
            server_args=self.args, tp_rank=0, remote_instance_weight_transporter_engine=None,
            remote_instance_weight_transporter_session_id=None, draft_model_idx=None,
            weight_cache_mode="off", weight_cache_socket=None)
        loader = self.loaders.get_model_loader(config)
        self.assertIs(type(loader), self.ours.GdunlockModelLoader)
        self.assertIsInstance(loader, self.loaders.DefaultModelLoader)
        self.assertEqual(loader.options["select"].pattern, r"\.layers\.1\.")

    def test_command_line_names_the_loader_through_the_entry_point(self):
        """`sglang serve --load-format gdunlock`: the entry point in
        pyproject.toml is an SGLang plugin (group sglang.srt.plugins) that
        adds the choice and has each LoadConfig take the name for the
        loader class."""
        from sglang.srt import plugins
        from sglang.srt.plugins.hook_registry import HookRegistry
        from sglang.srt.server_args import LOAD_FORMAT_CHOICES, prepare_server_args

        argv = ["--model-path", self.m.llama, "--load-format", "gdunlock", "--device", "cpu",
                "--model-loader-extra-config", json.dumps({"select": r"\.layers\.0\."})]
        config_class = self.load_config.LoadConfig
        with tempfile.TemporaryDirectory() as top, \
                mock.patch.dict(os.environ, {"SGLANG_PLUGINS": "gdunlock"}), \
                mock.patch.object(sys, "path", [top] + sys.path), \
                mock.patch.object(plugins, "_plugins_loaded", False), \
                mock.patch.object(HookRegistry, "_hooks", collections.defaultdict(list)), \
                mock.patch.object(HookRegistry, "_patched", set()), \
                mock.patch.object(config_class, "_verify_load_format",
                                  config_class._verify_load_format), \
                mock.patch.object(sys.modules["sglang.srt.server_args"], "LOAD_FORMAT_CHOICES",
                                  LOAD_FORMAT_CHOICES), \
                contextlib.redirect_stderr(io.StringIO()):
            kept = list(LOAD_FORMAT_CHOICES)
            try:
                with self.assertRaises(SystemExit):  # not a choice without the plugin
                    prepare_server_args(argv)
                entry_point_folder(top)
                importlib.invalidate_caches()
                declared = [ep.value for ep in importlib.metadata.entry_points(
                    group=plugins.GENERAL_PLUGINS_GROUP, name="gdunlock")
                    if ep.dist.name == "gdunlock-from-pyproject"]
                self.assertEqual(declared, ["gdunlock.sglang_plugin:register"])
                plugins.load_plugins()
                args = prepare_server_args(argv)
                # What a scheduler process holds (build_load_config reads it).
                self.server_args.set_global_server_args_for_scheduler(args)
                config = self.load_model_utils.build_load_config(
                    server_args=args, tp_rank=0, remote_instance_weight_transporter_engine=None,
                    remote_instance_weight_transporter_session_id=None, draft_model_idx=None,
                    weight_cache_mode="off", weight_cache_socket=None)
            finally:
                LOAD_FORMAT_CHOICES[:] = kept
                self.server_args.set_global_server_args_for_scheduler(self.args)
            loader = self.loaders.get_model_loader(config)
        self.assertIs(type(loader), self.ours.GdunlockModelLoader)
        self.assertEqual(loader.options["select"].pattern, r"\.layers\.0\.")

    def test_engine_started_before_the_model_is_built(self):
        """load_model starts gdunlock's engine for SGLang's device, then
        SGLang's load_model builds the model and loads."""
        loader, order = self.loader(), []
        with mock.patch.object(serving, "prepare", lambda d: order.append(("prepare", str(d)))), \
                mock.patch.object(self.loaders.DefaultModelLoader, "load_model",
                                  lambda self, **kw: order.append(("sglang", sorted(kw)))):
            loader.load_model(model_config=None, device_config=SimpleNamespace(device="cpu"))
        self.assertEqual(order, [("prepare", "cpu"), ("sglang", ["device_config", "model_config"])])

    def test_weights_equal_safetensors(self):
        """SGLang's resolve_model_weights and load_weights_and_postprocess
        around the loader's iterator."""
        loader, model = self.loader(), FakeModel()
        model_config = SimpleNamespace(model_path=self.m.llama, revision=None,
                                       hf_config=self.m.config)
        (resolved,) = loader.resolve_model_weights(model_config, model)
        self.assertEqual(sorted(map(os.path.basename, resolved.weight_files)), self.m.shards)
        with RecordIterators() as record:
            self.loaders.DefaultModelLoader.load_weights_and_postprocess(
                model, loader._get_weights_iterator(resolved.source, resolved_source=resolved),
                torch.device("cpu"))
        self.assert_same(model.got, self.m.llama_tensors)
        self.assertEqual(record.made[0].stats()["bytes_read"],
                         sum(t.nbytes for t in self.m.llama_tensors.values()))

    def test_select_from_extra_config(self):
        loader = self.loader(model_loader_extra_config={"select": r"experts\.[13]\."})
        source = self.loaders.DefaultModelLoader.Source(self.m.moe, None)
        got = dict(loader._get_weights_iterator(source))
        self.assert_same(got, {n: t for n, t in self.m.moe_tensors.items()
                               if re.search(r"experts\.[13]\.", n)})

    def test_extra_config_keys(self):
        with self.assertRaisesRegex(ValueError, r"\['enable_multithread_load'\].*select"):
            self.loader(model_loader_extra_config={"enable_multithread_load": True})

    def test_pickle_checkpoint_refused_naming_the_fix(self):
        with self.assertRaises(ValueError) as caught:
            self.loader().download_model(SimpleNamespace(model_path=self.m.pickles,
                                                         revision=None))
        for part in ("pytorch_model.bin", "load_format='auto'", "save_pretrained"):
            self.assertIn(part, str(caught.exception))

    def test_progress_bar_on_rank_zero_only(self):
        def read():
            source = self.loaders.DefaultModelLoader.Source(self.m.llama, None)
            list(self.loader()._get_weights_iterator(source))
        self.assertIn("gdunlock", self.progress_text(read))
        self.assertNotIn("gdunlock", self.progress_text(read, rank=1))


if __name__ == "__main__":
    unittest.main()
