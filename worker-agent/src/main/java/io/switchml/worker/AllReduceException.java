package io.switchml.worker;

/**
 * An all-reduce or a join failed: the job was aborted (the message names the culprit), the
 * appliance went away, progress stopped, or the input cannot be reduced (a value out of a 16-bit
 * wire format's range, say).
 */
public class AllReduceException extends RuntimeException
{
    public AllReduceException(final String message)
    {
        super(message);
    }

    public AllReduceException(final String message, final Throwable cause)
    {
        super(message, cause);
    }
}
