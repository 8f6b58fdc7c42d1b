package io.switchml.offload.xdp;

/**
 * A libbpf or kernel call failed; the message names the call, what it acted on and the kernel's reason (and, for a
 * verifier rejection, the verifier log's last lines).
 */
public final class BpfException extends Exception
{
    public BpfException(final String message)
    {
        super(message);
    }

    public BpfException(final String message, final Throwable cause)
    {
        super(message, cause);
    }
}
