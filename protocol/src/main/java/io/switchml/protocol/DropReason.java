package io.switchml.protocol;

/**
 * Why a received packet was dropped. Each reason maps to its own counter so that every drop is
 * accounted for.
 */
public enum DropReason
{
    NONE("none"),
    TRUNCATED("truncated packet"),
    BAD_MAGIC("bad magic"),
    BAD_VERSION("unsupported protocol version"),
    BAD_TYPE("unknown message type"),
    BAD_FLAGS("unknown flags"),
    BAD_RANK("rank out of range"),
    BAD_ELEMENT_TYPE("unknown element type"),
    BAD_ELEMENT_COUNT("element count out of range"),
    LENGTH_MISMATCH("length does not match element count"),
    BAD_EXPONENT("block exponent out of range or set for integer data"),
    BAD_SLOT("negative slot index or chunk sequence"),
    UNKNOWN_JOB("unknown job id"),
    NOT_MEMBER("rank not a member of the job or wrong source address"),
    JOB_MISMATCH("packet disagrees with the job's element type or slot count"),
    SLOT_MISMATCH("packet disagrees with the slot's chunk, count or exponent"),
    BAD_MAC("message authentication code does not verify"),
    LOSS_INJECTED("dropped by the configured loss generator"),
    /** Appended last: an offload backend (the XDP program) indexes its drop counters by ordinal. */
    OFFLOADED_JOB("update or probe for a job whose slots live in an offload backend");

    private final String description;

    DropReason(final String description)
    {
        this.description = description;
    }

    public String description()
    {
        return description;
    }
}
