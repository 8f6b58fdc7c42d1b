package io.switchml.worker.bridge;

import io.switchml.worker.WorkerContext;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Locale;

/**
 * Configuration of the local bridge that {@code switchml worker serve} runs for one training
 * process: the job to join (a {@link WorkerContext}), the Unix-domain control socket, and the
 * shared-memory file that carries tensor data. {@link #conclude()} validates it once and fails
 * naming the option.
 */
public final class BridgeContext
{
    /** Size of the shared-memory file: the largest piece a client can all-reduce in one request. */
    public static final long SHM_BYTES_DEFAULT = 256L << 20;
    /** Smallest shared-memory file: one float. */
    public static final long SHM_BYTES_MIN = Float.BYTES;
    /** Directory of the default shared-memory file when it exists (a tmpfs on Linux). */
    public static final String SHM_DIR_DEFAULT = "/dev/shm";
    /** Requests a client may have outstanding on one session before the bridge stops reading (protocol v2). */
    public static final int PIPELINE_DEPTH_DEFAULT = 64;
    /** A Unix-domain socket path is limited to 108 bytes including the terminating NUL (Linux sun_path). */
    public static final int MAX_SOCKET_PATH_BYTES = 107;

    private WorkerContext worker = new WorkerContext();
    private Path socketPath;
    private Path shmPath;
    private long shmBytes = SHM_BYTES_DEFAULT;
    private boolean once;
    private WorkerContext int32Worker;
    private int pipelineDepth = PIPELINE_DEPTH_DEFAULT;
    private int localRank;
    private int localWorld = 1;

    /**
     * Validate every option and derive the default paths from the job's tenant, name and rank.
     *
     * @return this for a fluent API.
     * @throws IllegalArgumentException naming the first bad option.
     */
    public BridgeContext conclude()
    {
        worker.conclude();
        if (int32Worker != null)
        {
            int32Worker.conclude();
            if (int32Worker.elementType() != io.switchml.protocol.ElementType.INT32)
            {
                throw new IllegalArgumentException("the int32 job's context must have element type int32");
            }
        }
        if (localWorld < 1 || worker.worldSize() % localWorld != 0)
        {
            throw new IllegalArgumentException("localWorld must be 1 or more and divide the world size " +
                worker.worldSize() + ": " + localWorld);
        }
        if (localRank < 0 || localRank >= localWorld || worker.rank() % localWorld != localRank)
        {
            throw new IllegalArgumentException("localRank " + localRank + " does not fit rank " + worker.rank() +
                " with localWorld " + localWorld + " (rank R of a node of L ranks is local rank R % L)");
        }
        requirePipelineDepth(pipelineDepth);
        if (shmBytes < SHM_BYTES_MIN || shmBytes % Float.BYTES != 0)
        {
            throw new IllegalArgumentException("--shm-bytes must be a positive multiple of 4: " + shmBytes);
        }
        final String stem = String.format(Locale.ROOT, "switchml-%s-%s-rank%d", worker.tenant(), worker.jobName(), worker.rank());
        if (socketPath == null)
        {
            socketPath = Path.of(System.getProperty("java.io.tmpdir"), stem + ".sock");
        }
        if (shmPath == null)
        {
            shmPath = defaultShmDir().resolve(stem + ".shm");
        }
        socketPath = requireSocketPath(socketPath);
        shmPath = shmPath.toAbsolutePath();
        requireNoWhitespace("--socket", socketPath);
        requireNoWhitespace("--shm", shmPath);
        if (socketPath.equals(shmPath))
        {
            throw new IllegalArgumentException("--socket and --shm must differ: " + socketPath);
        }
        return this;
    }

    /**
     * @return where shared-memory files go by default: the package's tmpfs of huge pages, /run/switchml/shm, when
     * mounted and writable, else {@value #SHM_DIR_DEFAULT} (a tmpfs) when it exists, else {@code $TMPDIR}
     * ({@link SharedMemoryPages#defaultDirectory}).
     */
    static Path defaultShmDir()
    {
        return SharedMemoryPages.defaultDirectory();
    }

    /**
     * @throws IllegalArgumentException unless 1..4096, naming {@code --pipeline-depth}.
     */
    static int requirePipelineDepth(final int pipelineDepth)
    {
        if (pipelineDepth < 1 || pipelineDepth > 4096)
        {
            throw new IllegalArgumentException("--pipeline-depth must be 1..4096: " + pipelineDepth);
        }
        return pipelineDepth;
    }

    /**
     * @param name the option or field, for the message.
     * @throws IllegalArgumentException unless 1 ms .. 1 hour.
     */
    static long requireJoinTimeoutMs(final long joinTimeoutMs, final String name)
    {
        if (joinTimeoutMs < 1 || joinTimeoutMs > 3_600_000)
        {
            throw new IllegalArgumentException(name + " must be 1..3600000: " + joinTimeoutMs);
        }
        return joinTimeoutMs;
    }

    /**
     * @return the path made absolute.
     * @throws IllegalArgumentException when it is longer than a Unix-domain socket's path may be.
     */
    static Path requireSocketPath(final Path socketPath)
    {
        final Path absolute = socketPath.toAbsolutePath();
        if (absolute.toString().getBytes(StandardCharsets.UTF_8).length > MAX_SOCKET_PATH_BYTES)
        {
            throw new IllegalArgumentException("--socket path is longer than " + MAX_SOCKET_PATH_BYTES +
                " bytes, the Unix-domain limit: " + absolute);
        }
        return absolute;
    }

