package io.switchml.worker.transport;

/**
 * The counts every {@link DatagramTransport} keeps, written by the agent's thread only.
 */
abstract class TransportCounters implements DatagramTransport
{
    long sendCalls;
    long receiveCalls;
    long truncated;
    long sendErrors;

    public long sendCalls()
    {
        return sendCalls;
    }

    public long receiveCalls()
    {
        return receiveCalls;
    }

    public long truncated()
    {
        return truncated;
    }

    public long sendErrors()
    {
        return sendErrors;
    }
}
