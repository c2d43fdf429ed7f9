"""What a process does around the loader's reads (issue 54): Ctrl-C during
a read propagates and the process exits; a child of fork() whose parent was
inside a read gets a clear error, never a hang. Every case that could hang
runs in a child process under a timeout."""
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fixtures import ROOT, in_forked_child, reference, torch  # noqa: E402
from test_gdunlock_api import write_safetensors  # noqa: E402
from test_loader_patterns import numbered_shards  # noqa: E402

import gdunlock  # noqa: E402
from gdunlock import serving  # noqa: E402
from gdunlock.shards_ahead import registry  # noqa: E402

EXIT_SECONDS = int(os.environ.get("T_EXIT", 30))  # a child that has not exited by then hangs


def tensors_file(path, count=8, nbytes=1 << 16):
    """count F32 tensors t0..t{count-1} of nbytes each, values distinct."""
    n = nbytes // 4
    write_safetensors(path, {f"t{i}": ("F32", [n], torch.arange(i * n, (i + 1) * n,
                                                                  dtype=torch.float32)
                                       .numpy().tobytes()) for i in range(count)})


def start_child(script, *args):
    """Starts script (Python) in a fresh interpreter that imports this
    tree's gdunlock and torch first, and waits until it has (torch takes
    seconds to import on a loaded machine: not counted as a hang)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    child = subprocess.Popen([sys.executable, "-c", "import torch; print('started', flush=True)\n"
                              + textwrap.dedent(script), *args], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    if child.stdout.readline() != "started\n":
        child.kill()
        raise AssertionError(f"the child did not start: {child.communicate()[1]}")
    return child


def exited(child, seconds=EXIT_SECONDS, text=None):
    """(whether child exited within seconds, its stdout, its stderr), text
    given on its input; one that did not is killed with the children it
    forked (which hold its output open)."""
    try:
        return (True, *child.communicate(text, timeout=seconds))
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        return (False, *child.communicate())


# A child that reads every tensor through safe_open again and again, with
# SIGINT sent to itself at one point of the engine calls: before or after
# a call, the first time or the sixth (a read ahead): the KeyboardInterrupt
# lands exactly there, as a Ctrl-C during a read does. Each case prints a
# line once its with block has closed the file.
INTERRUPTED = """
    import os, signal, sys
    from gdunlock import reader
    native, point = reader.lib(), [None, None, 0, 0]  # call, when, which, calls seen

    class Interrupting:
        def __getattr__(self, name):
            real = getattr(native, name)
            if name != point[0]:
                return real

            def interrupted(*args):
                point[3] += 1
                if point[3] == point[2] and point[1] == "before":
                    os.kill(os.getpid(), signal.SIGINT)
                rc = real(*args)
                if point[3] == point[2] and point[1] == "after":
                    os.kill(os.getpid(), signal.SIGINT)
                return rc
            return interrupted
    reader.lib = Interrupting
    import gdunlock
    for call in ("gdu_io_wait", "gdu_io_place", "gdu_io_submit_box_deferred"):
        for when in ("before", "after"):
            for nth in (1, 6):
                point[:] = call, when, nth, 0
                try:
                    with gdunlock.safe_open(sys.argv[1], "pt", device="cpu", backend="pread") as f:
                        for _ in range(50):
                            for name in f.keys():
                                f.get_tensor(name)
                    print(call, when, nth, "never interrupted", flush=True)
                except KeyboardInterrupt:
                    print(call, when, nth, "closed", flush=True)
"""

# A child that forks a reader for each line on its input (the delay before
# SIGINT, in seconds), and says whether it exited within argv[2] seconds of
# the signal, stopping at the first that did not: torch is imported once,
# not once a try.
FORKS_READERS = """
    import os, signal, sys, time
    import gdunlock
    for line in sys.stdin:
        pid = os.fork()
        if pid == 0:
            with gdunlock.safe_open(sys.argv[1], "pt", device="cpu", backend="pread") as f:
                while True:
                    for name in f.keys():
                        f.get_tensor(name)
        time.sleep(float(line))
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + float(sys.argv[2])
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                print("hung", flush=True)
                os._exit(1)
            time.sleep(0.01)
        else:
            print("exited", flush=True)
