package io.switchml.dist;

import io.switchml.appliance.ApplianceCommand;
import io.switchml.ops.OpsCommand;
import io.switchml.worker.WorkerCommand;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * The {@code switchml} command: one entry point for the demo, the appliance, a worker, and the
 * operator CLI.
 */
@Command(name = "switchml", mixinStandardHelpOptions = true, version = "switchml 0.1.0",
    description = "SwitchML software aggregation appliance and worker agent.",
    subcommands = {DemoCommand.class, ApplianceCommand.class, WorkerCommand.class, OpsCommand.class})
public final class SwitchMl implements Runnable
{
    public void run()
    {
        new CommandLine(this).usage(System.out);
    }

    public static void main(final String[] args)
    {
        System.exit(new CommandLine(new SwitchMl()).execute(args));
    }
}
