"""Unit tests of the switchml client against a fake agent speaking the bridge protocol.

Run: PYTHONPATH=worker-agent/python /usr/bin/python3 -m unittest discover -s worker-agent/python/tests -v
The fake agent plays a world of two ranks whose other rank contributes ``x + 1`` for every
element ``x``, so a sum gives ``2x + 1`` and an average ``x + 0.5``, both exact in float32 for
the small integers used here. The end-to-end test against real agents and Gloo is
PyTorchBridgeTest (Java) driving ddp_bridge_check.py.
"""

import json
import mmap
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
from unittest import mock

import torch

import switchml
from switchml.client import _parse


class FakeAgent:
    """A single-session agent on a Unix socket with a shared-memory file; records requests."""

    def __init__(self, shm_bytes=4096, lanes=8, fail_with=None, shm_dir=None, world=2, rank=0, hold=None, passed_over=""):
        self.dir = tempfile.TemporaryDirectory(prefix="switchml-test-")
        self.socket_path = os.path.join(self.dir.name, "agent.sock")
        self.shm_path = os.path.join(shm_dir or self.dir.name, "agent.shm")
        self.shm_bytes = shm_bytes
        self.lanes = lanes
        self.fail_with = fail_with
        self.world = world
        self.rank = rank
        # a threading.Event: all-reduces are answered once it is set
        self.hold = hold
        # STATS's passedOver, as the agent's DirectLink writes it (form-encoded)
        self.passed_over = urllib.parse.quote_plus(passed_over)
        self.requests = []
        self.answered = 0
        with open(self.shm_path, "wb") as f:
            f.truncate(shm_bytes)
        fd = os.open(self.shm_path, os.O_RDWR)
        self.mm = mmap.mmap(fd, shm_bytes)
        os.close(fd)
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.socket_path)
        self.server.listen(1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        conn, _ = self.server.accept()
        with conn, conn.makefile("rb") as reader:
            for raw in reader:
                line = raw.decode().strip()
                self.requests.append(line)
                conn.sendall((self._reply(line) + "\n").encode())
                if line == "CLOSE":
                    break

    def _reply(self, line):
        request = _parse(line)
        verb = request[""]
        if verb == "OPEN":
            if request.get("token") == "refuse-me":
                return "ERR message=join of job 'j' refused: token does not match"
            verb = "INFO"  # a host agent answers OPEN as INFO once the job is joined
        if verb == "INFO":
            return ("OK version=2 shm=%s shmBytes=%d rank=%d world=%d job=test tenant=default k=%d s=4 "
                    "dtype=float32 byteOrder=LITTLE_ENDIAN dtypes=float32,int32 pipeline=8"
                    % (self.shm_path, self.shm_bytes, self.rank, self.world, self.lanes))
        if verb == "STATS":
            return ("OK requests=%d allReduces=%d smoothedRttNs=-1 backend=software passedOver=%s int32.backend=xdp "
                    "int32.passedOver=" % (self.answered, self.answered, self.passed_over))
        if verb == "CLOSE":
            return "OK"
        if verb == "ALLREDUCE":
            if self.hold is not None:
                self.hold.wait()
            if self.fail_with:
                return "ERR message=" + self.fail_with
            offset, count = int(request["offset"]), int(request["count"])
            dtype = torch.int32 if request.get("dtype") == "int32" else torch.float32
            view = torch.frombuffer(self.mm, dtype=dtype, count=count, offset=offset)
            if request["op"] == "sum":
                view.mul_(2).add_(1)
            else:
                view.add_(0.5)
            del view
            self.answered += 1
            return "OK us=7" + (" id=" + request["id"] if "id" in request else "")
        return "ERR message=unknown request"

    def close(self):
        self.server.close()
        self.thread.join(timeout=5)
        self.mm.close()
        if os.path.exists(self.shm_path):
            os.unlink(self.shm_path)
        self.dir.cleanup()


class FakeBucket:
    """Stands in for torch.distributed.GradBucket: only buffer() is used by the hook."""

    def __init__(self, tensor):
        self._tensor = tensor

    def buffer(self):
        return self._tensor


class ClientTest(unittest.TestCase):

    def agent(self, **kwargs):
        agent = FakeAgent(**kwargs)
        self.addCleanup(agent.close)
        return agent

    def test_info_is_read_at_connect(self):
        agent = self.agent(shm_bytes=1000 * 4, lanes=64)
        with switchml.Client(agent.socket_path) as client:
            self.assertEqual((client.rank, client.world_size, client.lanes), (0, 2, 64))
            self.assertEqual(client.shm_bytes, 4000)
            self.assertEqual(client.piece_elements, 448, "pieces are whole chunks of k, at most half the ring")
        self.assertEqual(agent.requests, ["INFO", "CLOSE"])

    def test_sum_and_average_in_place(self):
        agent = self.agent()
        with switchml.Client(agent.socket_path) as client:
            x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
            same = client.all_reduce(x)
            self.assertIs(same, x)
            self.assertTrue(torch.equal(x, torch.arange(12, dtype=torch.float32).reshape(3, 4) * 2 + 1))
            y = torch.arange(5, dtype=torch.float32)
            client.all_reduce(y, op="average")
            self.assertTrue(torch.equal(y, torch.arange(5, dtype=torch.float32) + 0.5))
        self.assertEqual(agent.requests[1:3], ["ALLREDUCE offset=0 count=12 op=sum dtype=float32 id=0",
                                               "ALLREDUCE offset=0 count=5 op=average dtype=float32 id=1"])

    def test_a_request_has_left_the_ring_when_its_future_completes(self):
        # else a caller's next call, made as soon as it has the result, may find the ring still taken (and
        # synchronize() must still wait for the completion itself)
        agent = self.agent()
        with switchml.Client(agent.socket_path) as client:
            seen = []
            complete = client._complete
            client._complete = lambda submission: (seen.append(len(client._inflight)), complete(submission))
            client.all_reduce(torch.arange(12, dtype=torch.float32))
            client.all_reduce(torch.arange(5, dtype=torch.float32), op="average")
            client.synchronize()
        self.assertEqual(seen, [0, 0])
        self.assertEqual(agent.requests[1:3], ["ALLREDUCE offset=0 count=12 op=sum dtype=float32 id=0",
                                               "ALLREDUCE offset=0 count=5 op=average dtype=float32 id=1"])

    def test_shared_tensor_is_all_reduced_in_place_without_staging(self):
        agent = self.agent(shm_bytes=64 * 4, lanes=8)
        with switchml.Client(agent.socket_path) as client:
            shared = client.shared_tensor(40)
            self.assertEqual(client.capacity, 24, "carved from the end of the ring")
            self.assertEqual(client.piece_elements, 8)
            shared.copy_(torch.arange(40, dtype=torch.float32))
            self.assertIs(client.all_reduce(shared), shared)
            self.assertTrue(torch.equal(shared, torch.arange(40, dtype=torch.float32) * 2 + 1))
            part = shared[10:20]
            part.fill_(3)
            client.all_reduce(part, op="average")
            self.assertTrue(torch.equal(shared[10:20], torch.full((10,), 3.5)))
            staged = torch.arange(30, dtype=torch.float32)
            client.all_reduce(staged)
            self.assertTrue(torch.equal(staged, torch.arange(30, dtype=torch.float32) * 2 + 1))
            self.assertTrue(torch.equal(shared[:10], torch.arange(10, dtype=torch.float32) * 2 + 1),
                            "the ring's pieces stay out of the shared tensor")
            halves = shared.view(torch.float16)[:8]
            halves.fill_(2)
            client.all_reduce(halves)
            self.assertTrue(torch.equal(halves, torch.full((8,), 5, dtype=torch.float16)),
                            "a 16-bit view of it is widened through the ring, not sent as float32")
            with self.assertRaisesRegex(ValueError, "leaves 4 elements of the 24-element staging ring"):
                client.shared_tensor(20)
        requests = [_parse(r) for r in agent.requests if r.startswith("ALLREDUCE")]
        self.assertEqual([(r["offset"], r["count"]) for r in requests[:2]], [("96", "40"), ("136", "10")],
                         "one request each, at the tensor's own place")
        for r in requests[2:]:
            self.assertLessEqual(int(r["offset"]) + 4 * int(r["count"]), 24 * 4, "staged inside the ring: %r" % r)
        self.assertEqual(requests[-1]["count"], "8")

    def test_open_joins_through_a_host_agent_first(self):
        agent = self.agent()
        fields = {"job": "j", "rank": 0, "world": 2, "token": "tok-0123456789", "k": 8}
        with switchml.Client(agent.socket_path, open_fields=fields) as client:
            self.assertEqual((client.rank, client.world_size, client.tenant), (0, 2, "default"))
        self.assertEqual(agent.requests[:2], ["OPEN job=j rank=0 world=2 token=tok-0123456789 k=8", "INFO"])
        refusing = self.agent()
        with self.assertRaisesRegex(switchml.SwitchMLError, "host agent at .* refused rank 0 of job j: join of job 'j' "
                                                            "refused: token does not match"):
            switchml.Client(refusing.socket_path, open_fields=dict(fields, token="refuse-me"))
        with self.assertRaisesRegex(ValueError, "OPEN field job must be a non-empty value without spaces"):
            switchml.Client(self.agent().socket_path, open_fields=dict(fields, job="two words"))

    def test_large_tensor_goes_in_pieces_of_half_the_ring(self):
        agent = self.agent(shm_bytes=64 * 4, lanes=16)
        with switchml.Client(agent.socket_path) as client:
            x = torch.arange(150, dtype=torch.float32)
            client.all_reduce(x)
            self.assertTrue(torch.equal(x, torch.arange(150, dtype=torch.float32) * 2 + 1))
            self.assertEqual(client.requests, 5)
            self.assertEqual(client.agent_us, 35)
        requests = [_parse(r) for r in agent.requests if r.startswith("ALLREDUCE")]
        self.assertEqual([r["count"] for r in requests], ["32", "32", "32", "32", "22"])
        for r in requests:
            self.assertLessEqual(int(r["offset"]) + 4 * int(r["count"]), 64 * 4, "inside the ring: %r" % r)

    def test_pipelined_tensors_wrap_around_the_ring(self):
        agent = self.agent(shm_bytes=64 * 4, lanes=16)
        with switchml.Client(agent.socket_path) as client:
            tensors = [torch.arange(20, dtype=torch.float32) + 100 * i for i in range(12)]
            futures = [client.all_reduce_async(t) for t in tensors]
            for i, (t, f) in enumerate(zip(tensors, futures)):
                self.assertIs(f.wait(), t)
                self.assertTrue(torch.equal(t, (torch.arange(20, dtype=torch.float32) + 100 * i) * 2 + 1), i)
        requests = [_parse(r) for r in agent.requests if r.startswith("ALLREDUCE")]
        self.assertEqual([int(r["id"]) for r in requests], list(range(12)))
        self.assertIn("0", [r["offset"] for r in requests[1:]], "the ring wrapped")

    def test_int32_sum_is_exact_and_average_truncates(self):
        agent = self.agent()
        with switchml.Client(agent.socket_path) as client:
            x = torch.tensor([1, -3, 2 ** 30], dtype=torch.int32)
            client.all_reduce(x)
            self.assertTrue(torch.equal(x, torch.tensor([3, -5, 2 ** 31 + 1 - 2 ** 32], dtype=torch.int32)))
            y = torch.tensor([1, -3, 4], dtype=torch.int32)
            client.all_reduce(y, op="average")  # the fake's other rank adds x + 1: sums 3, -5, 9; world 2
            self.assertTrue(torch.equal(y, torch.tensor([1, -2, 4], dtype=torch.int32)))
        self.assertTrue(all("dtype=int32 " in r and "op=sum" in r for r in agent.requests if r.startswith("ALLREDUCE")))

    def test_stats_come_after_earlier_requests(self):
        agent = self.agent(passed_over="xdp: k=8192 exceeds 358; tofino: down: 100% lost")
        with switchml.Client(agent.socket_path) as client:
            client.all_reduce_async(torch.ones(3))
            client.all_reduce_async(torch.ones(3))
            self.assertEqual(client.stats(), {"requests": 2, "allReduces": 2, "smoothedRttNs": -1, "backend": "software",
                                              "passedOver": "xdp: k=8192 exceeds 358; tofino: down: 100% lost",
                                              "int32.backend": "xdp", "int32.passedOver": ""})

    def test_non_contiguous_16_bit_and_refused_float64_tensors(self):
        agent = self.agent()
        with switchml.Client(agent.socket_path) as client:
            base = torch.arange(20, dtype=torch.float32).reshape(4, 5)
            t = base.t()
            self.assertFalse(t.is_contiguous())
            expected = t * 2 + 1
            client.all_reduce(t)
            self.assertTrue(torch.equal(t, expected))
            d = torch.arange(6, dtype=torch.float64) + 1e-12
            with self.assertRaisesRegex(TypeError, "does not take float64.*narrow"):
                client.all_reduce(d, op="average")
            self.assertTrue(torch.equal(d, torch.arange(6, dtype=torch.float64) + 1e-12), "left untouched")
            h = torch.arange(6, dtype=torch.float16)
            client.all_reduce(h, op="average")
            self.assertEqual(h.dtype, torch.float16)
            self.assertTrue(torch.equal(h, torch.arange(6, dtype=torch.float16) + 0.5))

    def test_leaf_tensor_requiring_grad(self):
        agent = self.agent()
        with switchml.Client(agent.socket_path) as client:
            w = torch.ones(3, requires_grad=True)
            client.all_reduce(w)
            self.assertTrue(torch.equal(w.detach(), torch.full((3,), 3.0)))

    def test_empty_tensor_sends_nothing(self):
        agent = self.agent()
        with switchml.Client(agent.socket_path) as client:
            client.all_reduce(torch.empty(0))
        self.assertEqual(agent.requests, ["INFO", "CLOSE"])

    def test_bad_arguments(self):
        agent = self.agent()
        with switchml.Client(agent.socket_path) as client:
            with self.assertRaises(TypeError):
                client.all_reduce(torch.arange(3))
            with self.assertRaises(ValueError):
                client.all_reduce(torch.ones(3), op="max")
            with self.assertRaises(TypeError):
                client.all_reduce([1.0, 2.0])

    def test_agent_error_message_is_raised(self):
        message = "job 3 aborted: rank 1 (127.0.0.1:4711) lost its control connection"
        agent = self.agent(fail_with=message)
        with switchml.Client(agent.socket_path) as client:
            with self.assertRaises(switchml.SwitchMLError) as raised:
                client.all_reduce(torch.ones(4))
            self.assertEqual(str(raised.exception), message)

    def test_missing_agent_is_a_clear_error(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(switchml.SwitchMLError) as raised:
                switchml.Client(os.path.join(d, "nobody.sock"))
            self.assertIn("switchml worker serve", str(raised.exception))

    def test_socket_from_environment(self):
        agent = self.agent()
        previous = os.environ.get("SWITCHML_SOCKET")
        os.environ["SWITCHML_SOCKET"] = agent.socket_path
        try:
            with switchml.Client() as client:
                self.assertEqual(client.socket_path, agent.socket_path)
        finally:
            if previous is None:
                del os.environ["SWITCHML_SOCKET"]
            else:
                os.environ["SWITCHML_SOCKET"] = previous

    def test_ddp_comm_hook_averages_and_returns_a_future(self):
        agent = self.agent()
        with switchml.Client(agent.socket_path) as client:
            grad = torch.arange(10, dtype=torch.float32)
            future = switchml.ddp_comm_hook(client, FakeBucket(grad))
            result = future.wait()
            self.assertIs(result, grad)
            self.assertTrue(torch.equal(result, torch.arange(10, dtype=torch.float32) + 0.5))

    def test_hook_inside_distributed_data_parallel(self):
        """One-rank DDP over Gloo: the hook's result lands in .grad, and an agent error fails backward()."""
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        with tempfile.TemporaryDirectory() as d:
            dist.init_process_group("gloo", init_method="file://" + os.path.join(d, "init"), rank=0, world_size=1)
            try:
                torch.manual_seed(0)
                model = torch.nn.Linear(3, 2)
                x = torch.randn(5, 3)
                model(x).sum().backward()
                expected = [p.grad.clone() + 0.5 for p in model.parameters()]
                model.zero_grad()

                agent = self.agent()
                with switchml.Client(agent.socket_path) as client:
                    ddp = DistributedDataParallel(model)
                    ddp.register_comm_hook(client, switchml.ddp_comm_hook)
                    ddp(x).sum().backward()
                    for p, e in zip(model.parameters(), expected):
                        self.assertTrue(torch.allclose(p.grad, e), (p.grad, e))
                self.assertTrue(any("op=average" in r for r in agent.requests), agent.requests)

                failing = self.agent(fail_with="job 9 aborted: rank 2 lost its control connection")
                with switchml.Client(failing.socket_path) as client:
                    ddp = DistributedDataParallel(torch.nn.Linear(3, 2))
                    ddp.register_comm_hook(client, switchml.ddp_comm_hook)
                    with self.assertRaises(Exception) as raised:
                        ddp(x).sum().backward()
                    self.assertIn("rank 2 lost its control connection", str(raised.exception))
            finally:
                dist.destroy_process_group()

    def test_a_result_that_cannot_be_copied_back_fails_that_all_reduce_alone(self):
        agent = self.agent()
        with switchml.Client(agent.socket_path) as client:
            expanded = torch.ones(1).expand(4)
            with self.assertRaisesRegex(ValueError, "elements share memory.*clone"):
                client.all_reduce(expanded)
            with mock.patch("switchml.client.check_tensor"):  # as if it had let it through
                with self.assertRaises(switchml.SwitchMLError) as raised:
                    client.all_reduce(expanded)
            self.assertRegex(str(raised.exception), r"rank 0: could not copy the all-reduce result back into the "
                                                    r"float32 tensor of shape \(4,\), strides \(0,\)")
            t = torch.ones(3)
            client.all_reduce(t)
            self.assertTrue(torch.equal(t, torch.full((3,), 3.0)), "the session goes on")

    def test_an_agent_that_does_not_answer_info_is_named(self):
        with tempfile.TemporaryDirectory() as d, socket.socket(socket.AF_UNIX) as mute:
            path = os.path.join(d, "mute.sock")
            mute.bind(path)
            mute.listen(1)
            with self.assertRaises(switchml.SwitchMLError) as raised:
                switchml.Client(path, timeout=0.2)
            self.assertIn("the switchml agent at %s did not answer INFO within 0.2 s" % path, str(raised.exception))
            with self.assertRaises(switchml.SwitchMLError) as raised:
                switchml.Client(path, timeout=0.2, open_fields={"job": "j", "rank": 3, "world": 4, "token": "t"})
            self.assertIn("did not answer OPEN (rank 3 of job j) within 0.2 s", str(raised.exception))

    def test_synchronize_stats_and_close_are_bounded_by_the_reply_timeout(self):
        hold = threading.Event()
        agent = self.agent(hold=hold)
        self.addCleanup(hold.set)  # before the agent closes
        client = switchml.Client(agent.socket_path, reply_timeout_s=0.3)
        future = client.all_reduce_async(torch.ones(3))
        with self.assertRaisesRegex(switchml.SwitchMLError, "at %s did not answer the 1 request.s. in flight within "
                                                            "0.3 s" % agent.socket_path):
            client.synchronize()
        with self.assertRaisesRegex(switchml.SwitchMLError, "did not answer STATS within 0.3 s"):
            client.stats()
        started = time.monotonic()
        client.close()
        self.assertLess(time.monotonic() - started, 3)
        with self.assertRaisesRegex(switchml.SwitchMLError, "client is closed"):
            future.wait()

    def test_parse_keeps_spaces_in_message(self):
        self.assertEqual(_parse("ERR message=rank 2 is gone: x=y\n"), {"": "ERR", "message": "rank 2 is gone: x=y"})
        self.assertEqual(_parse("OK us=5 k=8"), {"": "OK", "us": "5", "k": "8"})


_MIB = 1 << 20

# a training process on a tmpfs that other sessions have nearly filled: it prints what each call did, one JSON line each
_TMPFS_CLIENT = """
import json, sys, torch, switchml
client = switchml.Client(sys.argv[1])
def attempt(name, call):
    try:
        call()
        print(json.dumps([name, "ok"]), flush=True)
    except switchml.SwitchMLError as ex:
        print(json.dumps([name, str(ex)]), flush=True)
attempt("2 MiB", lambda: client.all_reduce(torch.ones(512 << 10)))
attempt("3 MiB", lambda: client.all_reduce(torch.ones(768 << 10)))
attempt("shared 2 MiB", lambda: client.shared_tensor(512 << 10).fill_(1))
attempt("4 KiB", lambda: client.all_reduce(torch.ones(1024)))
client.close()
"""


class TmpfsReservationTest(unittest.TestCase):
    """The shared memory on a real 8 MiB tmpfs that other sessions fill after it was created: a range the tmpfs cannot
    back is a SwitchMLError naming the file, the directory and the bytes, not a SIGBUS that kills the process. Needs
    root to mount the tmpfs (CI runs as root); without it, it fails saying so."""

    def setUp(self):
        if os.geteuid() != 0:
            self.fail("this test mounts a small tmpfs and needs root (CI runs as root); run it as root")
        directory = tempfile.mkdtemp(prefix="switchml-tmpfs-")
        self.addCleanup(os.rmdir, directory)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % (8 * _MIB), "tmpfs", directory], check=True)
        self.addCleanup(subprocess.run, ["umount", directory], check=True)
        self.tmpfs = directory

    def test_a_full_tmpfs_is_an_error_naming_the_file_not_a_sigbus(self):
        agent = FakeAgent(shm_bytes=6 * _MIB, lanes=64, shm_dir=self.tmpfs)
        self.addCleanup(agent.close)
        with open(os.path.join(self.tmpfs, "other-session.shm"), "wb") as other:
            other.write(bytes(5 * _MIB + _MIB // 2))
        self.addCleanup(os.unlink, os.path.join(self.tmpfs, "other-session.shm"))
        child = subprocess.run([sys.executable, "-c", _TMPFS_CLIENT, agent.socket_path], capture_output=True,
                               text=True, timeout=60,
                               env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(switchml.__file__))))
        if child.returncode < 0:
            self.fail("the training process died of %s: %s" % (signal.Signals(-child.returncode).name, child.stdout))
        self.assertEqual(child.returncode, 0, child.stderr)
        results = dict(json.loads(line) for line in child.stdout.splitlines())
        self.assertEqual(results["2 MiB"], "ok")
        for name, offset in (("3 MiB", 2 * _MIB), ("shared 2 MiB", 4 * _MIB)):
            message = results[name]
            self.assertIn("cannot reserve %d bytes at offset %d of the shared memory %s" % (2 * _MIB, offset,
                                                                                            agent.shm_path), message)
            self.assertIn("only %d bytes free in %s" % (_MIB // 2, self.tmpfs), message)
            self.assertIn("shm_bytes", message)
            self.assertIn("remount,size=", message)
        self.assertEqual(results["4 KiB"], "ok", "the client goes on")


if __name__ == "__main__":
    unittest.main()