"""


@unittest.skipIf(torch is None, "torch is not installed")
class InterruptTest(unittest.TestCase):
    """Ctrl-C during get_tensor: a KeyboardInterrupt that lands right after
    the engine's wait returned left the read counted as out, and close()
    (the with block's end, or the interpreter's exit) waited for it for
    ever."""

    def test_an_interrupt_at_any_engine_call_closes(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            tensors_file(path)
            done, out, err = exited(start_child(INTERRUPTED, path), 2 * EXIT_SECONDS)
            self.assertTrue(done, f"an interrupted read hung; the cases before it:\n{out}")
            lines = out.splitlines()
            self.assertEqual(len(lines), 12, out + err)
            self.assertTrue(all(line.endswith("closed") for line in lines), out)

    def test_ctrl_c_at_random_times_exits(self):
        """SIGINT from outside, at times spread over a walk of reads: the
        process exits every time."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            tensors_file(path, count=16, nbytes=1 << 20)
            child = start_child(FORKS_READERS, path, str(EXIT_SECONDS))
            delays = [0.03 + 0.03 * attempt for attempt in range(10)]
            done, out, err = exited(child, 2 * EXIT_SECONDS, "".join(f"{t}\n" for t in delays))
            self.assertTrue(done, out)
            self.assertEqual(out.split(), ["exited"] * len(delays), err)


