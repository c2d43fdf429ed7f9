#!/usr/bin/env python3
"""GPU checks of gdunlock's ecosystem API (issue 12), one PASS/FAIL/SKIP line
each; a library this machine lacks is a SKIP with the reason:

  load-api-transformers  a small model built from a config (no download),
                         save_pretrained(max_shard_size=...), from_pretrained
                         unpatched and under gdunlock.patch(): identical
                         logits, both times printed
  load-api-dtypes        safe_open get_tensor / get_slice / get_shape /
                         get_dtype equal to safetensors' own safe_open for
                         every dtype the library writes, scalars and empty
                         tensors included
  load-api-tp-slices     every rank of 2-, 4- and 8-way splits on both
                         dimensions equal torch.chunk of the whole tensor and
                         read exactly their bytes (counted by the reader)
  load-api-iterator      weights_iterator with rank/world_size equal to
                         torch.chunk, within its memory budget
  load-api-blocks        a rank's slices read ahead by safe_open, and by
                         weights_iterator, come out of a few blocks of torch's
                         allocator (one per batch), not a block per tensor
  load-api-side-stream   a caller on a side stream: the memory torch gives a
                         read, still being read by that stream's kernels, is
                         written only once they are done; checked against a
                         control without the wait, which must see it written
  load-api-prepare       gdunlock.prepare(0) returns at once and starts the
                         GPU's engine (its gdu-io-N worker threads) in the
                         background; the load after it uses that engine
  load-api-start-with-cuda
                         in fresh processes that import torch, then
                         gdunlock: the engine's workers run once torch has
                         initialized CUDA, before any load (none with
                         GDUNLOCK_PREPARE=0), and processes that exit while
                         it starts exit cleanly

    python3 load_api.py --dir WORKDIR --out OUT
"""
import argparse
import json
import os
import sys
import tempfile
import time

results = []


def report(verdict, check, evidence):
    evidence = " ".join(str(evidence).split())  # one line each, for run.sh and the tables
    line = f"{verdict} {check}: {evidence}"
    print(line, flush=True)
    results.append({"verdict": verdict, "check": check, "evidence": evidence})


def raw(t):
    """A tensor's bytes as a flat uint8 tensor on the CPU."""
    import torch
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.contiguous().reshape(-1).view(torch.uint8).cpu()


def same(a, b):
    import torch
    return a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape) and torch.equal(raw(a), raw(b))


def check_transformers(work):
    try:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, LlamaConfig
    except Exception as e:  # noqa: BLE001
        return report("SKIP", "load-api-transformers", f"transformers unavailable: {e}")
    import gdunlock
    folder = os.path.join(work, "tiny-llama")
    cfg = LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=688,
                      num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=256, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
    model.save_pretrained(folder, max_shard_size="2MB", safe_serialization=True)
    shards = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors"))
    del model
    ids = torch.arange(1, 33, device="cuda:0")[None]

    def load():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        try:
            m = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.bfloat16,
                                                     device_map="cuda:0")
        except (ImportError, ValueError):  # no accelerate: load on the CPU, then move
            m = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.bfloat16)
            m = m.to("cuda:0")
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        with torch.no_grad():
            logits = m(ids).logits.float()
        return seconds, logits

    t_plain, plain = load()
    opened = gdunlock.safe_open.opened
    replaced = gdunlock.patch()
    try:
        t_ours, ours = load()
    finally:
        gdunlock.unpatch()
    through = gdunlock.safe_open.opened - opened
    ok = torch.equal(plain, ours) and through > 0
    report("PASS" if ok else "FAIL", "load-api-transformers",
           f"transformers {transformers.__version__}, {len(shards)} shards: logits identical "
           f"{torch.equal(plain, ours)} (max |diff| {(plain - ours).abs().max().item():.3g}); "
           f"from_pretrained {t_plain:.3f} s unpatched, {t_ours:.3f} s under gdunlock.patch() "
           f"({replaced} names replaced, {through} files opened through gdunlock.safe_open)")


