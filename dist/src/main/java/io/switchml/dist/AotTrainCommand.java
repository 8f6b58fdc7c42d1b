package io.switchml.dist;

import io.switchml.appliance.Appliance;
import io.switchml.appliance.ApplianceCommand;
import io.switchml.appliance.ApplianceContext;
import io.switchml.worker.WorkerCommand;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.io.Writer;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.HexFormat;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

/**
 * {@code switchml aot-train} (hidden): the training run of the AOT cache the build makes
 * (dist/src/build/stage-lib.sh, through the launcher with {@code SWITCHML_AOT=train}). One JVM goes through what
 * the cache should hold: the usage of every command (their picocli models), the appliance's configuration,
 * {@code worker serve} agents joining a job on an appliance and all-reducing through their socket and shared memory
 * for a client, as a training process would (MAC on, the packaged default; every third tensor all zeros; a one-element
 * all-reduce, a barrier, after each), and the demo
 * (MAC off). The JVM writes
 * the cache when it exits (JEP 514), with the classes loaded and linked and the method profiles (JEP 515) of this run.
 */
@Command(name = "aot-train", hidden = true, mixinStandardHelpOptions = true, versionProvider = io.switchml.protocol.BuildInfo.VersionProvider.class,
    description = "Training run of the AOT cache (the build runs it with SWITCHML_AOT=train).")
public final class AotTrainCommand implements Callable<Integer>
{
    @Option(names = "--size-mb", description = "Tensor size of the demo and of the agents' all-reduces (default ${DEFAULT-VALUE}).",
        defaultValue = "16")
    private int sizeMb;

    @Option(names = "--iterations", description = "All-reduces through each agent and timed demo rounds (default ${DEFAULT-VALUE}).",
        defaultValue = "10")
    private int iterations;