@unittest.skipIf(torch is None, "torch is not installed")
class ForkTest(unittest.TestCase):
    """A child of fork() whose parent had a thread inside get_tensor: the
    locks that thread held are held for ever in the child, where it does
    not exist, and the child's first call on the inherited safe_open
    waited on them. The child runs under alarm(): a hang kills it."""

    def fork_error(self, f, names):
        """In a forked child: whether reading each of names from f raises
        GdunlockError naming the fork, and f then closes."""
        for name in names:
            for read in (f.get_tensor, lambda n: f.get_slice(n)[1:3]):
                try:
                    read(name)
                    return False
                except gdunlock.GdunlockError as e:
                    if e.code != "GDU_ST_ERR_ENGINE" or "fork" not in e.message:
                        return False
        f.close()
        return True

    def test_a_child_forked_inside_a_read_gets_the_fork_error(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            tensors_file(path)
            f = gdunlock.safe_open(path, "pt", device="cpu", backend="pread")
            inside, leave = threading.Event(), threading.Event()
            empty = f._target.empty

            def held(*args, **kw):  # the thread stays inside get_tensor, its locks held
                inside.set()
                leave.wait(EXIT_SECONDS)
                return empty(*args, **kw)
            f._target.empty = held
            reading = threading.Thread(target=f.get_tensor, args=("t3",))
            reading.start()
            self.assertTrue(inside.wait(EXIT_SECONDS))
            try:
                killed, status = in_forked_child(lambda: self.fork_error(f, ["t0", "t3"]),
                                                 EXIT_SECONDS)
            finally:
                leave.set()
                reading.join()
            self.assertEqual(killed, 0, f"the child died of signal {killed} (SIGALRM: it hung)")
            self.assertEqual(status, 0, "the child's read did not fail naming the fork")
            self.assertEqual(f.get_tensor("t1")[0].item(), 1 * (1 << 14))  # the parent goes on
            f.close()

    def test_children_forked_beside_a_reading_thread(self):
        """Forks at whatever point a thread reading in a loop has reached:
        every child gets the fork error at once."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            tensors_file(path, count=16)
            stop = threading.Event()
            with gdunlock.safe_open(path, "pt", device="cpu", backend="pread") as f:
                def read_in_a_loop():
                    while not stop.is_set():
                        for name in f.keys():
                            f.get_tensor(name)
                reading = threading.Thread(target=read_in_a_loop)
                reading.start()
                results = []
                try:
                    while len(results) < 16 and results[-1:] in ([], [(0, 0)]):  # to a failure
                        results.append(in_forked_child(lambda: self.fork_error(f, ["t5"]),
                                                       EXIT_SECONDS))
                finally:
                    stop.set()
                    reading.join()
            self.assertEqual(results, [(0, 0)] * 16, "(signal 14, SIGALRM: a child hung)")


@unittest.skipIf(torch is None, "torch is not installed")
class NextShardTest(unittest.TestCase):
    """The next shard of a checkpoint, opened and read ahead before the
    caller opens it, is validated as a shard opened then would be."""

    def test_a_next_shard_rewritten_in_place_is_read_anew(self):
        """Rewritten in place with its modification time put back (cp -p,
        rsync --inplace -t): the same device, inode, size and modification
        time, other bytes; its change time moved. The bytes read ahead
        before were returned."""
        made_ahead = registry.made
        with tempfile.TemporaryDirectory() as d:
            paths, _ = numbered_shards(d)
            with gdunlock.safe_open(paths[0], "pt", device="cpu", backend="pread") as f:
                for name in f.keys():
                    f.get_tensor(name)
            self.assertIn(os.path.realpath(paths[1]), made_ahead)
            before = os.stat(paths[1])
            time.sleep(0.02)  # past the file system's clock tick: the change time moves
            new = {name: (dtype, list(shape), (torch.frombuffer(bytearray(data),
                                                                dtype=torch.float32) + 0.5)
                          .numpy().tobytes())
                   for name, (dtype, shape, data) in reference(paths[1]).items()}
            write_safetensors(paths[1], new)
            os.utime(paths[1], ns=(before.st_atime_ns, before.st_mtime_ns))
            after = os.stat(paths[1])
            self.assertEqual((after.st_ino, after.st_size, after.st_mtime_ns),
                             (before.st_ino, before.st_size, before.st_mtime_ns))
            with gdunlock.safe_open(paths[1], "pt", device="cpu", backend="pread") as f:
                for name in f.keys():
                    self.assertEqual(f.get_tensor(name).numpy().tobytes(), new[name][2], name)

    def test_a_next_shard_with_a_large_header_is_not_opened_ahead(self):
        """A caller that never opens the next shard paid for parsing its
        header inside a request of this one, a cost that grows with the
        header: one larger than the bound is left to the caller's own open,
        which reads it as usual."""
        with tempfile.TemporaryDirectory() as d:
            paths, _ = numbered_shards(d, n=2)
            many = {f"model.norms.{i}.weight": ("F32", [1], bytes(4)) for i in range(4000)}
            write_safetensors(paths[1], many)
            with open(paths[1], "rb") as f:
                self.assertGreater(int.from_bytes(f.read(8), "little"), 256 << 10)
            with gdunlock.safe_open(paths[0], "pt", device="cpu", backend="pread") as f:
                for name in f.keys():
                    f.get_tensor(name)
            self.assertEqual(registry.made, {})
            with gdunlock.safe_open(paths[1], "pt", device="cpu", backend="pread") as f:
                self.assertEqual(len(f.keys()), 4000)
                self.assertEqual(f.get_tensor("model.norms.7.weight").tolist(), [0.0])


@unittest.skipIf(torch is None, "torch is not installed")
class ModelFolderTest(unittest.TestCase):
    """What a model folder may reach, whichever form reads it: the index
    form refused a shard that is a link out of its folder, while
    weights_iterator of the folder and serving.weights of its files read
    it. One rule now: a file of the folder must resolve inside it, or,
    for a Hugging Face cache snapshot (.../snapshots/REV), inside that
    repository's blobs/."""

    def model(self, d):
        """A folder with a.safetensors, b.safetensors a link to a file
        outside it, and an index naming both; returns the folder."""
        folder, outside = os.path.join(d, "model"), os.path.join(d, "outside")
        os.mkdir(folder)
        os.mkdir(outside)
        write_safetensors(os.path.join(folder, "a.safetensors"), {"a": ("F32", [1], bytes(4))})
        write_safetensors(os.path.join(outside, "secret.safetensors"),
                          {"b": ("F32", [1], bytes(4))})
        os.symlink(os.path.join(outside, "secret.safetensors"),
                   os.path.join(folder, "b.safetensors"))
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            f.write('{"weight_map": {"a": "a.safetensors", "b": "b.safetensors"}}')
        return folder

    def assert_escapes(self, read):
        with self.assertRaises(gdunlock.GdunlockError) as ctx:
            read()
        self.assertEqual(ctx.exception.code, "GDU_ST_ERR_PATH_ESCAPE")
        self.assertIn("b.safetensors", ctx.exception.message)
        self.assertIn("outside", ctx.exception.message)

    def test_a_link_out_of_the_folder_is_refused_by_every_form(self):
        with tempfile.TemporaryDirectory() as d:
            folder = self.model(d)
            files = [os.path.join(folder, n) for n in ("a.safetensors", "b.safetensors")]
            options, _ = serving.split_options({})
            self.assert_escapes(lambda: gdunlock.Checkpoint(
                os.path.join(folder, "model.safetensors.index.json")))
            self.assert_escapes(lambda: list(gdunlock.weights_iterator(folder, device="cpu")))
            self.assert_escapes(lambda: list(serving.weights(files, "cpu", options)))
            self.assert_escapes(lambda: list(serving.weights([folder], "cpu", options)))

    def test_links_inside_the_folder_and_to_the_hub_cache_blobs_are_read(self):
        with tempfile.TemporaryDirectory() as d:
            blobs, snapshot = os.path.join(d, "blobs"), os.path.join(d, "snapshots", "abc123")
            os.makedirs(snapshot)
            os.mkdir(blobs)
            write_safetensors(os.path.join(blobs, "0f" * 20), {"a": ("F32", [1], bytes(4))})
            os.symlink(os.path.join("..", "..", "blobs", "0f" * 20),
                       os.path.join(snapshot, "model-00001-of-00002.safetensors"))
            write_safetensors(os.path.join(snapshot, "real.bin"), {"b": ("F32", [1], bytes(4))})
            os.symlink("real.bin", os.path.join(snapshot, "model-00002-of-00002.safetensors"))
            options, _ = serving.split_options({})
            self.assertEqual([n for n, _ in gdunlock.weights_iterator(snapshot, device="cpu")],
                             ["a", "b"])
            self.assertEqual([n for n, _ in serving.weights([snapshot], "cpu", options)],
                             ["a", "b"])
