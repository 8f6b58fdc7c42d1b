package io.switchml.worker.bridge;

/**
 * The exchange between a training process and its local bridge over the Unix-domain control
 * socket: one line of UTF-8 text per message, a verb followed by {@code key=value} fields separated
 * by spaces (parsed with {@link io.switchml.protocol.ControlProtocol#parse}). Tensor data never
 * crosses the socket: the client writes float32 elements into the shared-memory file, asks for an
 * all-reduce of a byte range of it, and reads the result from the same range.
 * <pre>
 * client -&gt; INFO
 * bridge -&gt; OK version=1 shm=/dev/shm/switchml-default-job-rank0.shm shmBytes=268435456 rank=0 world=4
 *           job=job tenant=default k=8192 s=32 dtype=float32 byteOrder=LITTLE_ENDIAN
 * client -&gt; ALLREDUCE offset=0 count=5632 op=sum|average      (offset in bytes, a multiple of 4)
 * bridge -&gt; OK us=812                                          (the result is in place in the region)
 *         | ERR message=...                                     (the reason: a dead rank, a NaN, a bad range)
 * client -&gt; CLOSE
 * bridge -&gt; OK                                                 (then closes the connection)
 * </pre>
 * One client at a time: a second connection while a session is open gets
 * {@code ERR message=busy ...} and is closed. Requests are handled in order, one at a time.
 * Only {@code message} may contain spaces; it runs to the end of the line.
 */
public final class BridgeProtocol
{
    /** Protocol version reported by {@link #INFO}. */
    public static final int VERSION = 1;
    public static final String INFO = "INFO";
    public static final String ALLREDUCE = "ALLREDUCE";
    public static final String CLOSE = "CLOSE";
    public static final String OK = "OK";
    public static final String ERR = "ERR";
    /** Longest request line accepted; longer ones end the session. */
    public static final int MAX_LINE_BYTES = 4096;

    private BridgeProtocol()
    {
    }

    /**
     * @return an error reply whose message is one line.
     */
    static String error(final String message)
    {
        final String text = message == null ? "unknown error" : message.replace('\n', ' ').replace('\r', ' ');
        return ERR + " message=" + text;
    }
}
