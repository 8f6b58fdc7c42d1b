package io.switchml.offload.tofino.backend;

import io.switchml.appliance.backend.ShardDataPath;
import io.switchml.offload.tofino.PipelineControl;
import io.switchml.offload.tofino.PipelineException;
import io.switchml.offload.tofino.p4runtime.P4RuntimeSwitch;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

/**
 * A switch's P4Runtime session that comes back: when the session fails (the switch's agent restarted, the stream
 * broke, another controller took over), {@link #check()} connects again, first {@link #FIRST_RETRY_MS} after the
 * failure was seen and then at doubling intervals up to {@link #MAX_RETRY_MS}, with the same checks as the first
 * connection (arbitration, the P4Info), then runs the backend's reconnect steps (the data-port value set) on the new
 * session before it is used. Meanwhile {@link #health()} says why the backend is down and that it is reconnecting,
 * so new jobs go elsewhere with that reason and running ones are aborted with it. While the session is healthy,
 * {@link #check()} runs the backend's upkeep steps (removing what released jobs left on the switch). Each change of
 * the failure's reason is logged once.
 * <p>
 * {@link #start()} runs {@link #check()} every {@link #CHECK_INTERVAL_MS} on a daemon thread; tests drive it
 * themselves with their own clock.
 */
final class ReconnectingSwitch implements SwitchConnection
{
    /** Opens a new session, as the first connection did. */
    @FunctionalInterface
    interface Connector
    {
        P4RuntimeSwitch connect() throws PipelineException;
    }

    static final long CHECK_INTERVAL_MS = 200;
    static final long FIRST_RETRY_MS = 1_000;
    static final long MAX_RETRY_MS = 30_000;

    private final Connector connector;
    private final Consumer<String> log;
    private final String name;
    private final LongSupplier nanoClock;
    private Runnable onReconnected = () -> { };
    private final List<SwitchConnection.Step> reconnectSteps = new CopyOnWriteArrayList<>();
    private final List<SwitchConnection.Step> upkeepSteps = new CopyOnWriteArrayList<>();
    private ScheduledExecutorService timer;
    private volatile P4RuntimeSwitch session;
    private volatile String lastAttempt;
    private volatile long generation;
    private long retryMs = FIRST_RETRY_MS;
    private long nextAttemptNs;
    private String loggedFailure;
    private boolean closed;

    ReconnectingSwitch(final String name, final P4RuntimeSwitch session, final Connector connector, final Consumer<String> log,
        final LongSupplier nanoClock)
    {
        this.name = name;
        this.session = session;
        this.connector = connector;
        this.log = log;
        this.nanoClock = nanoClock;
    }

    public synchronized void start()
    {
        if (timer == null && !closed)
        {
            timer = Executors.newSingleThreadScheduledExecutor(runnable ->
                Thread.ofPlatform().name("switchml-" + name + "-reconnect").daemon().unstarted(runnable));
            timer.scheduleWithFixedDelay(this::checkQuietly, CHECK_INTERVAL_MS, CHECK_INTERVAL_MS, TimeUnit.MILLISECONDS);
        }
    }

    public PipelineControl control()
    {
        return session;
    }

    public String health()
    {
        final String health = session.health();
        if (health == null)
        {
            return null;
        }
        final String attempt = lastAttempt;
        return health + "; reconnecting" + (attempt == null ? "" : " (last try: " + attempt + ")");
    }

    public ShardDataPath dataPath()
    {
        return null;
    }

    public String describe()
    {
        return "switch " + session.target() + " device " + session.deviceId();
    }

    public long generation()
    {
        return generation;
    }

    /**
     * @param counter told of each session re-established (the backend's reconnects metric).
     */
    void countReconnects(final Runnable counter)
    {
        this.onReconnected = counter;
    }

    public void addReconnectStep(final SwitchConnection.Step step)
    {
        reconnectSteps.add(step);
    }

    public void addUpkeepStep(final SwitchConnection.Step step)
    {
        upkeepSteps.add(step);
    }

    P4RuntimeSwitch session()
    {
        return session;
    }

    private void checkQuietly()
    {
        try
        {
            check();
        }
        catch (final RuntimeException | Error ex)
        {
            // a fixed-delay task that throws is never run again: report it and keep the schedule
            log.accept(name + ": session check failed: " + ex);
        }
    }

    /**
     * The upkeep steps on a healthy session; else a new session when the backoff allows. Serialized with
     * {@link #close()}, so that a session made here is never left open after it.
     */
    synchronized void check()
    {
        if (closed)
        {
            return;
        }
        final P4RuntimeSwitch current = session;
        final String failure = current.health();
        if (failure == null)
        {
            retryMs = FIRST_RETRY_MS;
            loggedFailure = null;
            runSteps(upkeepSteps, current);
            return;
        }
        final long now = nanoClock.getAsLong();
        if (!failure.equals(loggedFailure))
        {
            log.accept(name + ": session with " + current.target() + " lost: " + failure + "; reconnecting in " + retryMs + " ms");
            loggedFailure = failure;
            nextAttemptNs = now + TimeUnit.MILLISECONDS.toNanos(retryMs);
            return;
        }
        if (now - nextAttemptNs < 0)
        {
            return;
        }
        P4RuntimeSwitch next = null;
        try
        {
            next = connector.connect();
            for (final SwitchConnection.Step step : reconnectSteps)
            {
                step.run(next);
            }
        }
        catch (final PipelineException | RuntimeException ex)
        {
            if (next != null)
            {
                next.close();
            }
            final String reason = ex instanceof PipelineException p ? p.detail() : ex.toString();
            retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
            if (!reason.equals(lastAttempt))
            {
                log.accept(name + ": reconnecting to " + current.target() + " failed: " + reason + "; next try in " + retryMs + " ms");
            }
            lastAttempt = reason;
            nextAttemptNs = now + TimeUnit.MILLISECONDS.toNanos(retryMs);
            return;
        }
        session = next;
        generation++;
        onReconnected.run();
        lastAttempt = null;
        retryMs = FIRST_RETRY_MS;
        loggedFailure = null;
        current.close();
        log.accept(name + ": reconnected to " + next.target() + " device " + next.deviceId() + " as primary controller");
        runSteps(upkeepSteps, next);
    }

    private void runSteps(final List<SwitchConnection.Step> steps, final PipelineControl control)
    {
        for (final SwitchConnection.Step step : steps)
        {
            try
            {
                step.run(control);
            }
            catch (final PipelineException ex)
            {
                log.accept(name + ": " + ex.getMessage());
            }
        }
    }

    public void close()
    {
        final ScheduledExecutorService stopping;
        synchronized (this)
        {
            closed = true;
            stopping = timer;
        }
        if (stopping != null)
        {
            stopping.shutdownNow();
            try
            {
                stopping.awaitTermination(5, TimeUnit.SECONDS);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
        }
        synchronized (this)
        {
            session.close();
        }
    }
}
