package io.switchml.ops;

/**
 * A failure an operator command reports as one line on stderr and an exit code, without a stack trace.
 */
final class OpsException extends RuntimeException
{
    private static final long serialVersionUID = 1L;

    /** Success. */
    static final int OK = 0;
    /** The appliance answered with an error, a job was not found, or there was nothing to show. */
    static final int FAILED = 1;
    /** Bad arguments: unknown option, bad value, or a command that needs local access given --url. */
    static final int USAGE = 2;
    /** {@code events --follow --follow-ms} ended before {@code --max-events} events came. */
    static final int TIMED_OUT = 3;
    /** The appliance is not running or not reachable: no counters file, dead writer, connection refused. */
    static final int UNREACHABLE = 4;

    private final int exitCode;

    OpsException(final int exitCode, final String message)
    {
        super(message);
        this.exitCode = exitCode;
    }

    OpsException(final int exitCode, final String message, final Throwable cause)
    {
        super(message, cause);
        this.exitCode = exitCode;
    }

    int exitCode()
    {
        return exitCode;
    }
}
