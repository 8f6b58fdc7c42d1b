package io.switchml.protocol.telemetry;

import java.util.Map;

/**
 * How the counters of the counters file are named in {@code /metrics}, by the Prometheus conventions, and back:
 * the appliance exports with {@link #export(int, String)}, the ops CLI reads a scrape back into counter names
 * with {@link #internalName(String, String)}.
 * <ul>
 *   <li>A counter's family ends in {@code _total} (added by the exposition writer; the family names here
 *   leave it off), a value in base units ends in {@code _seconds} or {@code _bytes}: "bytes_in" is
 *   {@code switchml_received_bytes_total}, "duty_cycle_max_ns" is {@code switchml_shard_duty_cycle_max_seconds}
 *   (value scaled by 1e-9).</li>
 *   <li>Scope by prefix and labels: system counters are unlabelled; shard counters are
 *   {@code switchml_shard_*{shard="0"}}; job counters {@code switchml_job_*{sml_job="7",tenant="acme",job_name="resnet"}}
 *   (not {@code job}, which is the scrape job's label); backend counters {@code switchml_backend_*{backend="xdp"}}.</li>
 *   <li>One family per kind of drop, the reason as a label: "drop_bad_magic" of a shard is
 *   {@code switchml_shard_dropped_packets_total{shard="0",reason="bad_magic"}}.</li>
 * </ul>
 */
public final class MetricNames
{
    /** Prefix of every family the appliance exports. */
    public static final String PREFIX = "switchml_";
    /** Label of a shard's id. */
    public static final String SHARD_LABEL = "shard";
    /** Label of a job's id; "job" is taken by Prometheus for the scrape job. */
    public static final String JOB_LABEL = "sml_job";
    /** Label of a job's tenant. */
    public static final String TENANT_LABEL = "tenant";
    /** Label of a job's name. */
    public static final String JOB_NAME_LABEL = "job_name";
    /** Label of a backend's name. */
    public static final String BACKEND_LABEL = "backend";
    /** Label of a drop's or a fallback's reason. */
    public static final String REASON_LABEL = "reason";

    /** Family of the dropped datagrams, system-wide (all reasons) or by reason per shard, job or backend. */
    public static final String DROPPED_PACKETS = "dropped_packets";
    /** Slot-completion latency histogram, per shard. */
    public static final String SLOT_LATENCY_SECONDS = PREFIX + "slot_latency_seconds";
    /** CPU time of each shard's thread (a counter, exported as {@code switchml_shard_cpu_seconds_total}). */
    public static final String SHARD_CPU_SECONDS = PREFIX + "shard_cpu_seconds";
    /** Aggregator memory reserved by the jobs. */
    public static final String MEMORY_USED_BYTES = PREFIX + "memory_used_bytes";
    /** Aggregator memory budget. */
    public static final String MEMORY_BUDGET_BYTES = PREFIX + "memory_budget_bytes";
    /** 1 while an aggregation backend is healthy (started, its program or switch in place), else 0; per backend. */
    public static final String BACKEND_UP = PREFIX + "backend_up";
    /** Build information (exported as {@code switchml_build_info{version,commit}}). */
    public static final String BUILD = PREFIX + "build";
    /** Prefix of a counter's name that counts drops of one reason (the rest is the reason). */
    public static final String DROP_PREFIX = "drop_";
    /** Name of a backend's counter of jobs passed over (its label in the counters file is the reason). */
    public static final String FALLBACKS = "fallbacks";

    private static final String NS_SUFFIX = "_ns";
    private static final String SECONDS_SUFFIX = "_seconds";
    private static final double NS_PER_SECOND = 1e9;

    private static final Map<String, String> RENAMES = Map.of(
        "bytes_in", "received_bytes",
        "packets_in", "received_packets",
        "bytes_out", "sent_bytes",
        "packets_out", "sent_packets",
        "drops", DROPPED_PACKETS);

    private static final Map<String, String> REVERSE = Map.of(
        "received_bytes", "bytes_in",
        "received_packets", "packets_in",
        "sent_bytes", "bytes_out",
        "sent_packets", "packets_out",
        DROPPED_PACKETS, "drops");

    private MetricNames()
    {
    }

    /**
     * How one counter is exported.
     *
     * @param family family name without {@code _total}, e.g. "switchml_shard_received_packets".
     * @param reason value of the {@code reason} label, or null when the family has none.
     * @param divisor the counter's value divided by this is the exported one (1, or 1e9 from ns to seconds).
     */
    public record Exported(String family, String reason, double divisor)
    {
    }

    /**
     * @param typeId       the counter's type, {@link CounterTypes#SYSTEM} to {@link CounterTypes#BACKEND}.
     * @param internalName its name in the counters file, e.g. "packets_in", "drop_bad_magic".
     * @param label        its label in the counters file (a backend's fallback reason), or null.
     * @return how it is exported, or null for a type this release does not know.
     */
    public static Exported export(final int typeId, final String internalName, final String label)
    {
        final String scope = scope(typeId);
        if (null == scope)
        {
            return null;
        }
        if (CounterTypes.SYSTEM != typeId && internalName.startsWith(DROP_PREFIX))
        {
            return new Exported(PREFIX + scope + DROPPED_PACKETS, internalName.substring(DROP_PREFIX.length()), 1.0);
        }
        if (CounterTypes.BACKEND == typeId && FALLBACKS.equals(internalName))
        {
            return new Exported(PREFIX + scope + FALLBACKS, null == label ? "" : label, 1.0);
        }
        final String renamed = RENAMES.getOrDefault(internalName, internalName);
        if (renamed.endsWith(NS_SUFFIX))
        {
            return new Exported(PREFIX + scope + renamed.substring(0, renamed.length() - NS_SUFFIX.length()) +
                SECONDS_SUFFIX, null, NS_PER_SECOND);
        }
        return new Exported(PREFIX + scope + renamed, null, 1.0);
    }

    /**
     * The inverse of {@link #export(int, String, String)} within a scope.
     *
     * @param scopedName family name without the prefix, the scope ("shard_", "job_", "backend_") and {@code _total},
     *                   e.g. "received_packets", "dropped_packets", "duty_cycle_max_seconds".
     * @param reason     the sample's {@code reason} label, or null.
     * @return the counter's name in the counters file, e.g. "packets_in", "drop_bad_magic", "duty_cycle_max_ns".
     */
    public static String internalName(final String scopedName, final String reason)
    {
        if (DROPPED_PACKETS.equals(scopedName) && null != reason)
        {
            return DROP_PREFIX + reason;
        }
        final String name = REVERSE.getOrDefault(scopedName, scopedName);
        if (name.endsWith(SECONDS_SUFFIX))
        {
            return name.substring(0, name.length() - SECONDS_SUFFIX.length()) + NS_SUFFIX;
        }
        return name;
    }

    /**
     * @return the factor that turns an exported value of that family back into the counter's value (1e9 for a
     * {@code _seconds} family exported from ns, else 1).
     */
    public static double internalScale(final String scopedName)
    {
        return scopedName.endsWith(SECONDS_SUFFIX) ? NS_PER_SECOND : 1.0;
    }

    /**
     * @return the scope of a type's families, "" for system counters, or null for an unknown type.
     */
    public static String scope(final int typeId)
    {
        return switch (typeId)
        {
            case CounterTypes.SYSTEM -> "";
            case CounterTypes.SHARD -> "shard_";
            case CounterTypes.JOB -> "job_";
            case CounterTypes.BACKEND -> "backend_";
            default -> null;
        };
    }
}
