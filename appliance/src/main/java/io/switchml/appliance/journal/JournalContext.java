package io.switchml.appliance.journal;

import net.openhft.chronicle.queue.RollCycle;
import net.openhft.chronicle.queue.RollCycles;
import org.agrona.BitUtil;
import org.agrona.ErrorHandler;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.EpochClock;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.SystemEpochClock;
import org.slf4j.LoggerFactory;

import java.io.PrintStream;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Properties;

/**
 * Configuration of a {@link Journal}: each option has a property name, a default and a line of doc in
 * this class; {@link #conclude()} validates everything once and fails naming the option.
 */
public final class JournalContext
{
    /** Directory of the Chronicle Queue the journal appends to (created when missing). */
    public static final String DIR_PROP = "switchml.journal.dir";
    public static final String DIR_DEFAULT = System.getProperty("java.io.tmpdir") + "/switchml/journal";

    /** How often a new cycle file starts: daily or hourly (UTC). */
    public static final String ROLL_CYCLE_PROP = "switchml.journal.roll.cycle";
    public static final String ROLL_CYCLE_DEFAULT = "daily";

    /** Cycle files kept: the newest this many (the current one included); older ones are deleted on each roll. */
    public static final String RETAINED_CYCLES_PROP = "switchml.journal.retained.cycles";
    public static final int RETAINED_CYCLES_DEFAULT = 7;

    /** Capacity of the ring buffer between the offering threads and the writer; a power of two. */
    public static final String RING_BUFFER_BYTES_PROP = "switchml.journal.ring.buffer.bytes";
    public static final int RING_BUFFER_BYTES_DEFAULT = 1 << 20;

    /** Chronicle Queue block size (the file grows by this much, sparse); 0 leaves Chronicle's default. */
    public static final String BLOCK_SIZE_BYTES_PROP = "switchml.journal.block.size.bytes";
    public static final long BLOCK_SIZE_BYTES_DEFAULT = 0;

    /** Longest park of the default idle strategy of the writer thread. */
    public static final long MAX_IDLE_PARK_NS = 20_000_000;

    /** Smallest ring buffer accepted. */
    public static final int MIN_RING_BUFFER_BYTES = 1024;
    /** Largest ring buffer accepted. */
    public static final int MAX_RING_BUFFER_BYTES = 1 << 30;

    private Path directory = Path.of(DIR_DEFAULT);
    private RollCycle rollCycle = RollCycles.FAST_DAILY;
    private int retainedCycles = RETAINED_CYCLES_DEFAULT;
    private int ringBufferBytes = RING_BUFFER_BYTES_DEFAULT;
    private long blockSizeBytes = BLOCK_SIZE_BYTES_DEFAULT;
    private EpochClock epochClock = SystemEpochClock.INSTANCE;
    private IdleStrategy idleStrategy;
    private ErrorHandler errorHandler;
    private boolean useWriterInvoker;
    private boolean concluded;

    /**
     * Take every option that {@code properties} names; the others keep their values.
     *
     * @throws IllegalArgumentException naming the option whose value is not valid.
     */
    public JournalContext apply(final Properties properties)
    {
        final String dir = properties.getProperty(DIR_PROP);
        if (null != dir)
        {
            directory(Path.of(dir));
        }
        final String roll = properties.getProperty(ROLL_CYCLE_PROP);
        if (null != roll)
        {
            rollCycle(parseRollCycle(roll));
        }
        final String retained = properties.getProperty(RETAINED_CYCLES_PROP);
        if (null != retained)
        {
            retainedCycles(parseInt(RETAINED_CYCLES_PROP, retained));
        }
        final String ring = properties.getProperty(RING_BUFFER_BYTES_PROP);
        if (null != ring)
        {
            ringBufferBytes(parseInt(RING_BUFFER_BYTES_PROP, ring));
        }
        final String block = properties.getProperty(BLOCK_SIZE_BYTES_PROP);
        if (null != block)
        {
            blockSizeBytes(parseLong(BLOCK_SIZE_BYTES_PROP, block));
        }
        return this;
    }

    /**
     * Validate every option and fill in the defaults that depend on others. Idempotent.
     *
     * @throws IllegalArgumentException naming the first option whose value is not valid.
     */
    public JournalContext conclude()
    {
        if (concluded)
        {
            return this;
        }
        if (null == directory)
        {
            throw new IllegalArgumentException(DIR_PROP + " must be set");
        }
        if (null == rollCycle)
        {
            throw new IllegalArgumentException(ROLL_CYCLE_PROP + " must be set");
        }
        if (retainedCycles < 1)
        {
            throw new IllegalArgumentException(RETAINED_CYCLES_PROP + " must be at least 1: " + retainedCycles);
        }
        if (ringBufferBytes < MIN_RING_BUFFER_BYTES || ringBufferBytes > MAX_RING_BUFFER_BYTES ||
            !BitUtil.isPowerOfTwo(ringBufferBytes))
        {
            throw new IllegalArgumentException(RING_BUFFER_BYTES_PROP + " must be a power of two from " +
                MIN_RING_BUFFER_BYTES + " to " + MAX_RING_BUFFER_BYTES + ": " + ringBufferBytes);
        }
        if (blockSizeBytes < 0)
        {
            throw new IllegalArgumentException(BLOCK_SIZE_BYTES_PROP + " must not be negative: " + blockSizeBytes);
        }
        if (null == epochClock)
        {
            throw new IllegalArgumentException("epoch clock must be set");
        }
        if (null == idleStrategy)
        {
            // events are stamped when offered, so a late write changes no time in the journal; parking up to 20 ms
            // keeps an idle writer at about 50 wake-ups a second (measured: about 940 a second, 1.6 % of a core,
            // with the earlier 1 ms, on an appliance that shares its cores with workers); the 1 MiB ring holds
            // thousands of events, far more than 20 ms of them
            idleStrategy = new BackoffIdleStrategy(10, 10, 1_000, MAX_IDLE_PARK_NS);
        }
        if (null == errorHandler)
        {
            errorHandler = error -> LoggerFactory.getLogger(JournalContext.class).error("journal writer error", error);
        }
        concluded = true;
        return this;
    }

