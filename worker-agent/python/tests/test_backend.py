"""Unit tests of the switchml process group's configuration and agent start-up errors (no appliance needed).

The backend end to end (torchrun, 4 ranks, real agents and appliance) is TorchrunBackendTest (Java).
"""

import os
import time
import unittest
from unittest import mock

import torch.distributed as dist

import switchml
from switchml.agent import find_launcher
from switchml.config import Config


class _Store:
    """The part of a c10d store that Config.agree uses, as rank 0 has filled it."""

    def __init__(self, values):
        self.values = dict(values)

    def set(self, key, value):
        self.values[key] = value.encode("utf-8") if isinstance(value, str) else value

    def get(self, key):
        return self.values[key]

    def wait(self, keys, timeout):
        if any(key not in self.values for key in keys):
            raise RuntimeError("Wait timeout")  # as c10d's stores say it


class ConfigTest(unittest.TestCase):

    def test_backend_is_registered_by_import(self):
        self.assertIn("SWITCHML", dist.Backend._plugins)

    def test_defaults_and_environment(self):
        with mock.patch.dict(os.environ, {"SWITCHML_APPLIANCE": "10.0.0.7:9000", "SWITCHML_TENANT": "lab",
                                          "LOCAL_RANK": "1", "SWITCHML_AGENT_ARGS": "-k 1024 --mac off"}):
            config = Config(None, 3, 4)
        self.assertEqual((config.appliance_host, config.control_port, config.tenant), ("10.0.0.7", 9000, "lab"))
        self.assertEqual(config.local_rank, 1)
        self.assertEqual(config.agent_args, ["-k", "1024", "--mac", "off"])

    def test_pg_options_win_over_the_environment(self):
        with mock.patch.dict(os.environ, {"SWITCHML_APPLIANCE": "10.0.0.7"}):
            config = Config({"appliance": "appliance.lab", "control_port": 7000, "socket": "/run/a-{local_rank}.sock"}, 2, 4)
        self.assertEqual((config.appliance_host, config.control_port), ("appliance.lab", 7000))
        self.assertEqual(config.socket, "/run/a-2.sock")

    def test_bad_options_name_the_key_or_variable(self):
        with self.assertRaisesRegex(ValueError, "unknown switchml pg_options applianse"):
            Config({"applianse": "x"}, 0, 1)
        with mock.patch.dict(os.environ, {"SWITCHML_CONTROL_PORT": "seventy"}):
            with self.assertRaisesRegex(ValueError, r"\$SWITCHML_CONTROL_PORT must be an integer"):
                Config(None, 0, 1)
        with self.assertRaisesRegex(ValueError, "must not set --socket"):
            Config({"agent_args": "--socket /tmp/x"}, 0, 1)
        with self.assertRaisesRegex(ValueError, r"pg_options\['tls_ca'\]: no such file"):
            Config({"tls_ca": "/nonexistent/ca.pem"}, 0, 1)
        with self.assertRaisesRegex(TypeError, "must be a dict"):
            Config("appliance=x", 0, 1)

    def test_host_agent_sessions_carry_the_job_options(self):
        with mock.patch.dict(os.environ, {"SWITCHML_HOST_AGENT": "/run/switchml/host/agent.sock",
                                          "SWITCHML_AGENT_ARGS": "-k 1024 --mac=off -s 16",
                                          "SWITCHML_APPLIANCE": "10.0.0.7:9000"}):
            os.environ.pop("SWITCHML_CREDENTIAL_FILE", None)
            os.environ.pop("SWITCHML_SOCKET", None)
            os.environ.pop("LOCAL_WORLD_SIZE", None)
            config = Config({"job": "j", "token": "tok-0123456789"}, 1, 4)
        self.assertEqual(config.host_agent, "/run/switchml/host/agent.sock")
        fields = config.open_fields()
        self.assertEqual({key: fields[key] for key in ("job", "rank", "world", "token", "appliance", "controlPort",
                                                       "k", "s", "mac")},
                         {"job": "j", "rank": 1, "world": 4, "token": "tok-0123456789", "appliance": "10.0.0.7",
                          "controlPort": 9000, "k": "1024", "s": "16", "mac": "off"})
        with mock.patch.dict(os.environ, {"SWITCHML_HOST_AGENT": "/run/h.sock"}):
            for name in ("SWITCHML_APPLIANCE", "SWITCHML_CONTROL_PORT", "SWITCHML_BACKEND", "SWITCHML_AGENT_ARGS"):
                os.environ.pop(name, None)
            fields = Config({"job": "j", "token": "tok-0123456789"}, 0, 2).open_fields()
            self.assertFalse({"appliance", "controlPort", "backend", "k"} & set(fields),
                             "what the rank does not set, the host agent's own options decide: %r" % fields)
            fields = Config({"job": "j", "token": "tok-0123456789", "tenant": "team-a"}, 0, 2).open_fields()
            self.assertEqual(fields["tenant"], "team-a", "a tenant set is sent, for the agent to check")
            fields = Config({"job": "j", "token": "tok-0123456789", "control_port": 7000}, 0, 2).open_fields()
            self.assertEqual((fields.get("appliance"), fields["controlPort"]), (None, 7000), "the port alone")
            with self.assertRaisesRegex(ValueError, "exclude each other"):
                Config({"socket": "/run/a.sock"}, 0, 1)
            with self.assertRaisesRegex(ValueError, r"pg_options\['credential_file'\] is the host agent's own option"):
                Config({"credential_file": __file__}, 0, 1)
            with self.assertRaisesRegex(ValueError, "--transport is not a job option a host agent takes"):
                Config({"agent_args": "--transport nio"}, 0, 1)
            with self.assertRaisesRegex(ValueError, "-k needs a value"):
                Config({"agent_args": "-k"}, 0, 1)

    def test_a_hosts_ranks_are_summed_in_the_host_agent_under_torchrun(self):
        torchrun = {"SWITCHML_HOST_AGENT": "/run/h.sock", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}
        with mock.patch.dict(os.environ, torchrun):
            os.environ.pop("SWITCHML_LOCAL_REDUCE", None)
            fields = Config({"job": "j", "token": "tok-0123456789"}, 5, 8).open_fields()
            self.assertEqual((fields["localRank"], fields["localWorld"]), (1, 4))
            fields = Config({"job": "j", "token": "tok-0123456789", "local_reduce": "off"}, 5, 8).open_fields()
            self.assertFalse({"localRank", "localWorld"} & set(fields), "off: one worker per rank")
            fields = Config({"job": "j", "token": "tok-0123456789"}, 5, 6).open_fields()
            self.assertNotIn("localWorld", fields, "auto, and 4 does not divide 6: one worker per rank")
            with self.assertRaisesRegex(ValueError, "rank 5 of 6 is not local rank 1 of nodes of"):
                Config({"job": "j", "token": "tok-0123456789", "local_reduce": "on"}, 5, 6)
            with self.assertRaisesRegex(ValueError, "must be on, off or auto"):
                Config({"local_reduce": "yes"}, 5, 8)
        with mock.patch.dict(os.environ, {"SWITCHML_HOST_AGENT": "/run/h.sock", "SWITCHML_LOCAL_REDUCE": "on"}):
            os.environ.pop("LOCAL_WORLD_SIZE", None)
            with self.assertRaisesRegex(ValueError, r"\$LOCAL_WORLD_SIZE \(set by torchrun\) says nothing"):
                Config(None, 0, 2)
        with mock.patch.dict(os.environ, {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "SWITCHML_HOST_AGENT": "off"}):
            self.assertEqual(Config(None, 5, 8).local_world, 1, "per-rank agents never sum locally")
            with self.assertRaisesRegex(ValueError, "no host agent serves this rank"):
                Config({"local_reduce": "on"}, 5, 8)
        with mock.patch.dict(os.environ, torchrun):
            config = Config({"job": "j", "token": "tok-0123456789"}, 5, 8)
            with self.assertRaisesRegex(ValueError, "rank 5 would have 4 ranks of its host summed in the host agent, "
                                                    "rank 0 1"):
                config.agree(_Store({"switchml/local_world": b"1"}))
            config.agree(_Store({"switchml/local_world": b"4"}))
            with self.assertRaisesRegex(ValueError, "rank 0 said nothing of its own"):
                config.agree(_Store({}))

    def test_the_packaged_host_agent_is_used_where_it_serves(self):
        import socket
        import tempfile
        from switchml import config as config_module
        with tempfile.TemporaryDirectory() as tmp, socket.socket(socket.AF_UNIX) as listening:
            path = os.path.join(tmp, "agent.sock")
            listening.bind(path)
            listening.listen(4)
            with mock.patch.object(config_module, "HOST_AGENT_SOCKET", path), mock.patch.dict(os.environ, {}):
                for name in ("SWITCHML_HOST_AGENT", "SWITCHML_SOCKET", "SWITCHML_CREDENTIAL_FILE", "SWITCHML_TLS_CA"):
                    os.environ.pop(name, None)
                self.assertEqual(Config(None, 0, 2).host_agent, path, "auto: the packaged agent where it serves")
                self.assertIsNone(Config({"host_agent": "off"}, 0, 2).host_agent, "off: an agent per rank")
                self.assertIsNone(Config({"socket": "/run/a.sock"}, 0, 2).host_agent, "a rank's own socket wins")
                self.assertIsNone(Config({"credential_file": __file__}, 0, 2).host_agent,
                                  "a rank with credentials of its own starts its own agent")
                self.assertIsNone(Config({"agent_args": "--transport nio"}, 0, 2).host_agent,
                                  "agent options only an agent of its own takes")
                with mock.patch.dict(os.environ, {"SWITCHML_CREDENTIAL": "secret"}):
                    self.assertIsNone(Config(None, 0, 2).host_agent, "a secret of its own")
            listening.close()
            with mock.patch.object(config_module, "HOST_AGENT_SOCKET", path), mock.patch.dict(os.environ, {}):
                os.environ.pop("SWITCHML_HOST_AGENT", None)
                self.assertTrue(os.path.exists(path))
                self.assertIsNone(Config(None, 0, 2).host_agent, "a stale socket (its agent gone) is not used")
            with mock.patch.object(config_module, "HOST_AGENT_SOCKET", os.path.join(tmp, "none.sock")), \
                    mock.patch.dict(os.environ, {}):
                os.environ.pop("SWITCHML_HOST_AGENT", None)
                self.assertIsNone(Config(None, 0, 2).host_agent, "no packaged agent: an agent per rank")

    def test_under_torchrun_without_a_packaged_agent_local_rank_0_starts_one_for_the_job(self):
        from switchml import config as config_module
        torchrun = {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "SWITCHML_AGENT_ARGS": "-k 1024 -s 16"}
        with mock.patch.object(config_module, "HOST_AGENT_SOCKET", "/nonexistent/agent.sock"), \
                mock.patch.dict(os.environ, torchrun):
            for name in ("SWITCHML_HOST_AGENT", "SWITCHML_SOCKET", "SWITCHML_LOCAL_REDUCE", "SWITCHML_TLS_CA"):
                os.environ.pop(name, None)
            config = Config({"job": "j", "token": "tok-0123456789", "credential_file": __file__}, 5, 8)
            self.assertTrue(config.job_agent, "auto, torchrun, 4 ranks per host, no packaged agent: a job agent")
            self.assertIsNone(config.host_agent)
            self.assertEqual((config.local_world, config.node), (4, 1))
            self.assertFalse(config.starts_job_agent, "local rank 1 waits for local rank 0's agent")
            with mock.patch.dict(os.environ, {"LOCAL_RANK": "0"}):
                self.assertTrue(Config(None, 4, 8).starts_job_agent)
                self.assertEqual(Config(None, 4, 8).node, 1)
            unsummed = Config({"host_agent": "job", "local_reduce": "off"}, 5, 8)
            self.assertEqual((unsummed.local_world, unsummed.node), (1, 5))
            self.assertTrue(unsummed.starts_job_agent, "ranks not summed: each starts an agent of its own node")
            fields = config.open_fields()
            self.assertEqual((fields["localRank"], fields["localWorld"]), (1, 4))
            self.assertNotIn("k", fields, "the agent options are the job agent's own command line")
            args = config.host_args("/tmp/d/agent.sock", 4242)
            for option, value in (("--socket", "/tmp/d/agent.sock"), ("--max-sessions", "4"),
                                  ("--exit-after-sessions", "4"), ("--exit-with-pid", "4242"),
                                  ("--warm-up-ms", "300"), ("-k", "1024")):
                self.assertEqual(args[args.index(option) + 1], value, args)
            self.assertIn("--credential-file=" + __file__, args)
            self.assertIn("--delete-socket-dir", args, "the agent removes its private directory when it ends")
            self.assertNotIn("--warm-up-ms", Config({"agent_args": "--warm-up-ms=0"}, 5, 8).host_args("/s", 1)[:-1])
            self.assertFalse(Config({"local_reduce": "off"}, 5, 8).job_agent, "local reduction off: an agent per rank")
            self.assertFalse(Config({"socket": "/run/a.sock"}, 5, 8).job_agent, "a rank's own socket wins")
            self.assertFalse(Config(None, 5, 6).job_agent, "4 does not divide 6: not torchrun's numbering")
            self.assertFalse(Config({"host_agent": "off"}, 5, 8).job_agent)
            with mock.patch.dict(os.environ, {"LOCAL_WORLD_SIZE": "1", "LOCAL_RANK": "0"}):
                self.assertFalse(Config(None, 5, 8).job_agent, "one rank per host: its own agent")
                forced = Config({"host_agent": "job"}, 5, 8)
                self.assertTrue(forced.job_agent)
                self.assertEqual(forced.local_world, 1)
            with self.assertRaisesRegex(ValueError, "exclude each other"):
                Config({"host_agent": "job", "socket": "/run/a.sock"}, 5, 8)
            self.assertFalse(Config({"agent_args": "--int32 off"}, 5, 8).job_agent,
                             "'worker serve' options: auto keeps an agent per rank")
            with self.assertRaisesRegex(ValueError, "--shm-bytes=4096 are options of a rank's own agent"):
                Config({"host_agent": "job", "agent_args": "--shm-bytes=4096"}, 5, 8)

    def test_a_job_agent_named_in_the_store_is_used_only_while_it_runs_in_a_private_directory(self):
        import socket
        import tempfile
        from switchml.backend import _job_agent_problem
        with tempfile.TemporaryDirectory() as tmp:
            private = os.path.join(tmp, "private")
            os.mkdir(private, 0o700)
            path = os.path.join(private, "agent.sock")
            with socket.socket(socket.AF_UNIX) as listening:
                listening.bind(path)
                me = str(os.getpid())
                self.assertIsNone(_job_agent_problem(me, path))
                self.assertRegex(_job_agent_problem(str(2 ** 31 - 1), path), "does not run",
                                 "an earlier attempt's agent, gone")
                self.assertRegex(_job_agent_problem(me, os.path.join(private, "none.sock")), "No such file")
                os.chmod(private, 0o750)
                self.assertRegex(_job_agent_problem(me, path), "mode 0700", "a directory others may enter")
                os.chmod(private, 0o700)
                plain = os.path.join(private, "plain")
                open(plain, "w").close()
                self.assertRegex(_job_agent_problem(me, plain), "not a socket")

    def test_backend_choice_reaches_the_agent(self):
        with mock.patch.dict(os.environ):
            os.environ.pop("SWITCHML_BACKEND", None)
            args = Config({"job": "j"}, 0, 1).serve_args()
        self.assertIn("--backend=auto", args)
        with mock.patch.dict(os.environ, {"SWITCHML_BACKEND": "xdp"}):
            args = Config({"job": "j"}, 0, 1).serve_args()
            self.assertIn("--backend=xdp", args)
            self.assertEqual(Config({"backend": "software"}, 0, 1).backend, "software", "pg_options win")
        with self.assertRaisesRegex(ValueError, r"pg_options\['backend'\] must be auto or a backend's name"):
            Config({"backend": "XDP; rm"}, 0, 1)
        with self.assertRaisesRegex(ValueError, "must not set --backend"):
            Config({"agent_args": "--backend xdp"}, 0, 1)

    def test_bad_values_are_refused_naming_the_option(self):
        with mock.patch.dict(os.environ):
            for key in ("SWITCHML_SOCKET", "SWITCHML_HOST_AGENT", "SWITCHML_APPLIANCE", "SWITCHML_TENANT"):
                os.environ.pop(key, None)
            for options, message in (
                    ({"appliance": "::1"}, r"pg_options\['appliance'\]: the data plane is IPv4 only"),
                    ({"appliance": "[::1]:7470"}, r"pg_options\['appliance'\]: the data plane is IPv4 only"),
                    ({"socket": "/tmp/a{x}.sock"}, r"pg_options\['socket'\]: '/tmp/a\{x\}.sock' expands only"),
                    ({"socket": "/tmp/a{}.sock"}, r"pg_options\['socket'\]: .* expands only"),
                    ({"host_agent": "Off"}, r"pg_options\['host_agent'\] must be auto, off, job or the path"),
                    ({"tenant": "team a"}, r"pg_options\['tenant'\] must be 1 to 64 of"),
                    ({"job": "@/etc/passwd"}, r"pg_options\['job'\] must be 1 to 128 of"),
                    ({"token": "two words here"}, r"pg_options\['token'\] must be 8 to 128 of .*\(value not shown\)$")):
                with self.subTest(options=options):
                    with self.assertRaisesRegex(ValueError, message):
                        Config(options, 0, 1)
            self.assertEqual(Config({"appliance": None, "tenant": None}, 0, 1).appliance_host, "127.0.0.1",
                             "None in pg_options: as if not given")
            self.assertEqual(Config({"socket": "/tmp/{{x}}-{rank}.sock"}, 3, 4).socket, "/tmp/{x}-3.sock")
            self.assertEqual(Config({"host_agent": "/run/other/agent.sock"}, 0, 1).host_agent, "/run/other/agent.sock")
            self.assertEqual(Config({"host_agent": "agent.sock"}, 0, 1).host_agent, "agent.sock", "a relative path")

    def test_the_process_groups_timeout_is_how_long_the_job_waits_for_a_late_rank(self):
        import datetime
        with mock.patch.dict(os.environ):
            for key in ("SWITCHML_HOST_AGENT", "SWITCHML_AGENT_ARGS"):
                os.environ.pop(key, None)
            config = Config({"job": "j", "host_agent": "off"}, 0, 2, datetime.timedelta(minutes=30))
            args = config.serve_args()
            self.assertEqual(args[args.index("--slot-timeout-ms") + 1], "1800000")
            self.assertEqual(args[args.index("--progress-timeout-ms") + 1], "1810000",
                             "the agents wait 10 s longer, so that the appliance names a missing rank first")
            for none in (None, datetime.timedelta(0), datetime.timedelta(seconds=-1)):
                self.assertNotIn("--slot-timeout-ms", Config({"job": "j"}, 0, 2, none).serve_args(),
                                 "no timeout, or none that makes sense: the agent's and the appliance's own")
            capped = Config({"job": "j"}, 0, 2, datetime.timedelta(hours=5))
            self.assertEqual(capped.collective_timeout_ms, 3_600_000, "the appliance's longest slot timeout")
            own = Config({"job": "j", "agent_args": "--slot-timeout-ms=5000"}, 0, 2, datetime.timedelta(minutes=30))
            self.assertNotIn("--slot-timeout-ms", own.serve_args()[:-1], "agent_args win")
            self.assertIn("--progress-timeout-ms", own.serve_args())
            hosted = Config({"job": "j", "host_agent": "/run/x/agent.sock", "token": "0123456789ab"}, 0, 2,
                            datetime.timedelta(minutes=30))
            fields = hosted.open_fields()
            self.assertEqual((fields["slotTimeoutMs"], fields["progressTimeoutMs"]), (1800000, 1810000))
            chosen = Config({"job": "j", "host_agent": "/run/x/agent.sock", "token": "0123456789ab",
                             "agent_args": "--slot-timeout-ms 4000"}, 0, 2, datetime.timedelta(minutes=30))
            self.assertEqual(chosen.open_fields()["slotTimeoutMs"], "4000")
            self.assertNotIn("--slot-timeout-ms", Config({"job": "j"}, 0, 2).serve_args(), "no timeout: the agent's own")

    def test_job_name_from_torchrun_run_id(self):
        with mock.patch.dict(os.environ, {"TORCHELASTIC_RUN_ID": "abc/123"}):
            config = Config({"token": "0123456789ab"}, 1, 2)
            config.agree(store=None)  # nothing to agree on: both come from the configuration
        self.assertEqual((config.job, config.token), ("torch-abc-123", "0123456789ab"))
        self.assertIn("--job=torch-abc-123", config.serve_args())
        self.assertNotIn("0123456789ab", config.serve_args(), "the token travels in the environment")

    def test_missing_launcher_names_what_to_install(self):
        with mock.patch.dict(os.environ, {"PATH": "/nonexistent"}):
            os.environ.pop("SWITCHML_LAUNCHER", None)
            with self.assertRaisesRegex(switchml.SwitchMLError, "install the switchml package"):
                find_launcher()
        with self.assertRaisesRegex(switchml.SwitchMLError, "SWITCHML_LAUNCHER=/nonexistent/switchml is not an executable"):
            find_launcher("/nonexistent/switchml")


