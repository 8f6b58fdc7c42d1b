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

/**
 * A switch's P4Runtime session that comes back: when the session fails (the switch's agent restarted, the stream
 * broke, another controller took over), a timer thread connects again, first after 1 s and then at doubling intervals
 * up to 30 s, running the same checks as the first connection (arbitration, the P4Info, a pushed pipeline), then the
 * backend's own steps (the data-port value set, removing what jobs released while it was down left on the switch).
 * Meanwhile {@link #health()} says why the backend is down and that it is reconnecting, so new jobs go elsewhere with
 * that reason and running ones are aborted with it. Each change of the failure's reason is logged once.
 */
final class ReconnectingSwitch implements SwitchConnection
{
    /** Opens a new session, as the first connection did. */
    @FunctionalInterface
    interface Connector
    {
        P4RuntimeSwitch connect() throws PipelineException;
    }

    static final long FIRST_RETRY_MS = 1_000;
    static final long MAX_RETRY_MS = 30_000;

    private final Connector connector;
    private final Consumer<String> log;
    private final String name;
    private final List<SwitchConnection.ReconnectStep> steps = new CopyOnWriteArrayList<>();
    private final ScheduledExecutorService timer;
    private volatile P4RuntimeSwitch session;
    private volatile String lastAttempt;
    private long retryMs = FIRST_RETRY_MS;
    private long nextAttemptNs;
    private String loggedFailure;
    private volatile boolean closed;

    ReconnectingSwitch(final String name, final P4RuntimeSwitch session, final Connector connector, final Consumer<String> log)
    {
        this.name = name;
        this.session = session;
        this.connector = connector;
        this.log = log;
        this.timer = Executors.newSingleThreadScheduledExecutor(runnable ->
            Thread.ofPlatform().name("switchml-" + name + "-reconnect").daemon().unstarted(runnable));
        timer.scheduleWithFixedDelay(this::check, 200, 200, TimeUnit.MILLISECONDS);
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

    public void onReconnected(final SwitchConnection.ReconnectStep step)
    {
        steps.add(step);
    }

    /**
     * On the timer thread: nothing while the session is healthy; else a new session when the backoff allows.
     */
    private void check()
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
            return;
        }
        if (!failure.equals(loggedFailure))
        {
            log.accept(name + ": session with " + current.target() + " lost: " + failure + "; reconnecting");
            loggedFailure = failure;
            nextAttemptNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(retryMs);
            return;
        }
        if (System.nanoTime() - nextAttemptNs < 0)
        {
            return;
        }
        P4RuntimeSwitch next = null;
        try
        {
            next = connector.connect();
            for (final SwitchConnection.ReconnectStep step : steps)
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
            if (!reason.equals(lastAttempt))
            {
                log.accept(name + ": reconnecting to " + current.target() + " failed: " + reason + "; next try in " +
                    Math.min(retryMs * 2, MAX_RETRY_MS) + " ms");
            }
            lastAttempt = reason;
            retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
            nextAttemptNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(retryMs);
            return;
        }
        session = next;
        lastAttempt = null;
        retryMs = FIRST_RETRY_MS;
        loggedFailure = null;
        current.close();
        log.accept(name + ": reconnected to " + next.target() + " device " + next.deviceId() + " as primary controller");
    }

    public void close()
    {
        closed = true;
        timer.shutdownNow();
        session.close();
    }
}
