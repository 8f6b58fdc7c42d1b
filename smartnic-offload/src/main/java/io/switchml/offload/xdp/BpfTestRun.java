package io.switchml.offload.xdp;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Runs a loaded XDP program on one frame without any interface (BPF_PROG_TEST_RUN): the tool for differential
 * tests against the software engine and for the program's own cost per packet. For a program declared xdp.frags
 * the kernel puts the first {@link #LINEAR_BYTES} bytes of a longer frame in the linear buffer and the rest in
 * page-sized fragments (bpf_prog_test_run_xdp), so jumbo frames reach the program in several buffers, as a driver
 * hands them over.
 */
public final class BpfTestRun
{
    public static final int XDP_ABORTED = 0;
    public static final int XDP_DROP = 1;
    public static final int XDP_PASS = 2;
    public static final int XDP_TX = 3;

    /** Room for a frame the program grows with bpf_xdp_adjust_tail, and for jumbo frames. */
    private static final int OUT_CAPACITY = 16384;
    /** Page size less XDP_PACKET_HEADROOM (256) less the aligned struct skb_shared_info (320) on x86-64. */
    public static final int LINEAR_BYTES = 4096 - 256 - 320;
    /** Size of each fragment the kernel builds after the linear part. */
    public static final int FRAGMENT_BYTES = 4096;

    /**
     * @param retval     the XDP verdict.
     * @param data       the frame after the program (its output).
     * @param durationNs average run time per repetition as the kernel measured it.
     */
    public record Result(int retval, byte[] data, long durationNs)
    {
    }

    private BpfTestRun()
    {
    }

    public static Result run(final int programFd, final byte[] frame) throws BpfException
    {
        return run(programFd, frame, 1);
    }

    /**
     * @param repeat runs of the program on the same input (the output is the last run's).
     */
    public static Result run(final int programFd, final byte[] frame, final int repeat) throws BpfException
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment in = arena.allocate(frame.length);
            MemorySegment.copy(frame, 0, in, ValueLayout.JAVA_BYTE, 0, frame.length);
            final MemorySegment out = arena.allocate(OUT_CAPACITY);
            final MemorySegment opts = arena.allocate(Libbpf.TEST_RUN_OPTS_SIZE, 8);
            opts.set(ValueLayout.JAVA_LONG, 0, Libbpf.TEST_RUN_OPTS_SIZE);
            opts.set(ValueLayout.ADDRESS, Libbpf.TEST_RUN_DATA_IN, in);
            opts.set(ValueLayout.ADDRESS, Libbpf.TEST_RUN_DATA_OUT, out);
            opts.set(ValueLayout.JAVA_INT, Libbpf.TEST_RUN_DATA_SIZE_IN, frame.length);
            opts.set(ValueLayout.JAVA_INT, Libbpf.TEST_RUN_DATA_SIZE_OUT, OUT_CAPACITY);
            opts.set(ValueLayout.JAVA_INT, Libbpf.TEST_RUN_REPEAT, repeat);
            final int error = BpfObject.invokeInt(() -> (int)Libbpf.PROG_TEST_RUN.invokeExact(programFd, opts));
            if (error < 0)
            {
                throw new BpfException("bpf_prog_test_run_opts: " + Libbpf.describe(error));
            }
            final int outLength = opts.get(ValueLayout.JAVA_INT, Libbpf.TEST_RUN_DATA_SIZE_OUT);
            return new Result(opts.get(ValueLayout.JAVA_INT, Libbpf.TEST_RUN_RETVAL), out.asSlice(0, outLength).toArray(ValueLayout.JAVA_BYTE),
                Integer.toUnsignedLong(opts.get(ValueLayout.JAVA_INT, Libbpf.TEST_RUN_DURATION)));
        }
    }
}
