package io.switchml.ops;

import io.switchml.protocol.Json;
import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceContext;
import io.switchml.journal.JournalEvent;
import io.switchml.journal.JournalReader;
import io.switchml.journal.JournalRecord;
import io.switchml.protocol.ElementType;
import io.switchml.worker.AllReduceException;
import io.switchml.worker.WorkerClient;
import io.switchml.worker.WorkerContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every ops subcommand against a real appliance, embedded in this JVM, with real jobs: two workers of job
 * "train" all-reduce int32 tensors through it (with 1% injected loss, so that there are retransmissions),
 * and stay joined while the commands look at the appliance locally (counters file, journal, control
 * endpoint) and remotely (HTTP endpoint).
 */
@Timeout(60)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class OpsCommandTest
{
    private static final int ELEMENTS = 16_384;

    @TempDir
    static Path dir;

    private final ExecutorService executor = Executors.newCachedThreadPool();
    private final List<WorkerClient> workers = new ArrayList<>();
    private Appliance appliance;
    private String url;

    @BeforeAll
    void startApplianceAndJob() throws Exception
    {
        appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(0).dir(dir.toString())
            .shards(2).histogramSnapshotIntervalMs(100).lossRate(0.01).lossSeed(7).memoryBudgetBytes(64L << 20));
        url = "http://127.0.0.1:" + appliance.httpPort();
        final List<Future<WorkerClient>> joins = new ArrayList<>();
        for (int rank = 0; rank < 2; rank++)
        {
            final int r = rank;
            joins.add(executor.submit(() -> WorkerClient.connect(worker("train", 2, r))));
        }
        for (final Future<WorkerClient> join : joins)
        {
            workers.add(join.get(20, TimeUnit.SECONDS));
        }
        final List<Future<int[]>> results = new ArrayList<>();
        for (int rank = 0; rank < 2; rank++)
        {
            final WorkerClient client = workers.get(rank);
            final int r = rank;
            results.add(executor.submit(() ->
            {
                final int[] tensor = new int[ELEMENTS];
                final int[] sum = new int[ELEMENTS];
                for (int iteration = 0; iteration < 8; iteration++)
                {
                    for (int i = 0; i < ELEMENTS; i++)
                    {
                        tensor[i] = i * (r + 1) + iteration;
                    }
                    client.allReduce(tensor, sum);
                }
                return sum;
            }));
        }
        final int[] expected = new int[ELEMENTS];
        for (int i = 0; i < ELEMENTS; i++)
        {
            expected[i] = i * 3 + 2 * 7;
        }
        for (final Future<int[]> result : results)
        {
            assertArrayEquals(expected, result.get(30, TimeUnit.SECONDS));
        }
        awaitSnapshotWithSlots();
    }

    @AfterAll
    void stop()
    {
        for (final WorkerClient worker : workers)
        {
            worker.close();
        }
        executor.shutdownNow();
        if (appliance != null)
        {
            appliance.close();
        }
    }

    private WorkerContext worker(final String job, final int world, final int rank)
    {
        return new WorkerContext().controlPort(appliance.controlPort()).jobName(job).token("token-" + job)
            .worldSize(world).rank(rank).elementType(ElementType.INT32).lanes(512).slots(8).retransmitTimeoutMs(10);
    }

    private void awaitSnapshotWithSlots() throws InterruptedException
    {
        final long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() - deadlineNs < 0)
        {
            try (JournalReader reader = JournalReader.open(dir.resolve("journal")))
            {
                reader.types(JournalEvent.HISTOGRAM_SNAPSHOT);
                JournalRecord record;
                while ((record = reader.poll()) != null)
                {
                    if (record.count() > 0)
                    {
                        return;
                    }
                }
            }
            Thread.sleep(50);
        }
        throw new AssertionError("no latency snapshot with completed slots in the journal");
    }

    private String[] local(final String... args)
    {
        final List<String> all = new ArrayList<>(List.of(args));
        all.add("--dir=" + dir);
        all.add("--control-port=" + appliance.controlPort());
        return all.toArray(String[]::new);
    }

    private String[] remote(final String... args)
    {
        final List<String> all = new ArrayList<>(List.of(args));
        all.add("--url=" + url);
        return all.toArray(String[]::new);
    }

    private static OpsCli.Result ok(final OpsCli.Result result)
    {
        assertEquals(0, result.exitCode(), result::toString);
        return result;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> jsonObject(final OpsCli.Result result)
    {
        final Map<String, Object> json = assertInstanceOf(Map.class, Json.parse(result.out()), result::toString);
        assertSnakeCaseKeys(json, "$");
        return json;
    }

    /** Every key of every object in the document is snake_case (counter names, as keys, are too). */
    private static void assertSnakeCaseKeys(final Object json, final String path)
    {
        if (json instanceof Map<?, ?> map)
        {
            for (final Map.Entry<?, ?> entry : map.entrySet())
            {
                final String key = (String)entry.getKey();
                assertTrue(key.matches("[a-z][a-z0-9]*(_[a-z0-9]+)*"), () -> "key '" + key + "' at " + path + " is not snake_case");
                assertSnakeCaseKeys(entry.getValue(), path + "." + key);
            }
        }
        else if (json instanceof List<?> list)
        {
            for (int i = 0; i < list.size(); i++)
            {
                assertSnakeCaseKeys(list.get(i), path + "[" + i + "]");
            }
        }
    }

    @Test
    void statusShowsUptimeShardsAndTheirCpusJobsAndMemory()
    {
        final OpsCli.Result text = ok(OpsCli.run(local("status")));
        assertTrue(text.out().startsWith("appliance   up (pid " + ProcessHandle.current().pid()), text::toString);
        assertTrue(text.out().contains("shards      2 on "), text::toString);
        assertTrue(text.out().contains("  shard 0   thread ") && text.out().contains("  shard 1   thread "), text::toString);
        assertTrue(text.out().contains("last ran on cpu"), text::toString);
        assertTrue(text.out().contains("version     ops " + Version.version()), text::toString);
        assertTrue(text.out().contains("  job 1 default/train (active)"), text::toString);
        assertTrue(text.out().contains("of 64.0 MiB aggregator budget"), text::toString);
        assertTrue(text.out().contains("backends    software up\n"), text::toString);

        final Map<String, Object> json = jsonObject(ok(OpsCli.run(local("status", "--json"))));
        assertEquals(Map.of("software", "up"), json.get("backends"), json::toString);
        assertEquals("up", json.get("status"));
        assertEquals(ProcessHandle.current().pid(), json.get("pid"));
        assertTrue((Long)json.get("uptime_ms") > 0);
        final List<?> shards = (List<?>)json.get("shards");
        assertEquals(2, shards.size());
        assertNotNull(((Map<?, ?>)shards.get(0)).get("cpus_allowed"), json::toString);
        final Map<?, ?> memory = (Map<?, ?>)json.get("memory");
        assertEquals(64L << 20, memory.get("budget_bytes"));
        assertEquals(appliance.registry().memoryUsedBytes(), memory.get("used_bytes"));
        assertTrue((Long)((Map<?, ?>)json.get("jobs")).get("active") >= 1, json::toString);
    }

    @Test
    void statusNamesEachBackendUpOrDownInPreferenceOrder()
    {
        assertEquals("{xdp=down, software=up}", StatusCommand.backends("xdp,software", "xdp").toString());
        assertEquals("{tofino=up, software=up}", StatusCommand.backends("tofino,software", "").toString());
        assertEquals("{}", StatusCommand.backends(null, null).toString());
    }

    @Test
    void statusFindsTheControlPortTheApplianceAnnouncedInItsJournal()
    {
        final OpsCli.Result result = ok(OpsCli.run("status", "--dir", dir.toString()));
        assertTrue(result.out().contains("control     127.0.0.1:" + appliance.controlPort()), result::toString);
        assertTrue(result.out().contains(", appliance " + io.switchml.protocol.BuildInfo.version() + "\n"),
            "the version it announced in its journal: " + result);
    }

    @Test
    void statusRemotelyThroughTheHttpEndpoint()
    {
        final OpsCli.Result text = ok(OpsCli.run(remote("status")));
        assertTrue(text.out().startsWith("appliance   up (up "), text::toString);
        assertTrue(text.out().contains("url         " + url + "/"), text::toString);
        final Map<String, Object> json = jsonObject(ok(OpsCli.run(remote("status", "--json"))));
        assertEquals("remote", json.get("mode"));
        assertEquals(io.switchml.protocol.BuildInfo.version(), ((Map<?, ?>)json.get("version")).get("appliance"),
            "switchml_build_info's version: " + json);
        assertEquals(Map.of("software", "up"), json.get("backends"), json::toString);
        assertEquals(2, ((List<?>)json.get("shards")).size());
        assertTrue((Long)((Map<?, ?>)json.get("traffic")).get("packets_in") > 0, json::toString);
    }

    @Test
    void anApplianceThatIsNotRunningIsExitCode4WithAClearMessage() throws Exception
    {
        final Path empty = Files.createTempDirectory(dir, "empty");
        final OpsCli.Result noFile = OpsCli.run("status", "--dir", empty.toString());
        assertEquals(OpsException.UNREACHABLE, noFile.exitCode(), noFile::toString);
        assertTrue(noFile.err().contains("no appliance in " + empty) && noFile.err().contains("is the appliance running?"),
            noFile::toString);
        assertEquals("", noFile.out());

        final int closedPort;
        try (ServerSocket socket = new ServerSocket(0))
        {
            closedPort = socket.getLocalPort();
        }
        final OpsCli.Result refused = OpsCli.run("status", "--dir", dir.toString(), "--control-port", Integer.toString(closedPort));
        assertEquals(OpsException.UNREACHABLE, refused.exitCode(), refused::toString);
        assertTrue(refused.err().contains("control endpoint 127.0.0.1:" + closedPort + " (--control-port) does not answer"),
            refused::toString);

        final OpsCli.Result http = OpsCli.run("counters", "--url", "http://127.0.0.1:" + closedPort);
        assertEquals(OpsException.UNREACHABLE, http.exitCode(), http::toString);
        assertTrue(http.err().contains("no appliance answers at http://127.0.0.1:" + closedPort + "/metrics"), http::toString);

        final OpsCli.Result events = OpsCli.run("events", "--dir", empty.toString());
        assertEquals(OpsException.UNREACHABLE, events.exitCode(), events::toString);
        assertTrue(events.err().contains("no journal in " + empty.resolve("journal")), events::toString);
    }

    @Test
    void countersListsEverySystemShardAndJobCounter()
    {
        final OpsCli.Result result = ok(OpsCli.run(local("counters")));
        assertTrue(result.out().contains("TYPE    OWNER"), result::toString);
        for (final String line : List.of("system  ", "shard   shard 0", "shard   shard 1", "job     job 1 default/train"))
        {
            assertTrue(result.out().lines().anyMatch(l -> l.startsWith(line)), line + "\n" + result);
        }
        final Map<String, Object> json = jsonObject(ok(OpsCli.run(local("counters", "--json"))));
        final List<?> counters = (List<?>)json.get("counters");
        assertTrue(counters.size() > 40, json::toString);
        assertTrue(json.get("running").equals(Boolean.TRUE));
        final long slots = counters.stream().map(c -> (Map<?, ?>)c)
            .filter(c -> "job".equals(c.get("type")) && "slots_completed".equals(c.get("name")))
            .mapToLong(c -> (Long)c.get("value")).sum();
        assertTrue(slots >= 8 * ELEMENTS / 512, json::toString);
    }

    @Test
    void countersFilterByJobAndByName()
    {
        final Map<String, Object> byJob = jsonObject(ok(OpsCli.run(local("counters", "--job", "train", "--json"))));
        final List<?> jobCounters = (List<?>)byJob.get("counters");
        assertEquals(JobsCommand.COUNTERS.length, jobCounters.size(), byJob::toString);
        assertTrue(jobCounters.stream().allMatch(c -> Long.valueOf(1).equals(((Map<?, ?>)c).get("job"))));

        final OpsCli.Result retransmissions = ok(OpsCli.run(local("counters", "--job", "1", "--name", "retrans*")));
        final List<String> rows = retransmissions.out().lines().filter(l -> l.startsWith("job ")).toList();
        assertEquals(1, rows.size(), retransmissions::toString);
        assertTrue(rows.get(0).contains("retransmissions_served"), retransmissions::toString);

        final Map<String, Object> drops = jsonObject(ok(OpsCli.run(local("counters", "--name", "drop_", "--type", "shard", "--json"))));
        assertTrue(((List<?>)drops.get("counters")).stream()
            .allMatch(c -> ((String)((Map<?, ?>)c).get("name")).startsWith("drop_") && "shard".equals(((Map<?, ?>)c).get("type"))));

        final OpsCli.Result missing = OpsCli.run(local("counters", "--job", "nosuchjob"));
        assertEquals(OpsException.FAILED, missing.exitCode(), missing::toString);
        assertTrue(missing.err().contains("no counters of job 'nosuchjob' (jobs: 1 default/train"), missing::toString);
    }

    @Test
    void countersRemotelyHaveTheSameNamesAsLocally()
    {
        final Map<String, Object> local = jsonObject(ok(OpsCli.run(local("counters", "--json"))));
        final Map<String, Object> remote = jsonObject(ok(OpsCli.run(remote("counters", "--json"))));
        final java.util.Set<String> localKeys = new java.util.TreeSet<>();
        final java.util.Set<String> remoteKeys = new java.util.TreeSet<>();
        for (final Object counter : (List<?>)local.get("counters"))
        {
            final Map<?, ?> c = (Map<?, ?>)counter;
            localKeys.add(c.get("type") + "/" + c.get("name"));
        }
        for (final Object counter : (List<?>)remote.get("counters"))
        {
            final Map<?, ?> c = (Map<?, ?>)counter;
            remoteKeys.add(c.get("type") + "/" + c.get("name"));
        }
        assertEquals(localKeys, remoteKeys);
    }

    @Test
    void countersWatchRefreshesWithRatesAndNoCursorEscapesWhenNotATerminal()
    {
        final OpsCli.Result plain = ok(OpsCli.run(false,
            local("counters", "--watch", "--iterations", "2", "--interval-ms", "50", "--type", "system")));
        assertFalse(plain.out().contains("\033"), plain::toString);
        assertTrue(plain.out().contains("refresh 1/2 every 50 ms") && plain.out().contains("refresh 2/2 every 50 ms"),
            plain::toString);
        assertTrue(plain.out().contains("RATE/s"), plain::toString);

        final OpsCli.Result terminal = ok(OpsCli.run(true,
            local("counters", "--watch", "--iterations", "2", "--interval-ms", "50", "--type", "system")));
        assertEquals(2, terminal.out().split("\033\\[H\033\\[2J", -1).length - 1, terminal::toString);

        final OpsCli.Result json = ok(OpsCli.run(true,
            local("counters", "-w", "--iterations", "2", "--interval-ms", "50", "--json", "--name", "packets_in")));
        final List<String> lines = json.out().lines().toList();
        assertEquals(2, lines.size(), json::toString);
        assertFalse(json.out().contains("\033"));
        final Map<?, ?> second = (Map<?, ?>)Json.parse(lines.get(1));
        assertEquals(2L, second.get("refresh"));
        assertTrue(((List<?>)second.get("counters")).stream().allMatch(c -> ((Map<?, ?>)c).get("rate_per_sec") instanceof Number),
            lines.get(1));
    }

    @Test
    void histogramsShowsPercentilesTheDistributionAndThroughputOverTime()
    {
        final OpsCli.Result text = ok(OpsCli.run(local("histograms", "--since", "10m")));
        assertTrue(text.out().contains("slot-completion latency"), text::toString);
        for (final String row : List.of("count", "min", "p50", "p90", "p99", "p99.9", "max"))
        {
            assertTrue(text.out().lines().anyMatch(l -> l.startsWith(row + " ")), row + "\n" + text);
        }
        assertTrue(text.out().contains("all shards") && text.out().contains("shard 1"), text::toString);
        assertTrue(text.out().contains("distribution: estimated slots per latency bucket"), text::toString);
        assertTrue(text.out().contains("slots/s"), text::toString);

        final Map<String, Object> json = jsonObject(ok(OpsCli.run(local("histograms", "--json"))));
        final Map<?, ?> latency = (Map<?, ?>)json.get("latency_ns");
        final long count = (Long)latency.get("count");
        assertTrue(count >= 8 * ELEMENTS / 512, json::toString);
        final long min = (Long)latency.get("min");
        final long p50 = (Long)latency.get("p50");
        final long p99 = (Long)latency.get("p99");
        final long max = (Long)latency.get("max");
        assertTrue(min >= 0 && min <= p50 && p50 <= p99 && p99 <= max && max > 0, latency::toString);
        final double distributed = ((List<?>)json.get("distribution")).stream()
            .mapToDouble(b -> ((Number)((Map<?, ?>)b).get("count")).doubleValue()).sum();
        assertEquals(count, distributed, count * 0.01 + 1);
        final long intervalCounts = ((List<?>)json.get("intervals")).stream()
            .mapToLong(i -> (Long)((Map<?, ?>)i).get("count")).sum();
        assertEquals(count, intervalCounts);

        final OpsCli.Result shard = ok(OpsCli.run(local("histograms", "--shard", "1", "--json")));
        assertEquals(List.of(1L), jsonObject(shard).get("shards"));
    }

    @Test
    void histogramsHtmlIsOneSelfContainedPageWithSvgCharts() throws Exception
    {
        final Path html = dir.resolve("report/latency.html");
        final OpsCli.Result result = ok(OpsCli.run(local("histograms", "--html", html.toString())));
        assertTrue(result.out().contains("wrote " + html), result::toString);
        final String page = Files.readString(html);
        assertTrue(page.startsWith("<!DOCTYPE html>"), page);
        assertEquals(4, page.split("<svg ", -1).length - 1, page);
        for (final String title : List.of("Latency distribution", "Percentile curve", "Latency over time", "Throughput over time"))
        {
            assertTrue(page.contains("<h2>" + title + "</h2>"), title);
        }
        assertFalse(page.contains("<script") || page.contains("src=") || page.contains("href="), "nothing fetched");
        assertFalse(page.contains("NaN"), page);
    }

    @Test
    void histogramsOfAnEmptyWindowAndRemoteWindowsAreClearErrors()
    {
        final OpsCli.Result empty = OpsCli.run(local("histograms", "--since", "3h", "--until", "2h"));
        assertEquals(OpsException.FAILED, empty.exitCode(), empty::toString);
        assertTrue(empty.err().contains("no latency snapshots from") && empty.err().contains("widen --since"), empty::toString);

        final OpsCli.Result remoteWindow = OpsCli.run(remote("histograms", "--html", "x.html"));
        assertEquals(OpsException.USAGE, remoteWindow.exitCode(), remoteWindow::toString);
        assertTrue(remoteWindow.err().contains("runs on the appliance host"), remoteWindow::toString);

        final OpsCli.Result remote = ok(OpsCli.run(remote("histograms")));
        assertTrue(remote.out().contains("since the appliance started"), remote::toString);
        final Map<String, Object> json = jsonObject(ok(OpsCli.run(remote("histograms", "--json"))));
        assertEquals(2, ((List<?>)json.get("per_shard")).size(), json::toString);
        for (final Object entry : (List<?>)json.get("per_shard"))
        {
            final Map<?, ?> shard = (Map<?, ?>)entry;
            if ((Long)shard.get("count") > 0)
            {
                final long p50 = (Long)shard.get("p50");
                assertTrue(p50 > 0 && p50 <= (Long)shard.get("p99"), json::toString);
            }
        }
    }

    @Test
    void jobsListAndDescribeShowMembersSlotsRetransmissionsAndHistory()
    {
        final OpsCli.Result list = ok(OpsCli.run(local("jobs")));
        final String train = list.out().lines().filter(l -> l.contains("default/train")).findFirst().orElseThrow(() -> new AssertionError(list));
        assertTrue(train.matches("1\\s+default/train\\s+active\\s+2/2\\s+software\\s+int32\\s+512\\s+8 .*"), train);

        final Map<String, Object> job = jsonObject(ok(OpsCli.run(local("jobs", "describe", "train", "--json"))));
        assertEquals(1L, job.get("job"));
        assertEquals("active", job.get("state"));
        assertEquals(2L, job.get("joined"));
        assertEquals(8L, job.get("s"));
        final Map<?, ?> counters = (Map<?, ?>)job.get("counters");
        assertTrue((Long)counters.get("retransmissions_served") > 0, "1% loss causes retransmissions: " + counters);
        final List<?> history = (List<?>)job.get("history");
        assertEquals(List.of("JOB_CREATED", "JOB_STARTED"), history.stream().map(e -> ((Map<?, ?>)e).get("type")).toList());
        assertTrue(job.containsKey("last_error") && job.get("last_error") == null, job::toString);

        final OpsCli.Result text = ok(OpsCli.run(local("jobs", "describe", "1")));
        assertTrue(text.out().contains("members         2 of 2 ranks joined"), text::toString);
        assertTrue(text.out().contains("slots           8 slots of k=512 int32 lanes"), text::toString);
        assertTrue(text.out().contains("retransmissions "), text::toString);
        assertTrue(text.out().contains("last error      none"), text::toString);
        assertTrue(text.out().contains("backend         software (its first choice)"), text::toString);

        final OpsCli.Result remote = ok(OpsCli.run(remote("jobs")));
        assertTrue(remote.out().contains("default/train"), remote::toString);

        final OpsCli.Result missing = OpsCli.run(local("jobs", "describe", "nosuchjob"));
        assertEquals(OpsException.FAILED, missing.exitCode(), missing::toString);
        assertTrue(missing.err().contains("no job 'nosuchjob' (jobs now: 1 default/train"), missing::toString);
    }

    @Test
    void jobsAbortEndsTheJobAndItsWorkersSeeTheReason()
    {
        final WorkerClient victim = WorkerClient.connect(worker("victim", 1, 0));
        try
        {
            final OpsCli.Result abort = ok(OpsCli.run(local("jobs", "abort", "victim", "--reason", "maintenance window")));
            assertTrue(abort.out().matches("aborted job \\d+ \\(default/victim\\): maintenance window\\s*"), abort::toString);
            final int[] tensor = new int[1024];
            final AllReduceException failure = assertThrows(AllReduceException.class, () -> victim.allReduce(tensor, tensor));
            assertTrue(failure.getMessage().contains("maintenance window"), failure.getMessage());
        }
        finally
        {
            victim.close();
        }
        final OpsCli.Result again = OpsCli.run(local("jobs", "abort", "victim"));
        assertEquals(OpsException.FAILED, again.exitCode(), again::toString);
        assertTrue(again.err().contains("no running job 'victim'"), again::toString);
        final OpsCli.Result byId = OpsCli.run(local("jobs", "abort", "999"));
        assertEquals(OpsException.FAILED, byId.exitCode(), byId::toString);
        assertTrue(byId.err().contains("the appliance refused: no job 999"), byId::toString);

        final Map<String, Object> described = awaitJson(() -> OpsCli.run(local("jobs", "describe", "victim", "--json")),
            json -> json.get("last_error") != null);
        assertEquals("aborted", described.get("state"), described::toString);
        assertTrue(((String)((Map<?, ?>)described.get("last_error")).get("message")).contains("maintenance window"),
            described::toString);

        final OpsCli.Result all = ok(OpsCli.run(local("jobs", "list", "--all")));
        assertTrue(all.out().lines().anyMatch(l -> l.contains("default/victim") && l.contains("aborted")), all::toString);
    }

    @Test
    void eventsTailsTheJournalFilteredByJobAndSeverity()
    {
        final OpsCli.Result all = ok(OpsCli.run(local("events", "--all")));
        assertTrue(all.out().contains("APPLIANCE_STARTED"), all::toString);
        assertTrue(all.out().contains("JOB_STARTED") && all.out().contains("job 1 default/train"), all::toString);
        assertFalse(all.out().contains("HISTOGRAM_SNAPSHOT"), "snapshots only on request");

        final OpsCli.Result train = ok(OpsCli.run(local("events", "--job", "train", "--json")));
        final List<String> lines = train.out().lines().toList();
        assertTrue(lines.size() >= 2, train::toString);
        for (final String line : lines)
        {
            assertEquals("train", ((Map<?, ?>)Json.parse(line)).get("job_name"), line);
            assertSnakeCaseKeys(Json.parse(line), line);
        }

        final OpsCli.Result warnings = ok(OpsCli.run(local("events", "--severity", "warn", "--all", "--json")));
        for (final String line : warnings.out().lines().toList())
        {
            assertFalse("INFO".equals(((Map<?, ?>)Json.parse(line)).get("severity")), line);
        }

        final OpsCli.Result snapshots = ok(OpsCli.run(local("events", "--snapshots", "-n", "3")));
        assertEquals(3, snapshots.out().lines().filter(l -> l.contains("HISTOGRAM_SNAPSHOT")).count(), snapshots::toString);

        final OpsCli.Result remote = OpsCli.run(remote("events"));
        assertEquals(OpsException.USAGE, remote.exitCode(), remote::toString);
    }

    @Test
    void eventsFollowPrintsNewEventsAndTimesOut() throws Exception
    {
        final Future<OpsCli.Result> follow = executor.submit(() -> OpsCli.run(local(
            "events", "--follow", "--job", "late", "--type", "job-started", "--lines", "1", "--max-events", "1",
            "--follow-ms", "20000", "--json")));
        Thread.sleep(300);
        final WorkerClient late = WorkerClient.connect(worker("late", 1, 0));
        try
        {
            final OpsCli.Result result = follow.get(25, TimeUnit.SECONDS);
            assertEquals(0, result.exitCode(), result::toString);
            final Map<?, ?> event = (Map<?, ?>)Json.parse(result.out().strip());
            assertEquals("JOB_STARTED", event.get("type"));
            assertEquals("late", event.get("job_name"));
        }
        finally
        {
            late.close();
        }

        final OpsCli.Result timedOut = OpsCli.run(local(
            "events", "-f", "--type", "FAULT", "--lines", "0", "--max-events", "1", "--follow-ms", "200"));
        assertEquals(OpsException.TIMED_OUT, timedOut.exitCode(), timedOut::toString);
    }

    @Test
    void badArgumentsAreExitCode2WithTheReason()
    {
        for (final String[] args : List.of(
            new String[] {"counters", "--no-such-option"},
            new String[] {"histograms", "--since", "yesterdayish"},
            new String[] {"events", "--severity", "fatal"},
            new String[] {"events", "--type", "NOPE"},
            new String[] {"counters", "--type", "cluster"},
            new String[] {"counters", "--url", "ftp://x"},
            new String[] {"status", "--control-port", "70000"},
            new String[] {"jobs", "describe"}))
        {
            final OpsCli.Result result = OpsCli.run(args);
            assertEquals(OpsException.USAGE, result.exitCode(), () -> String.join(" ", args) + "\n" + result);
            assertFalse(result.err().isBlank(), result::toString);
        }
        final OpsCli.Result since = OpsCli.run("histograms", "--since", "yesterdayish");
        assertTrue(since.err().contains("'yesterdayish' is not a time"), since::toString);
    }

    @Test
    void aUsageErrorNamesTheOneWrongOptionAndAHintNotTheWholeHelp()
    {
        final OpsCli.Result typo = OpsCli.run("status", "--jsn");
        assertEquals(OpsException.USAGE, typo.exitCode(), typo::toString);
        assertEquals("", typo.out(), typo::toString);
        final List<String> lines = typo.err().lines().toList();
        assertEquals("ops status: Unknown option: '--jsn'", lines.getFirst(), typo::toString);
        assertTrue(typo.err().contains("--json"), "suggests the option meant: " + typo);
        assertEquals("Try 'ops status --help' for more information.", lines.getLast(), typo::toString);
        assertFalse(typo.err().contains("Usage:") || typo.err().contains("--timeout-ms"), "no usage help: " + typo);

        final OpsCli.Result badValue = OpsCli.run("status", "--control-port", "70000");
        assertEquals(OpsException.USAGE, badValue.exitCode(), badValue::toString);
        assertFalse(badValue.err().contains("Usage:"), badValue::toString);
        // --control-port is an option of ops itself (inherited by its subcommands): its help is ops --help
        assertEquals(List.of("ops: --control-port must be within 1..65535: 70000", "Try 'ops --help' for more information."),
            badValue.err().lines().toList(), badValue::toString);
    }

    @Test
    void withJsonErrorsAreOneJsonObjectOnStdoutAndTheExitCode()
    {
        final OpsCli.Result unreachable = OpsCli.run("status", "--json", "--dir", dir.resolve("nothing-here").toString());
        assertEquals(OpsException.UNREACHABLE, unreachable.exitCode(), unreachable::toString);
        final Map<String, Object> error = jsonObject(unreachable);
        assertEquals((long)OpsException.UNREACHABLE, error.get("exit_code"), unreachable::toString);
        assertTrue(((String)error.get("error")).contains("nothing-here"), unreachable::toString);
        assertEquals("", unreachable.err(), unreachable::toString);

        final OpsCli.Result usage = OpsCli.run("counters", "--json", "--no-such-option");
        assertEquals(OpsException.USAGE, usage.exitCode(), usage::toString);
        final Map<String, Object> usageError = jsonObject(usage);
        assertEquals("Unknown option: '--no-such-option'", usageError.get("error"), usage::toString);
        assertEquals((long)OpsException.USAGE, usageError.get("exit_code"), usage::toString);
        assertEquals("Try 'ops counters --help' for more information.", usageError.get("hint"), usage::toString);

        final OpsCli.Result missing = OpsCli.run("jobs", "describe", "no-such-job", "--json", "--dir", dir.toString(),
            "--control-port", Integer.toString(appliance.controlPort()));
        assertEquals(OpsException.FAILED, missing.exitCode(), missing::toString);
        assertEquals((long)OpsException.FAILED, jsonObject(missing).get("exit_code"), missing::toString);
    }

    @Test
    void helpDocumentsTheExitCodesOfEveryCommand()
    {
        for (final String command : List.of("status", "counters", "histograms", "jobs", "events"))
        {
            final OpsCli.Result help = ok(OpsCli.run(command, "--help"));
            assertTrue(help.out().contains("Exit codes:"), help::toString);
            assertTrue(help.out().contains("4   the appliance is not running or not reachable"), help::toString);
            assertTrue(help.out().contains("--json"), help::toString);
        }
        final OpsCli.Result none = OpsCli.run();
        assertEquals(OpsException.USAGE, none.exitCode(), none::toString);
        assertTrue(none.err().contains("missing subcommand"), none::toString);
        final OpsCli.Result top = ok(OpsCli.run("--help"));
        for (final String command : List.of("status", "counters", "histograms", "jobs", "events"))
        {
            assertTrue(top.out().contains("  " + command), top::toString);
        }
    }

    @Test
    void globalOptionsWorkBeforeAndAfterTheSubcommandAndUnderAnotherRoot()
    {
        ok(OpsCli.run("--dir", dir.toString(), "--control-port", Integer.toString(appliance.controlPort()), "--json", "status"));
        final CommandLine root = new CommandLine(new Root()).addSubcommand("ops", new OpsCommand());
        final java.io.StringWriter out = new java.io.StringWriter();
        root.setOut(new java.io.PrintWriter(out, true));
        final int exitCode = root.execute("ops", "--json", "jobs", "list", "--dir", dir.toString(),
            "--control-port", Integer.toString(appliance.controlPort()));
        assertEquals(0, exitCode, out::toString);
        assertInstanceOf(List.class, Json.parse(out.toString()));
    }

    @CommandLine.Command(name = "switchml")
    static final class Root implements Runnable
    {
        public void run()
        {
        }
    }

    private static Map<String, Object> awaitJson(
        final java.util.function.Supplier<OpsCli.Result> run, final java.util.function.Predicate<Map<String, Object>> until)
    {
        final long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (true)
        {
            final OpsCli.Result result = run.get();
            final Map<String, Object> json = result.exitCode() == 0 ? jsonObject(result) : null;
            if (json != null && until.test(json) || System.nanoTime() - deadlineNs > 0)
            {
                assertNotNull(json, result::toString);
                return json;
            }
            Thread.onSpinWait();
        }
    }
}
