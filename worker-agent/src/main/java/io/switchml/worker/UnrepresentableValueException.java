package io.switchml.worker;

/**
 * A tensor holds a finite value its job's 16-bit element type cannot carry (out of the format's range) among the
 * elements checked before anything is sent: the call is refused and nothing was sent. (A NaN or an infinity is
 * carried instead: its chunk comes back NaN.) The value is this rank's own, so the other ranks' matching call goes on
 * without it; a caller that cannot repeat the call with the same position in the stream (the bridge) aborts the job.
 */
public final class UnrepresentableValueException extends IllegalArgumentException
{
    private static final long serialVersionUID = 1L;

    public UnrepresentableValueException(final String message)
    {
        super(message);
    }
}