    /**
     * The int32 job a bridge joins beside its float job (on the first int32 request): the same appliance, job
     * geometry, token, rank and world, named JOB-int32.
     *
     * @param floatJob the float job.
     * @param fresh    a context with the agent's other options (packet I/O, credentials, TLS) to fill in.
     * @return {@code fresh}, for a fluent API.
     */
    static WorkerContext int32JobOf(final WorkerContext floatJob, final WorkerContext fresh)
    {
        return sameJob(floatJob, fresh).jobName(floatJob.jobName() + "-int32")
            .elementType(io.switchml.protocol.ElementType.INT32);
    }

    /**
     * The job a host's {@link LocalGroup} joins for its ranks: the same job, with one worker per node. Rank R of a
     * job whose nodes each run {@code localWorld} ranks is local rank {@code R % localWorld} of node
     * {@code R / localWorld} (torchrun's numbering).
     *
     * @param rankJob    a rank's job.
     * @param fresh      a context with the agent's other options to fill in.
     * @param localWorld ranks per node, dividing the world.
     * @return {@code fresh}, for a fluent API.
     */
    static WorkerContext nodeJobOf(final WorkerContext rankJob, final WorkerContext fresh, final int localWorld)
    {
        return sameJob(rankJob, fresh).jobName(rankJob.jobName()).worldSize(rankJob.worldSize() / localWorld)
            .rank(rankJob.rank() / localWorld);
    }

    private static WorkerContext sameJob(final WorkerContext job, final WorkerContext fresh)
    {
        return fresh.applianceHost(job.applianceHost()).controlPort(job.controlPort())
            .backend(job.backend()).lanes(job.lanes()).slots(job.slots()).macEnabled(job.macEnabled())
            .joinTimeoutMs(job.joinTimeoutMs()).slotTimeoutMs(job.slotTimeoutMs()).progressTimeoutMs(job.progressTimeoutMs())
            .token(job.token()).worldSize(job.worldSize()).rank(job.rank());
    }

    private static void requireNoWhitespace(final String option, final Path path)
    {
        if (path.toString().chars().anyMatch(Character::isWhitespace))
        {
            throw new IllegalArgumentException(option + " path must not contain whitespace (the protocol is space-separated): " +
                path);
        }
    }

    /**
     * @return the job, rank and slot geometry this bridge joins with.
     */
    public WorkerContext worker()
    {
        return worker;
    }

    public BridgeContext worker(final WorkerContext worker)
    {
        this.worker = worker;
        return this;
    }

    /**
     * @return the Unix-domain socket the training process connects to.
     */
    public Path socketPath()
    {
        return socketPath;
    }

    /**
     * @param socketPath where to bind the control socket; default {@code $TMPDIR/switchml-TENANT-JOB-rankR.sock}.
     */
    public BridgeContext socketPath(final Path socketPath)
    {
        this.socketPath = socketPath;
        return this;
    }

    /**
     * @return the shared-memory file both sides map.
     */
    public Path shmPath()
    {
        return shmPath;
    }

    /**
     * @param shmPath where to create the shared-memory file; default {@code /dev/shm/switchml-TENANT-JOB-rankR.shm}.
     */
    public BridgeContext shmPath(final Path shmPath)
    {
        this.shmPath = shmPath;
        return this;
    }

    public long shmBytes()
    {
        return shmBytes;
    }

    /**
     * @param shmBytes size of the shared-memory file, a multiple of 4; a client all-reduces larger
     *                 tensors in pieces of this size.
     */
    public BridgeContext shmBytes(final long shmBytes)
    {
        this.shmBytes = shmBytes;
        return this;
    }

    public boolean once()
    {
        return once;
    }

    /**
     * @param once whether the bridge exits after its first client session ends (default: it serves
     *             sessions one after another until terminated).
     */
    public BridgeContext once(final boolean once)
    {
        this.once = once;
        return this;
    }

    /**
     * @return the int32 job this bridge joins on the first int32 request, or null when int32 is not served.
     */
    public WorkerContext int32Worker()
    {
        return int32Worker;
    }

    /**
     * @param int32Worker a second job, of element type int32, with the same ranks; joined lazily on the first
     *                    int32 all-reduce (every rank makes it at the same point of its sequence), so float-only
     *                    training never creates it.
     */
    public BridgeContext int32Worker(final WorkerContext int32Worker)
    {
        this.int32Worker = int32Worker;
        return this;
    }

    public int pipelineDepth()
    {
        return pipelineDepth;
    }

    /**
     * @param pipelineDepth requests a client may send before reading a reply; the bridge stops reading
     *                      the socket while this many are outstanding.
     */
    public BridgeContext pipelineDepth(final int pipelineDepth)
    {
        this.pipelineDepth = pipelineDepth;
        return this;
    }

    public int localRank()
    {
        return localRank;
    }

    public int localWorld()
    {
        return localWorld;
    }

    /**
     * @param localRank  this rank's place among the ranks of its job on this host.
     * @param localWorld ranks of the job on this host; more than 1 makes a host agent sum them here and send the sum
     *                   to the appliance once ({@link LocalGroup}).
     */
    public BridgeContext local(final int localRank, final int localWorld)
    {
        this.localRank = localRank;
        this.localWorld = localWorld;
        return this;
    }
}