def dtype_tensors():
    import torch
    names = ["bfloat16", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
             "uint8", "uint16", "uint32", "uint64", "bool", "float8_e4m3fn", "float8_e5m2",
             "float8_e8m0fnu", "complex64"]
    g = torch.Generator().manual_seed(3)
    out, missing = {}, []
    for n in names:
        dt = getattr(torch, n, None)
        if dt is None:
            missing.append(n)
            continue
        base = torch.randint(0, 120, (6, 10), generator=g, dtype=torch.int64)
        if dt == torch.complex64:
            full = torch.complex(base.float(), -base.float())
        elif dt == torch.bool:
            full = base % 2 == 1
        else:
            full = base.to(torch.float32).to(dt) if dt.is_floating_point else base.to(dt)
        out[f"{n}.matrix"] = full
        out[f"{n}.scalar"] = full[1, 2].clone()
        out[f"{n}.empty"] = full[:0, :3].clone()
        out[f"{n}.vector"] = full[2].clone()
    return out, missing


def check_dtypes(work):
    try:
        import torch
        from safetensors import safe_open as st_open
        from safetensors.torch import save_file
    except Exception as e:  # noqa: BLE001
        return report("SKIP", "load-api-dtypes", f"safetensors unavailable: {e}")
    import gdunlock
    tensors, missing = dtype_tensors()
    path = os.path.join(work, "dtypes.safetensors")
    try:
        save_file(tensors, path)
    except Exception as e:  # noqa: BLE001 (a dtype this safetensors cannot write)
        return report("FAIL", "load-api-dtypes", f"save_file: {e}")
    bad, checked, dtypes = [], 0, set()
    index_cases = [(slice(1, 4),), (slice(None), slice(2, 9, 3)), (-1,), (Ellipsis, 0),
                   (slice(None), slice(None)), (slice(5, 2),)]
    with st_open(path, framework="pt", device="cuda:0") as ref, \
            gdunlock.safe_open(path, framework="pt", device="cuda:0") as ours:
        if ours.keys() != sorted(ref.keys()):
            bad.append(f"keys {ours.keys()[:3]} vs {sorted(ref.keys())[:3]}")
        if ours.metadata() != ref.metadata():
            bad.append(f"metadata {ours.metadata()} vs {ref.metadata()}")
        for k in ref.keys():
            a, b = ours.get_tensor(k), ref.get_tensor(k)
            dtypes.add(ref.get_slice(k).get_dtype())
            checked += 1
            if not same(a, b) or a.device != b.device:
                bad.append(f"{k}: get_tensor {a.dtype}{tuple(a.shape)}@{a.device} vs "
                           f"{b.dtype}{tuple(b.shape)}@{b.device}")
            sa, sb = ours.get_slice(k), ref.get_slice(k)
            if sa.get_shape() != list(sb.get_shape()) or sa.get_dtype() != sb.get_dtype():
                bad.append(f"{k}: get_shape/get_dtype {sa.get_shape()} {sa.get_dtype()} vs "
                           f"{sb.get_shape()} {sb.get_dtype()}")
            for index in index_cases if k.endswith(".matrix") else [(Ellipsis,)]:
                try:
                    want = sb[index]
                except Exception as e:  # noqa: BLE001
                    want = e
                try:
                    got = sa[index]
                except Exception as e:  # noqa: BLE001
                    got = e
                checked += 1
                if isinstance(want, Exception) != isinstance(got, Exception) or \
                        (not isinstance(want, Exception) and not same(got.to(want.device), want)):
                    bad.append(f"{k}[{index}]: {got!r:.60} vs {want!r:.60}")
    report("PASS" if not bad else "FAIL", "load-api-dtypes",
           f"{checked} tensors and slices of {len(dtypes)} dtypes ({', '.join(sorted(dtypes))}) "
           f"equal to safetensors' safe_open on cuda:0, scalars and empty tensors included"
           + (f"; this torch lacks {missing}" if missing else "")
           + (f"; DIFFER: {bad[:4]}" if bad else ""))


