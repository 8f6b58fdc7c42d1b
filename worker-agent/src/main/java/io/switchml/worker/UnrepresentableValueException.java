package io.switchml.worker;

/**
 * A tensor holds a value its job's element type cannot carry (NaN, an infinity, or a 16-bit format's out-of-range
 * value) among the elements checked before anything is sent: the call is refused and nothing was sent. The value is
 * this rank's own, so the other ranks' matching call goes on without it; a caller that cannot repeat the call with
 * the same position in the stream (the bridge) aborts the job.
 */
public final class UnrepresentableValueException extends IllegalArgumentException
{
    private static final long serialVersionUID = 1L;

    public UnrepresentableValueException(final String message)
    {
        super(message);
    }
}