    /**
     * Print the resolved configuration, one {@code property=value} a line.
     */
    public void print(final PrintStream out)
    {
        out.println(DIR_PROP + "=" + directory);
        out.println(ROLL_CYCLE_PROP + "=" + rollCycleName(rollCycle));
        out.println(RETAINED_CYCLES_PROP + "=" + retainedCycles);
        out.println(RING_BUFFER_BYTES_PROP + "=" + ringBufferBytes);
        out.println(BLOCK_SIZE_BYTES_PROP + "=" + blockSizeBytes);
    }

    /**
     * @param directory directory of the Chronicle Queue (created when missing).
     */
    public JournalContext directory(final Path directory)
    {
        this.directory = directory;
        return this;
    }

    public Path directory()
    {
        return directory;
    }

    /**
     * @param rollCycle how often a new cycle file starts: normally {@link RollCycles#FAST_DAILY} or
     *                  {@link RollCycles#FAST_HOURLY}; tests may use a shorter one.
     */
    public JournalContext rollCycle(final RollCycle rollCycle)
    {
        this.rollCycle = rollCycle;
        return this;
    }

    public RollCycle rollCycle()
    {
        return rollCycle;
    }

    /**
     * @param retainedCycles cycle files kept, the current one included; at least 1.
     */
    public JournalContext retainedCycles(final int retainedCycles)
    {
        this.retainedCycles = retainedCycles;
        return this;
    }

    public int retainedCycles()
    {
        return retainedCycles;
    }

    /**
     * @param ringBufferBytes capacity of the ring buffer the offering threads write into; a power of two.
     */
    public JournalContext ringBufferBytes(final int ringBufferBytes)
    {
        this.ringBufferBytes = ringBufferBytes;
        return this;
    }

    public int ringBufferBytes()
    {
        return ringBufferBytes;
    }

    /**
     * @param blockSizeBytes Chronicle Queue block size; 0 for Chronicle's default.
     */
    public JournalContext blockSizeBytes(final long blockSizeBytes)
    {
        this.blockSizeBytes = blockSizeBytes;
        return this;
    }

    public long blockSizeBytes()
    {
        return blockSizeBytes;
    }

    /**
     * @param epochClock clock that stamps events when they are offered and decides when the queue rolls.
     */
    public JournalContext epochClock(final EpochClock epochClock)
    {
        this.epochClock = epochClock;
        return this;
    }

    public EpochClock epochClock()
    {
        return epochClock;
    }

    /**
     * @param idleStrategy how the writer thread waits when there is nothing to write; default backs off
     *                     to parking for 1 ms.
     */
    public JournalContext idleStrategy(final IdleStrategy idleStrategy)
    {
        this.idleStrategy = idleStrategy;
        return this;
    }

    public IdleStrategy idleStrategy()
    {
        return idleStrategy;
    }

    /**
     * @param errorHandler told of every error of the writer (a failed append, a failed deletion); default
     *                     prints to standard error. The appliance passes its error log.
     */
    public JournalContext errorHandler(final ErrorHandler errorHandler)
    {
        this.errorHandler = errorHandler;
        return this;
    }

    public ErrorHandler errorHandler()
    {
        return errorHandler;
    }

    /**
     * @param useWriterInvoker true to start no writer thread: the owner drives the writer with
     *                         {@link Journal#writerInvoker()} (for tests, or to share a thread).
     */
    public JournalContext useWriterInvoker(final boolean useWriterInvoker)
    {
        this.useWriterInvoker = useWriterInvoker;
        return this;
    }

    public boolean useWriterInvoker()
    {
        return useWriterInvoker;
    }

    /**
     * @return the roll cycle a {@link #ROLL_CYCLE_PROP} value names.
     * @throws IllegalArgumentException when it names none.
     */
    public static RollCycle parseRollCycle(final String value)
    {
        return switch (value.trim().toLowerCase(Locale.ROOT))
        {
            case "daily" -> RollCycles.FAST_DAILY;
            case "hourly" -> RollCycles.FAST_HOURLY;
            default -> throw new IllegalArgumentException(
                ROLL_CYCLE_PROP + " must be daily or hourly: " + value);
        };
    }

    private static String rollCycleName(final RollCycle rollCycle)
    {
        if (RollCycles.FAST_DAILY == rollCycle)
        {
            return "daily";
        }
        if (RollCycles.FAST_HOURLY == rollCycle)
        {
            return "hourly";
        }
        return String.valueOf(rollCycle);
    }

    private static int parseInt(final String property, final String value)
    {
        try
        {
            return Integer.parseInt(value.trim());
        }
        catch (final NumberFormatException ex)
        {
            throw new IllegalArgumentException(property + " must be an integer: " + value, ex);
        }
    }

    private static long parseLong(final String property, final String value)
    {
        try
        {
            return Long.parseLong(value.trim());
        }
        catch (final NumberFormatException ex)
        {
            throw new IllegalArgumentException(property + " must be an integer: " + value, ex);
        }
    }
}