def check_tp_slices(work):
    import torch
    from safetensors.torch import save_file

    import gdunlock
    path = os.path.join(work, "tp.safetensors")
    g = torch.Generator().manual_seed(5)
    full = {"col": torch.randn(4096, 1024, generator=g).to(torch.bfloat16),
            "row": torch.randn(1024, 4096, generator=g).to(torch.bfloat16),
            "odd": torch.randn(1000, 24, generator=g)}
    save_file(full, path)
    bad, cases = [], 0
    for world in (2, 4, 8):
        # One open per split, as a tensor-parallel process has; without
        # read-ahead each slice's own request reads exactly its bytes, with
        # it the split as a whole does (a walk's first cut reads the next
        # tensors' ahead, counted in the request that set it off).
        for readahead in (False, True):
            with gdunlock.safe_open(path, framework="pt", device="cuda:0",
                                    **({} if readahead else {"readahead": 0})) as f:
                split_bytes = 0
                for name, t in full.items():
                    for dim in (0, 1):
                        parts = torch.chunk(t, world, dim)
                        total = 0
                        for rank in range(world):
                            index = gdunlock.iterator.rank_index(list(t.shape), dim, rank, world)
                            before = f.stats()["bytes_read"]
                            got = f.get_slice(name)[index]
                            read = f.stats()["bytes_read"] - before
                            total += read
                            cases += 1
                            want = parts[rank] if rank < len(parts) else t.narrow(dim, 0, 0)
                            expect = want.numel() * want.element_size()
                            split_bytes += expect
                            if not same(got.cpu(), want) or (not readahead and read != expect):
                                bad.append(f"{name} {world}-way dim {dim} rank {rank} readahead "
                                           f"{readahead}: equal {same(got.cpu(), want)}, read "
                                           f"{read} of {expect} bytes")
                        if not readahead and total != t.numel() * t.element_size():
                            bad.append(f"{name} {world}-way dim {dim}: ranks read {total} bytes")
                if f.stats()["bytes_read"] != split_bytes:
                    bad.append(f"{world}-way, readahead {readahead}: read "
                               f"{f.stats()['bytes_read']} of {split_bytes} bytes")
    report("PASS" if not bad else "FAIL", "load-api-tp-slices",
           f"{cases} rank slices (2-, 4-, 8-way, both dimensions, 3 tensors, with and without "
           f"read-ahead) equal torch.chunk of the whole tensor, each reading exactly its bytes "
           f"(without read-ahead), every split its own bytes once" +
           (f"; BAD: {bad[:4]}" if bad else ""))
    return path, full


def check_iterator(path, full):
    import torch

    import gdunlock
    bad = []
    for world in (2, 4):
        for rank in range(world):
            got = {}
            for name, t in gdunlock.weights_iterator(path, device=0, rank=rank, world_size=world,
                                                     shard={"^col$": 0, "^row$": 1},
                                                     memory_budget=4 << 20):
                got[name] = t
            for name, dim in (("col", 0), ("row", 1), ("odd", None)):
                want = full[name] if dim is None else torch.chunk(full[name], world, dim)[rank]
                if not same(got[name].cpu(), want):
                    bad.append(f"{name} rank {rank}/{world}")
    report("PASS" if not bad else "FAIL", "load-api-iterator",
           "weights_iterator(rank, world_size, shard) parts equal torch.chunk for 2 and 4 ranks "
           "with a 4 MiB read-ahead budget" + (f"; BAD: {bad}" if bad else ""))


def check_blocks(work):
    """Reads ahead announce their batches (Target.reserve): torch's caching
    allocator asks the driver for one block a batch. 24 slices of 12 MiB,
    each of which torch gives a block of its own when asked one by one (it
    rounds tensors over 10 MiB to a block each), must come out of at most
    a third as many blocks, with the right values."""
    import torch
    from safetensors.torch import save_file

    import gdunlock
    path = os.path.join(work, "blocks.safetensors")
    g = torch.Generator().manual_seed(7)
    full = {f"model.layers.{i}.mlp.up_proj.weight":
            torch.randn(3072, 4096, generator=g).to(torch.bfloat16) for i in range(24)}
    save_file(full, path)
    names = sorted(full, key=lambda k: int(k.split(".")[2]))  # in layer order
    bad, blocks = [], {}

    def blocks_of(fn):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        before = torch.cuda.memory_stats()["segment.all.allocated"]
        got = fn()
        torch.cuda.synchronize()
        return got, torch.cuda.memory_stats()["segment.all.allocated"] - before

    def sliced():
        with gdunlock.safe_open(path, framework="pt", device="cuda:0") as f:
            return {k: f.get_slice(k)[:1536] for k in names}

    def iterated():
        return dict(gdunlock.weights_iterator(path, device=0, rank=0, world_size=2,
                                              shard={"up_proj": 0}))

    for how, fn in (("safe_open", sliced), ("weights_iterator", iterated)):
        got, blocks[how] = blocks_of(fn)
        wrong = [k for k in names if not same(got[k].cpu(), full[k][:1536])]
        if wrong or sorted(got) != sorted(names):
            bad.append(f"{how}: {len(wrong)} slices differ, {len(got)} of {len(names)}")
        if blocks[how] > len(names) // 3:
            bad.append(f"{how}: {blocks[how]} blocks")
        del got
    report("PASS" if not bad else "FAIL", "load-api-blocks",
           f"rank 0 of 2 of 24 tensors of 24 MiB (12 MiB slices): torch's allocator made "
           f"{blocks['safe_open']} blocks under safe_open's read-ahead and "
           f"{blocks['weights_iterator']} under weights_iterator (target <= 8; a block per "
           f"slice is 24); values equal" + (f"; BAD: {bad}" if bad else ""))


