package io.switchml.worker;

import picocli.CommandLine.Option;

/**
 * Command-line options that name one rank's place in a job, shared by {@code worker run} and {@code worker serve}:
 * the job, its token, the world size and the rank. A picocli mixin beside {@link TransportOptions}; {@link #applyTo}
 * copies them into a {@link WorkerContext}, whose {@link WorkerContext#conclude()} validates them. {@code worker
 * bench} keeps its own (its world and rank are optional, its ranks may all run in one JVM).
 */
public final class JobMemberOptions
{
    @Option(names = "--job", description = "Job name, the same on every rank (default ${DEFAULT-VALUE}).", defaultValue = "job")
    private String jobName;

    @Option(names = "--token", description = "The job's shared secret, the same on every rank (default: $SWITCHML_JOB_TOKEN).",
        defaultValue = "${env:SWITCHML_JOB_TOKEN}")
    private String token;

    @Option(names = "--world", required = true, description = "Number of ranks in the job.")
    private int worldSize;

    @Option(names = "--rank", required = true, description = "This worker's rank, 0 .. world-1.")
    private int rank;

    /**
     * @param context to set the job, token, world size and rank of.
     * @return context.
     */
    public WorkerContext applyTo(final WorkerContext context)
    {
        return context.jobName(jobName).token(token).worldSize(worldSize).rank(rank);
    }

    public String jobName()
    {
        return jobName;
    }

    public int worldSize()
    {
        return worldSize;
    }

    public int rank()
    {
        return rank;
    }
}