# one rank of a two-rank switchml group over a fake agent (test_client.FakeAgent): it prints what it saw, one JSON line
_GROUP_RANK = """
import json, logging, os, sys, torch, torch.distributed as dist
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import switchml
from test_client import FakeAgent
rank, init = int(sys.argv[2]), sys.argv[3]
logging.basicConfig(level=logging.INFO, format="LOG %(name)s %(message)s", stream=sys.stdout)
agent = FakeAgent(world=2, rank=rank)
dist.init_process_group("switchml", init_method=init, rank=rank, world_size=2, pg_options={"socket": agent.socket_path})
big = torch.tensor([2 ** 53 + 1 + rank, -(2 ** 40) - rank, 7], dtype=torch.int64)
fine = torch.tensor([1 + 1e-12 * (rank + 1), 2.0 ** -60, 1e300], dtype=torch.float64)
dist.all_reduce(big)
dist.all_reduce(fine)
avg = torch.tensor([3 + rank, -4 - 2 * rank], dtype=torch.int64)
dist.all_reduce(avg, op=dist.ReduceOp.AVG)
small = torch.tensor([30000, -7], dtype=torch.int16)
dist.all_reduce(small)
flags = torch.tensor([rank == 0, False])
dist.all_reduce(flags)
bytes8 = torch.tensor([200, 3], dtype=torch.uint8)
work = dist.all_reduce(bytes8, async_op=True)
work.wait()
again = torch.tensor([1], dtype=torch.int64)
dist.all_reduce(again)
f32 = torch.ones(3)
dist.all_reduce(f32)  # through the fake agent: 2x + 1
print(json.dumps({"big": big.tolist(), "fine": [x.hex() for x in fine.tolist()], "avg": avg.tolist(),
                  "small": small.tolist(), "flags": flags.tolist(), "bytes8": bytes8.tolist(),
                  "f32": f32.tolist(), "requests": [r for r in agent.requests if r.startswith("ALLREDUCE")]}), flush=True)
dist.destroy_process_group()
agent.close()
"""


