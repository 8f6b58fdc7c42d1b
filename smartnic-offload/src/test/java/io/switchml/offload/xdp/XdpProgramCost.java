package io.switchml.offload.xdp;

import io.switchml.protocol.ElementType;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Not a test: the program's own run time per update packet as BPF_PROG_TEST_RUN measures it (program only, no
 * driver, no copy), on a clean in-order stream of a 4-rank int32 job (three of four updates absorbed, one completes
 * and is rewritten into the result), MAC off and on, three rounds: k = 256 on the program loaded for
 * {@code -Dsmall=} (256 by default) and on a baseline object of the pre-jumbo layout (2136-byte slots with the lanes
 * inside), and k = 2233 on the program loaded for 2233. Build the baseline from commit 31a90ab's
 * {@code src/main/bpf} with {@code build.sh}, then, as root, with the test class path:
 * {@code java --enable-native-access=ALL-UNNAMED -cp ... io.switchml.offload.xdp.XdpProgramCost baseline/switchml_xdp.o}.
 * The figures in the README were taken so; on 2 shared cores they move by 10-20 % between runs.
 */
public final class XdpProgramCost
{
    static final int[] PORTS = {7471};

    interface Runner extends AutoCloseable
    {
        int fd();
        void install(XdpJobImage job) throws Exception;
        void close();
    }

    static Runner oldProgram(final Path object) throws Exception
    {
        final BpfObject obj = BpfObject.open(object);
        obj.setMaxEntries("sml_slots", 64);
        obj.load("switchml_xdp");
        final Arena arena = Arena.ofShared();
        final MemorySegment key = arena.allocate(4);
        final MemorySegment config = arena.allocate(16, 8);
        XdpLayout.writeConfig(config, PORTS, 1);
        obj.map("sml_config").update(key, config, 0);
        return new Runner()
        {
            public int fd()
            {
                return fd0();
            }

            int fd0()
            {
                try
                {
                    return obj.programFd("switchml_xdp");
                }
                catch (final BpfException ex)
                {
                    throw new RuntimeException(ex);
                }
            }

            public void install(final XdpJobImage job) throws Exception
            {
                final MemorySegment slot = arena.allocate(2136, 8);
                slot.set(ValueLayout.JAVA_LONG, 8 + 8, -1L);
                slot.set(ValueLayout.JAVA_LONG, 8 + 1064 + 8, -1L);
                for (int i = 0; i < job.slots(); i++)
                {
                    key.set(ValueLayout.JAVA_INT, 0, job.slotBase() + i);
                    obj.map("sml_slots").update(key, slot, 0);
                }
                final MemorySegment value = arena.allocate(840, 8);
                XdpLayout.writeJob(value, job);
                key.set(ValueLayout.JAVA_INT, 0, job.jobId());
                obj.map("sml_jobs").update(key, value, 0);
            }

            public void close()
            {
                obj.close();
            }
        };
    }

    static Runner newProgram(final int maxLanes) throws Exception
    {
        final XdpProgram program = XdpProgram.load(64, maxLanes);
        program.configure(PORTS, 1);
        return new Runner()
        {
            public int fd()
            {
                return program.programFd();
            }

            public void install(final XdpJobImage job) throws Exception
            {
                program.installJob(job);
            }

            public void close()
            {
                program.close();
            }
        };
    }

    static List<byte[]> stream(final XdpJobImage job, final int packets)
    {
        final Traces traces = new Traces(42, PORTS);
        final Traces.Stream stream = traces.new Stream(job);
        final List<byte[]> frames = new ArrayList<>();
        while (frames.size() < packets)
        {
            final byte[] frame = stream.nextUpdate();
            if (frame != null)
            {
                frames.add(frame);
            }
        }
        return frames;
    }

    static double nsPerPacket(final Runner runner, final XdpJobImage job, final List<byte[]> frames) throws Exception
    {
        runner.install(job);
        long total = 0;
        for (final byte[] frame : frames)
        {
            final BpfTestRun.Result result = BpfTestRun.run(runner.fd(), frame);
            if (result.retval() != BpfTestRun.XDP_DROP && result.retval() != BpfTestRun.XDP_PASS && result.retval() != BpfTestRun.XDP_TX)
            {
                throw new IllegalStateException("verdict " + result.retval());
            }
            total += result.durationNs();
        }
        return (double)total / frames.size();
    }

    public static void main(final String[] args) throws Exception
    {
        final Path old = Path.of(args[0]);
        final int packets = 20_000;
        for (final boolean mac : new boolean[] {false, true})
        {
            final XdpJobImage job256 = Traces.job(1, 4, 256, 16, 0, ElementType.INT32, mac, 0, 1);
            final XdpJobImage job2233 = Traces.job(1, 4, 2233, 16, 0, ElementType.INT32, mac, 0, 1);
            final List<byte[]> f256 = stream(job256, packets);
            final List<byte[]> f2233 = stream(job2233, packets);
            for (int round = 0; round < 3; round++)
            {
                final double a;
                final double b;
                final double c;
                try (Runner r = oldProgram(old))
                {
                    a = nsPerPacket(r, job256, f256);
                }
                try (Runner r = newProgram(Integer.getInteger("small", 256)))
                {
                    b = nsPerPacket(r, job256, f256);
                }
                try (Runner r = newProgram(2233))
                {
                    c = nsPerPacket(r, job2233, f2233);
                }
                System.out.printf("mac=%s round %d: k=256 old %.0f ns/pkt, new %.0f ns/pkt; k=2233 new %.0f ns/pkt%n",
                    mac ? "on" : "off", round, a, b, c);
            }
        }
    }
}