def engine_workers():
    """The gdu-io-N threads of this process (threads may end meanwhile)."""
    n = 0
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                n += f.read().startswith("gdu-io-")
        except FileNotFoundError:
            pass
    return n


def check_prepare(path, full):
    """prepare(0) starts the engine the next load uses: its workers run
    once wait() returns, and the load adds none."""
    import gdunlock

    gdunlock.release_engines()  # the checks before closed every reader
    before = engine_workers()
    t0 = time.perf_counter()
    p = gdunlock.prepare(0)
    returned = time.perf_counter() - t0
    p.wait(timeout=60)
    started = time.perf_counter() - t0
    running = engine_workers()
    with gdunlock.safe_open(path, framework="pt", device="cuda:0") as f:
        wrong = [k for k in full if not same(f.get_tensor(k).cpu(), full[k])]
        after = engine_workers()
    want = gdunlock._lib.lib().gdu_io_default_workers()
    ok = before == 0 and running == want and after == running and not wrong
    report("PASS" if ok else "FAIL", "load-api-prepare",
           f"prepare(0) returned in {returned * 1e3:.2f} ms, the engine was started "
           f"{started * 1e3:.1f} ms after the call; engine workers {before} before, {running} "
           f"after (default {want}), {after} after a load of {len(full)} tensors through it"
           + (f"; values differ: {wrong}" if wrong else ""))


def start_with_cuda_child(mode):
    """A fresh process of check_start_with_cuda (load_api.py
    --start-with-cuda-child MODE): torch imported, then gdunlock, then
    CUDA initialized; with mode "exit" it exits at once, else it prints
    the engine workers running when CUDA's start returned and within 0.5 s
    after (one JSON line)."""
    import torch
    import gdunlock

    t0 = time.perf_counter()
    torch.cuda.init()
    if mode == "exit":
        return
    torch.zeros(1, device="cuda:0")
    torch.cuda.synchronize()
    ready = time.perf_counter()
    at_ready = engine_workers()
    want = gdunlock._lib.lib().gdu_io_default_workers()
    while engine_workers() < want and time.perf_counter() - ready < 0.5:
        time.sleep(0.001)
    print(json.dumps({"cuda_s": ready - t0, "workers_at_ready": at_ready,
                      "workers": engine_workers(), "want": want}))


def check_start_with_cuda():
    """The engine starts while torch initializes CUDA, in fresh processes
    that import torch first (as bench/gpu/load_patterns.py's do)."""
    import subprocess

    def run(mode, **env):
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--start-with-cuda-child",
                            mode], capture_output=True, text=True, timeout=120,
                           env={**os.environ, **env})
        return p.returncode, (p.stdout.strip().splitlines() or ["{}"])[-1], p.stderr[-300:]

    rc, line, err = run("count")
    on = json.loads(line) if rc == 0 else {}
    rc_off, line, err_off = run("count", GDUNLOCK_PREPARE="0")
    off = json.loads(line) if rc_off == 0 else {}
    exits = [run("exit")[0] for _ in range(10)]
    ok = (rc == 0 and rc_off == 0 and on.get("workers") == on.get("want") and
          off.get("workers") == 0 and exits == [0] * 10)
    report("PASS" if ok else "FAIL", "load-api-start-with-cuda",
           f"engine workers {on.get('workers_at_ready')} when torch's CUDA start "
           f"({on.get('cuda_s', 0) * 1e3:.0f} ms) returned, {on.get('workers')} of "
           f"{on.get('want')} within 0.5 s after; with GDUNLOCK_PREPARE=0: "
           f"{off.get('workers')}; 10 processes exiting right after torch.cuda.init(): exit "
           f"codes {sorted(set(exits))}" + (f"; stderr: {err or err_off}" if not ok else ""))


