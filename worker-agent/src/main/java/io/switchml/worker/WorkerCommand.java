package io.switchml.worker;

import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * {@code switchml worker}: the worker agent's commands.
 */
@Command(name = "worker", mixinStandardHelpOptions = true, versionProvider = io.switchml.protocol.BuildInfo.VersionProvider.class,
    description = "Worker agent: run a checked all-reduce job, benchmark, or serve the local bridge for PyTorch.",
    subcommands = {WorkerRunCommand.class, io.switchml.worker.bench.WorkerBenchCommand.class,
        io.switchml.worker.bridge.WorkerServeCommand.class, io.switchml.worker.bridge.WorkerHostCommand.class})
public final class WorkerCommand implements Runnable
{
    public void run()
    {
        new CommandLine(this).usage(System.out);
    }

    public static void main(final String[] args)
    {
        System.exit(io.switchml.protocol.UsageErrorHandler.install(new CommandLine(new WorkerCommand())).execute(args));
    }
}
