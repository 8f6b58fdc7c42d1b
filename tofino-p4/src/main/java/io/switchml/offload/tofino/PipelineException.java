package io.switchml.offload.tofino;

/**
 * A write or read the pipeline refused, with the canonical gRPC status code name a P4Runtime server would return
 * ({@code NOT_FOUND}, {@code ALREADY_EXISTS}, {@code RESOURCE_EXHAUSTED}, {@code INVALID_ARGUMENT},
 * {@code OUT_OF_RANGE}, {@code UNAVAILABLE}).
 */
public final class PipelineException extends Exception
{
    private final String code;
    private final String detail;

    public PipelineException(final String code, final String message)
    {
        super(code + ": " + message);
        this.code = code;
        this.detail = message;
    }

    /**
     * @return the message without the code.
     */
    public String detail()
    {
        return detail;
    }

    /**
     * @return the canonical gRPC status code name.
     */
    public String code()
    {
        return code;
    }
}
