package io.switchml.worker.bridge;

/**
 * The exchange between a training process and its local bridge over the Unix-domain control
 * socket: one line of UTF-8 text per message, a verb followed by {@code key=value} fields separated
 * by spaces (parsed with {@link io.switchml.protocol.ControlProtocol#parse}). Tensor data never
 * crosses the socket: the client writes elements into the shared-memory file, asks for an
 * all-reduce of a byte range of it, and reads the result from the same range.
 * <pre>
 * client -&gt; INFO
 * bridge -&gt; OK version=2 shm=/dev/shm/switchml-default-job-rank0.shm shmBytes=268435456 rank=0 world=4
 *           job=job tenant=default k=8192 s=32 dtype=float32 byteOrder=LITTLE_ENDIAN dtypes=float32,int32 pipeline=64
 * client -&gt; ALLREDUCE offset=0 count=5632 op=sum|average [dtype=float32|int32] [id=ID]
 *                                                              (offset in bytes, a multiple of 4; int32: op=sum)
 * bridge -&gt; OK us=812 [id=ID]                                  (the result is in place in the region)
 *         | ERR message=...                                     (the reason: a dead rank, a value out of range, a bad range)
 * client -&gt; STATS
 * bridge -&gt; OK requests=N allReduces=N packetsSent=N ... backend=xdp passedOver=...
 *                                                              (this agent's counters; int32.* once that job is joined;
 *                                                              backend: where the job runs; passedOver: the backends that
 *                                                              passed it over with their reasons, form-encoded as
 *                                                              URLEncoder does, "" when none)
 * client -&gt; CLOSE
 * bridge -&gt; OK                                                 (then closes the connection)
 * </pre>
 * One client at a time: a second connection while a session is open gets
 * {@code ERR message=busy ...} and is closed.
 * <p>
 * Version 2 adds pipelining: a client may send up to {@code pipeline} requests before reading a reply.
 * Each all-reduce enters the agent's stream when its request is read, so consecutive requests overlap on
 * the wire; replies come back in request order (an {@code id=} is echoed to let the client check). The
 * ranges of outstanding requests must not overlap. The stream's ordering contract applies to requests:
 * every rank sends the same sequence of all-reduces (counts, dtype, op) in the same order. A version 1
 * client, which waits for each reply, works unchanged. Version 2 also adds {@code dtype=int32} (a second
 * job of element type int32, joined on the first such request; the INFO field {@code dtypes} lists what
 * this bridge serves) and {@code STATS}.
 * Only {@code message} may contain spaces; it runs to the end of the line.
 */
public final class BridgeProtocol
{
    /** Protocol version reported by {@link #INFO}. */
    public static final int VERSION = 2;
    public static final String INFO = "INFO";
    public static final String ALLREDUCE = "ALLREDUCE";
    public static final String STATS = "STATS";
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