def side_stream_reads(path, n, wait):
    """One read of path's tensor "w" (n bytes of 3) on a side stream into
    the block a tensor of 7s just freed there, while a clone of that tensor
    still waits behind a sleep on the stream. wait=False takes out
    safe_open's wait for the side stream (the control). Returns (whether
    the read got the freed block, whether the clone saw 7s, whether the read
    saw 3s)."""
    import torch

    import gdunlock
    real = torch.cuda.Stream.synchronize
    if not wait:  # safe_open's wait is the side stream's synchronize()
        torch.cuda.Stream.synchronize = lambda self: None
    try:
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            x = torch.full((n,), 7, dtype=torch.uint8, device="cuda:0")
            freed = x.data_ptr()
            # 10^9 cycles, half a second at the H200's 1.98 GHz: the
            # control's read, on an engine already started, ends long before
            torch.cuda._sleep(1_000_000_000)
            clone = x.clone()
            del x  # its block serves the stream's next allocation at once
            with gdunlock.safe_open(path, framework="pt", device="cuda:0") as f:
                got = f.get_tensor("w")
        torch.cuda.synchronize()
        return (got.data_ptr() == freed, bool((clone == 7).all()), bool((got == 3).all()))
    finally:
        torch.cuda.Stream.synchronize = real


def check_side_stream(work):
    """torch's allocator gives a stream the blocks that stream freed at
    once, its kernels still queued; the engine copies on streams of its own,
    so safe_open makes a caller's side stream finish first. Three reads with
    that wait must leave the clone its 7s; the control, without it, must see
    them overwritten (else this check could not tell)."""
    import torch
    from safetensors.torch import save_file
    if torch.cuda.get_allocator_backend() != "native":
        report("SKIP", "load-api-side-stream", "torch's allocator is "
               f"{torch.cuda.get_allocator_backend()}, which may not hand the block back")
        return
    n = 64 << 20
    path = os.path.join(work, "side-stream.safetensors")
    save_file({"w": torch.full((n,), 3, dtype=torch.uint8)}, path)
    runs = [side_stream_reads(path, n, True) for _ in range(3)]
    control = side_stream_reads(path, n, False)
    ok = all(r == (True, True, True) for r in runs) and control[0] and not control[1]
    report("PASS" if ok else "FAIL", "load-api-side-stream",
           f"(same block, clone kept, read right) with the wait: {runs}; "
           f"without it (control): {control}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=None)
    ap.add_argument("--out", default=".")
    ap.add_argument("--start-with-cuda-child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.start_with_cuda_child:
        return start_with_cuda_child(a.start_with_cuda_child)
    try:
        import torch
        if not torch.cuda.is_available():
            report("SKIP", "load-api", "no CUDA GPU visible to torch")
            return
    except ImportError as e:
        report("SKIP", "load-api", f"torch unavailable: {e}")
        return
    work = a.dir or tempfile.mkdtemp(prefix="gdu-load-api-")
    os.makedirs(work, exist_ok=True)
    for fn in (check_transformers, check_dtypes):
        try:
            fn(work)
        except Exception as e:  # noqa: BLE001
            report("FAIL", fn.__name__.replace("check_", "load-api-"), f"{type(e).__name__}: {e}")
    try:
        check_start_with_cuda()
    except Exception as e:  # noqa: BLE001
        report("FAIL", "load-api-start-with-cuda", f"{type(e).__name__}: {e}")
    try:
        check_blocks(work)
    except Exception as e:  # noqa: BLE001
        report("FAIL", "load-api-blocks", f"{type(e).__name__}: {e}")
    try:
        check_side_stream(work)
    except Exception as e:  # noqa: BLE001
        report("FAIL", "load-api-side-stream", f"{type(e).__name__}: {e}")
    try:
        path, full = check_tp_slices(work)
        check_iterator(path, full)
        check_prepare(path, full)
    except Exception as e:  # noqa: BLE001
        report("FAIL", "load-api-slices", f"{type(e).__name__}: {e}")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "load_api.json"), "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