def _run_group(test, script, timeout_s=60):
    """Run ``script`` as ranks 0 and 1 of a switchml group over fake agents; each rank's stdout lines."""
    import subprocess
    import sys
    import tempfile
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(here))
    for name in ("SWITCHML_HOST_AGENT", "SWITCHML_SOCKET", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        env.pop(name, None)
    env["SWITCHML_HOST_AGENT"] = "off"
    with tempfile.TemporaryDirectory() as d:
        init = "file://" + os.path.join(d, "init")
        ranks = [subprocess.Popen([sys.executable, "-c", script, os.path.join(here, "test_client.py"), str(rank), init],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
                 for rank in (0, 1)]
        outputs = []
        for process in ranks:
            try:
                out, err = process.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                for other in ranks:
                    other.kill()
                raise
            test.assertEqual(process.returncode, 0, err)
            outputs.append(out.splitlines())
        return outputs


class GlooDtypesTest(unittest.TestCase):

    def test_dtypes_the_appliance_does_not_carry_are_summed_exactly_over_gloo(self):
        import json
        for rank, lines in enumerate(_run_group(self, _GROUP_RANK)):
            result = json.loads([line for line in lines if line.startswith("{")][-1])
            self.assertEqual(result["big"], [2 ** 54 + 3, -(2 ** 41) - 1, 14], "int64 exact, beyond float32 and int32")
            self.assertEqual([float.fromhex(x) for x in result["fine"]], [(1 + 1e-12) + (1 + 2e-12), 2.0 ** -59, 2e300],
                             "float64 exact, never narrowed to float32")
            self.assertEqual(result["avg"], [3, -5], "int64 AVG truncates towards zero, as int32's does")
            self.assertEqual(result["small"], [-5536, -14], "int16 wraps like an int16 sum")
            self.assertEqual(result["flags"], [True, False], "bool SUM is a logical or, as NCCL's")
            self.assertEqual(result["bytes8"], [144, 6], "uint8 wraps")
            self.assertEqual(result["f32"], [3.0, 3.0, 3.0], "float32 still goes through the agent")
            self.assertEqual(len(result["requests"]), 1, "only the float32 one reached the agent: %r" % result["requests"])
            logged = [line for line in lines if line.startswith("LOG switchml") and "go over Gloo" in line]
            self.assertEqual(len(logged), 5, "once per dtype: %r" % logged)
            placement = [line for line in lines if line.startswith("LOG switchml") and "runs on backend" in line]
            self.assertEqual(placement, ["LOG switchml.backend switchml job test runs on backend software"] if rank == 0
                             else [], "rank 0 says where the job runs, at INFO when nothing passed it over")
            self.assertTrue(any("rank %d: SUM/AVG all-reduces of float64 tensors go over Gloo" % rank in line
                                for line in logged), logged)


class WorkTest(unittest.TestCase):
    """The Work of a one-rank switchml group over a fake agent, as a user and DDP see it."""

    def group(self, **agent_options):
        import sys
        import tempfile
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from test_client import FakeAgent
        agent = FakeAgent(world=1, **agent_options)
        self.addCleanup(agent.close)
        if agent.hold is not None:
            self.addCleanup(agent.hold.set)
        directory = tempfile.TemporaryDirectory()
        self.addCleanup(directory.cleanup)
        with mock.patch.dict(os.environ, {"SWITCHML_HOST_AGENT": "off"}):
            dist.init_process_group("switchml", store=dist.FileStore(os.path.join(directory.name, "store"), 1), rank=0,
                                    world_size=1, pg_options={"socket": agent.socket_path})
        self.addCleanup(dist.destroy_process_group)
        return agent

    def test_rank_0_warns_where_the_job_runs_and_what_passed_it_over(self):
        with self.assertLogs("switchml.backend", "WARNING") as logged:
            agent = self.group(passed_over="xdp: k=8192 exceeds 358; tofino: down: 100% lost")
        self.assertIn("STATS", agent.requests)
        self.assertEqual(len(logged.records), 1, logged.output)
        # the fake agent's STATS: backend software, xdp and tofino passed it over (its reasons form-encoded)
        self.assertRegex(logged.output[0], r"switchml job test runs on backend software; passed over: "
                                           r"xdp: k=8192 exceeds 358; tofino: down: 100% lost$")

    def test_wait_raises_a_failed_all_reduce_each_time_and_the_tensor_is_marked(self):
        import torch
        self.group(fail_with="job 3 aborted: rank 1 lost its control connection")
        for attempt in range(2):  # the same message twice on one thread: raised twice
            t = torch.ones(4)
            work = dist.all_reduce(t, async_op=True)
            with self.assertRaisesRegex(switchml.SwitchMLError, "rank 1 lost its control connection"):
                work.wait()
            self.assertTrue(torch.isnan(t).all(), "nothing stale mistaken for a result")
            self.assertFalse(work.is_success())
            self.assertIsInstance(work.exception(), switchml.SwitchMLError)
            with self.assertRaises(switchml.SwitchMLError):
                work.result()
            with self.assertRaisesRegex(switchml.SwitchMLError, "rank 1 lost"):
                dist.all_reduce(torch.ones(2))
        counts = torch.tensor([5, 6], dtype=torch.int32)
        with self.assertRaises(switchml.SwitchMLError):
            dist.all_reduce(counts)
        self.assertEqual(counts.tolist(), [-2 ** 31] * 2, "an int32 tensor is marked with its type's minimum")
        total = 0
        for i in range(20000):  # nothing raised later, out of the blue
            total += i
        time.sleep(0.05)
        self.assertEqual(total, 199990000)

    def test_wait_honours_its_timeout_naming_the_rank(self):
        import datetime
        import threading
        import torch
        agent = self.group(hold=threading.Event())
        t = torch.ones(3)
        work = dist.all_reduce(t, async_op=True)
        with self.assertRaisesRegex(switchml.SwitchMLError, r"rank 0: all_reduce of 3 float32 elements through the "
                                                            r"switchml agent at .* did not complete within 0.2 s"):
            work.wait(datetime.timedelta(seconds=0.2))
        self.assertFalse(work.is_completed())
        agent.hold.set()
        self.assertTrue(work.wait())
        self.assertTrue(work.is_success())
        self.assertEqual(t.tolist(), [3.0] * 3)

    def test_a_failed_all_reduce_in_ddp_raises_out_of_backward_every_time(self):
        import torch
        from torch.nn.parallel import DistributedDataParallel
        self.group(fail_with="job 9 aborted: rank 2 lost its control connection")
        for step in range(2):  # a fresh DDP: torch's reducer is left mid-iteration by a backward that raised
            model = DistributedDataParallel(torch.nn.Linear(3, 2))
            with self.assertRaises(Exception) as raised:
                model(torch.randn(5, 3)).sum().backward()
                for i in range(1000):  # the raise may come at the next Python instruction
                    pass
            self.assertIn("rank 2 lost its control connection", str(raised.exception))

    def test_ddp_steps_through_the_group(self):
        import gc
        import torch
        from torch.nn.parallel import DistributedDataParallel
        self.group()
        model = torch.nn.Linear(3, 2)
        ddp = DistributedDataParallel(model)
        for step in range(3):
            model.zero_grad()
            ddp(torch.randn(5, 3)).sum().backward()
            gc.collect()
            self.assertTrue(all(torch.isfinite(p.grad).all() for p in model.parameters()))


class CriticalSectionTest(unittest.TestCase):

    def test_an_asynchronous_failure_waits_until_the_thread_leaves_the_clients_critical_section(self):
        import threading
        import torch
        from switchml import requests
        submission = requests.Submission(torch.ones(2), None, "sum", 1, None, None, safe=True)
        requests.arm(submission, threading.get_ident())
        with self.assertRaisesRegex(switchml.SwitchMLError, "rank 1 is gone") as raised:
            with requests.critical_section:
                failer = threading.Thread(target=requests.fail_submission, args=(submission, "rank 1 is gone"))
                failer.start()
                failer.join()
                total = 0
                for i in range(20000):  # would have raised here
                    total += i
                self.assertEqual(total, 199990000)
                inside = True
        self.assertTrue(inside)
        self.assertTrue(torch.isnan(submission.tensor).all())
        self.assertIsInstance(raised.exception, switchml.SwitchMLError)
        self.assertEqual(requests._pending, {}, "nothing left to raise later")


class AgentStartTest(unittest.TestCase):

    def test_a_launcher_without_a_jdk_is_named_with_what_to_install(self):
        import tempfile
        from switchml.agent import AgentProcess
        with tempfile.TemporaryDirectory() as d:
            launcher = _stand_in_launcher(d, "#!/bin/sh\necho 'switchml: no Java 25 or newer found (checked JAVA_HOME "
                                             "and /usr/lib/jvm/*).' >&2\nexit 2\n")
            with self.assertRaises(switchml.SwitchMLError) as raised:
                AgentProcess(launcher, ["--world", "1"], {}, rank=0, job="j", ready_timeout_s=20)
        message = str(raised.exception)
        self.assertIn("exited with code 2", message)
        self.assertIn("no Java 25 or newer found", message)
        self.assertIn("install the switchml package", message)

    def test_the_jobs_agent_gets_a_private_directory_for_its_socket_and_shared_memory(self):
        import stat
        import tempfile
        from switchml.agent import JobHostAgent
        with tempfile.TemporaryDirectory() as d, mock.patch.dict(os.environ, {"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}):
            # a stand-in launcher that prints its arguments and the ready line, then waits to be stopped
            launcher = _stand_in_launcher(d, "#!/bin/sh\necho \"ARGS $*\"\n"
                                             "echo 'switchml worker host ready: socket=x'\nexec sleep 30\n")
            config = Config({"host_agent": "job", "job": "torch-abc", "token": "tok-0123456789"}, 2, 4)
            agent = JobHostAgent(launcher, config, ready_timeout_s=20, shm_dir=d)
            try:
                directory = agent.directory
                self.assertEqual(os.path.dirname(directory), d)
                self.assertTrue(os.path.basename(directory).startswith("switchml-torch-abc-node1-"))
                self.assertEqual(stat.S_IMODE(os.stat(directory).st_mode), 0o700, "only this user enters it")
                args = [line for line in agent.output().splitlines() if line.startswith("ARGS ")][0].split()
                self.assertEqual(args[1:3], ["worker", "host"])
                self.assertEqual(args[args.index("--socket") + 1], os.path.join(directory, "agent.sock"))
                self.assertEqual(args[args.index("--shm-dir") + 1], directory)
                self.assertEqual(args[args.index("--exit-with-pid") + 1], str(os.getpid()))
            finally:
                agent.stop(timeout_s=0.1)
            self.assertFalse(os.path.exists(directory), "stop() deletes the directory")

    def test_the_agents_shared_memory_goes_to_the_packaged_huge_page_tmpfs_only_where_it_is_mounted(self):
        import subprocess
        import tempfile
        from switchml import agent as agent_module
        if os.geteuid() != 0:
            self.fail("this test mounts a tmpfs and needs root (CI runs as root); run it as root")
        with tempfile.TemporaryDirectory() as d, tempfile.TemporaryDirectory() as bin_dir:
            with mock.patch.object(agent_module, "PACKAGED_SHM_DIR", d):
                self.assertEqual(agent_module.default_shm_dir(), "/dev/shm", "a directory that is not a mount point")
                subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,huge=within_size", "tmpfs", d], check=True)
                try:
                    self.assertEqual(agent_module.default_shm_dir(), d)
                    launcher = _stand_in_launcher(bin_dir, "#!/bin/sh\n"
                                                  "echo 'switchml worker serve ready: socket=x'\nexec sleep 30\n")
                    agent = agent_module.AgentProcess(launcher, ["--world", "2"], {}, rank=0, job="torch-shm",
                                                      ready_timeout_s=20)
                    try:
                        self.assertEqual(os.path.dirname(agent.directory), d, "the default directory is used")
                    finally:
                        agent.stop(timeout_s=0.1)
                finally:
                    subprocess.run(["umount", d], check=True)

    def test_a_ranks_agent_gets_a_private_directory_and_follows_this_process(self):
        import stat
        import tempfile
        from switchml.agent import AgentProcess
        with tempfile.TemporaryDirectory() as d:
            launcher = _stand_in_launcher(d, "#!/bin/sh\necho \"ARGS $*\"\n"
                                             "echo 'switchml worker serve ready: socket=x'\nexec sleep 30\n")
            agent = AgentProcess(launcher, ["--world", "2"], {}, rank=1, job="torch-abc", ready_timeout_s=20, shm_dir=d)
            try:
                directory = agent.directory
                self.assertEqual(os.path.dirname(directory), d)
                self.assertTrue(os.path.basename(directory).startswith("switchml-torch-abc-rank1-"))
                self.assertEqual(stat.S_IMODE(os.stat(directory).st_mode), 0o700, "only this user enters it")
                args = [line for line in agent.output().splitlines() if line.startswith("ARGS ")][0].split()
                self.assertEqual(args[1:3], ["worker", "serve"])
                self.assertEqual(args[args.index("--socket") + 1], os.path.join(directory, "agent.sock"))
                self.assertEqual(args[args.index("--shm") + 1], os.path.join(directory, "agent.shm"))
                self.assertEqual(args[args.index("--exit-with-pid") + 1], str(os.getpid()))
                self.assertIn("--delete-socket-dir", args)
            finally:
                agent.stop(timeout_s=0.1)
            self.assertFalse(os.path.exists(directory), "stop() deletes the directory")

    def test_an_interrupted_wait_for_the_agent_stops_it_and_deletes_its_directory(self):
        import tempfile
        from switchml import agent as agent_module
        with tempfile.TemporaryDirectory() as d:
            pid_file = os.path.join(d, "pid")
            launcher = _stand_in_launcher(d, "#!/bin/sh\necho $$ > %s\nexec sleep 30\n" % pid_file)
            original = agent_module._AgentChild._wait_ready

            def interrupted(child, timeout_s):
                while not os.path.exists(pid_file):
                    time.sleep(0.01)
                raise KeyboardInterrupt()

            with mock.patch.object(agent_module._AgentChild, "_wait_ready", interrupted):
                with self.assertRaises(KeyboardInterrupt):
                    agent_module.AgentProcess(launcher, ["--world", "2"], {}, rank=0, job="j", ready_timeout_s=20,
                                              shm_dir=d)
            self.assertIs(agent_module._AgentChild._wait_ready, original)
            with open(pid_file) as f:
                pid = int(f.read())
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.05)
            self.assertFalse(_alive(pid), "the agent is stopped, not left running")
            self.assertEqual([name for name in os.listdir(d) if name.startswith("switchml-j-rank0-")], [],
                             "its directory is deleted")


def _stand_in_launcher(directory, script):
    """An executable 'switchml' in ``directory`` that runs ``script`` (a shell script) in place of the agent."""
    launcher = os.path.join(directory, "switchml")
    with open(launcher, "w") as f:
        f.write(script)
    os.chmod(launcher, 0o755)
    return launcher


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open("/proc/%d/stat" % pid) as f:
        return f.read().split(") ")[-1].split()[0] != "Z"


if __name__ == "__main__":
    unittest.main()