    @Override
    public Integer call() throws Exception
    {
        final long start = System.nanoTime();
        usage(new CommandLine(new SwitchMl()));
        final Path dir = Files.createTempDirectory("switchml-aot-train");
        try
        {
            final int config = new CommandLine(new ApplianceCommand()).setOut(new PrintWriter(Writer.nullWriter()))
                .execute("--print-config", "--dir", dir.toString());
            if (config != 0)
            {
                System.out.println("aot-train: appliance --print-config exited with " + config);
                return 1;
            }
            if (!agents(dir))
            {
                return 1;
            }
        }
        finally
        {
            try (var paths = Files.walk(dir))
            {
                paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
        final int demo = new CommandLine(new DemoCommand()).execute("--size-mb", Integer.toString(sizeMb), "--warmups", "2",
            "--iterations", Integer.toString(iterations));
        System.out.printf(Locale.ROOT, "aot-train: %s in %.1f s%n", demo == 0 ? "done" : "demo failed", (System.nanoTime() - start) / 1e9);
        return demo;
    }

    private static void usage(final CommandLine command)
    {
        command.usage(new PrintWriter(Writer.nullWriter()));
        for (final CommandLine sub : command.getSubcommands().values())
        {
            usage(sub);
        }
    }

    /** Two {@code worker serve} agents on an appliance, each all-reducing for a client over its socket. */
    private boolean agents(final Path dir) throws Exception
    {
        final int world = 2;
        final String token = HexFormat.of().formatHex(java.security.SecureRandom.getSeed(16));
        final int elements = sizeMb * 1_000_000 / Float.BYTES;
        final long shmBytes = (long)elements * Float.BYTES;
        try (Appliance appliance = Appliance.launch(new ApplianceContext().dataPort(0).controlPort(0).httpPort(-1)
            .dir(dir.resolve("appliance").toString())))
        {
            // the appliance's start-up rehearsal runs first in production too: its code and the shards' under it
            // a generous budget: a loaded build machine must not fail the build for being slow
            System.out.println("aot-train: " + appliance.rehearse(20_000_000_000L).describe());
            final Thread[] agents = new Thread[world];
            final int[] exits = new int[world];
            for (int r = 0; r < world; r++)
            {
                final int rank = r;
                final String[] args = {"serve", "--appliance", "127.0.0.1", "--control-port", Integer.toString(appliance.controlPort()),
                    "--job", "aot-train", "--token", token, "--world", Integer.toString(world), "--rank", Integer.toString(rank),
                    "--socket", dir.resolve("rank" + rank + ".sock").toString(), "--shm", dir.resolve("rank" + rank + ".shm").toString(),
                    "--shm-bytes", Long.toString(shmBytes), "--once"};
                agents[r] = Thread.ofPlatform().name("aot-train-agent-" + rank)
                    .start(() -> exits[rank] = new CommandLine(new WorkerCommand()).execute(args));
            }
            final Thread[] clients = new Thread[world];
            final String[] failures = new String[world];
            for (int r = 0; r < world; r++)
            {
                final int rank = r;
                clients[r] = Thread.ofPlatform().name("aot-train-client-" + rank).start(() ->
                {
                    try
                    {
                        client(dir.resolve("rank" + rank + ".sock"), rank, world, elements);
                    }
                    catch (final Exception ex)
                    {
                        failures[rank] = "client " + rank + ": " + ex;
                    }
                });
            }
            for (int r = 0; r < world; r++)
            {
                clients[r].join();
                agents[r].join(TimeUnit.SECONDS.toMillis(30));
                if (failures[r] != null || agents[r].isAlive() || exits[r] != 0)
                {
                    System.out.println("aot-train: " + (failures[r] != null ? failures[r] : "agent " + r + " exited with " + exits[r]));
                    return false;
                }
            }
        }
        return true;
    }

    /** A training process's side of the bridge (worker-agent/python): INFO, ALLREDUCE through shared memory, CLOSE. */
    private void client(final Path socket, final int rank, final int world, final int elements) throws Exception
    {
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        SocketChannel channel = null;
        while (channel == null)
        {
            try
            {
                channel = SocketChannel.open(UnixDomainSocketAddress.of(socket));
            }
            catch (final IOException ex)
            {
                if (System.nanoTime() > deadline)
                {
                    throw ex;
                }
                Thread.sleep(20);
            }
        }
        try (SocketChannel ch = channel)
        {
            final BufferedReader in = new BufferedReader(new InputStreamReader(Channels.newInputStream(ch), StandardCharsets.UTF_8));
            final OutputStream out = Channels.newOutputStream(ch);
            final String info = request(in, out, "INFO");
            final String shm = field(info, "shm");
            final MappedByteBuffer mapped;
            try (FileChannel file = FileChannel.open(Path.of(shm), StandardOpenOption.READ, StandardOpenOption.WRITE))
            {
                mapped = file.map(FileChannel.MapMode.READ_WRITE, 0, (long)elements * Float.BYTES);
            }
            final FloatBuffer floats = mapped.order(ByteOrder.nativeOrder()).asFloatBuffer();
            for (int i = 0; i < iterations; i++)
            {
                // every third all-reduce is of zeros, as a gradient's unused parameters give: blocks with no
                // exponent take their own branches, which the cached profiles must have seen (a branch a profile never
                // saw taken is left out of the compiled code, which is thrown away when the job takes it)
                final float value = i % 3 == 2 ? 0.0f : rank + 1;
                final float expected = i % 3 == 2 ? 0.0f : world * (world + 1) / 2.0f;
                for (int e = 0; e < elements; e++)
                {
                    floats.put(e, value);
                }
                request(in, out, "ALLREDUCE offset=0 count=" + elements + " op=sum");
                for (int e = 0; e < elements; e += 4099)
                {
                    if (Math.abs(floats.get(e) - expected) > 1e-3f * expected)
                    {
                        throw new IllegalStateException("element " + e + " is " + floats.get(e) + ", expected " + expected);
                    }
                }
                // then one element, as a barrier is (torch.distributed.barrier, and the bench's before each call):
                // a stream shorter than the pool leaves slots waiting past its end, a branch the job's packet path
                // takes at every barrier and that the cached profiles must have seen for the same reason
                floats.put(0, rank + 1);
                request(in, out, "ALLREDUCE offset=0 count=1 op=sum");
                if (floats.get(0) != world * (world + 1) / 2.0f)
                {
                    throw new IllegalStateException("one-element all-reduce gave " + floats.get(0));
                }
                if (i % 3 == 1)
                {
                    // an infinity, as a loss scaler's overflowed step gives: its chunk comes back NaN, through branches
                    // the cached profiles must have seen (a job's first overflow would otherwise recompile the path)
                    floats.put(0, 1.0f).put(1, Float.POSITIVE_INFINITY);
                    request(in, out, "ALLREDUCE offset=0 count=2 op=sum");
                    if (!Float.isNaN(floats.get(0)))
                    {
                        throw new IllegalStateException("an all-reduce holding an infinity gave " + floats.get(0));
                    }
                }
            }
            request(in, out, "CLOSE");
        }
    }

    private static String request(final BufferedReader in, final OutputStream out, final String line) throws IOException
    {
        out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
        final String reply = in.readLine();
        if (reply == null || !reply.startsWith("OK"))
        {
            throw new IOException(line.split(" ")[0] + ": " + reply);
        }
        return reply;
    }

    private static String field(final String reply, final String name)
    {
        for (final String part : reply.split(" "))
        {
            if (part.startsWith(name + "="))
            {
                return part.substring(name.length() + 1);
            }
        }
        throw new IllegalStateException("no " + name + " in " + reply);
    }
}
