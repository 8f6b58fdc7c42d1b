package io.switchml.dist;

import io.switchml.appliance.ApplianceCommand;
import io.switchml.ops.OpsCommand;
import io.switchml.protocol.UsageErrorHandler;
import io.switchml.worker.WorkerCommand;
import picocli.CommandLine;
import picocli.CommandLine.Command;

import java.util.function.Supplier;

/**
 * The {@code switchml} command: one entry point for the demo, the appliance, a worker, and the
 * operator CLI.
 */
@Command(name = "switchml", mixinStandardHelpOptions = true, versionProvider = io.switchml.protocol.BuildInfo.VersionProvider.class,
    description = "SwitchML software aggregation appliance and worker agent.",
    subcommands = {DemoCommand.class, ApplianceCommand.class, WorkerCommand.class, OpsCommand.class, AotTrainCommand.class})
public final class SwitchMl implements Runnable
{
    public void run()
    {
        new CommandLine(this).usage(System.out);
    }

    public static void main(final String[] args)
    {
        System.exit(commandLine(args).execute(args));
    }

    /**
     * The command line for these arguments. Picocli builds the model of every subcommand, by reflection over its
     * annotations, before it parses anything, so that model is most of a start-up (the packaged class path's
     * picocli is compiled for Java 25 by the build, dist/src/build/stage-lib.sh, so that the AOT cache holds its
     * classes; the released jar's Java 5 class files are loaded and verified from the jar). When the first argument
     * names a subcommand, only that one is built, under a root that is the same but for the list of subcommands
     * (whose own usage, options and errors are unchanged); otherwise the whole command. Usage errors print one line
     * and a hint ({@link UsageErrorHandler}).
     */
    static CommandLine commandLine(final String[] args)
    {
        final Supplier<Object> only = args.length == 0 ? null : switch (args[0])
        {
            case "demo" -> DemoCommand::new;
            case "appliance" -> ApplianceCommand::new;
            case "worker" -> WorkerCommand::new;
            case "ops" -> OpsCommand::new;
            case "aot-train" -> AotTrainCommand::new;
            default -> null;
        };
        if (only == null)
        {
            return UsageErrorHandler.install(new CommandLine(new SwitchMl()));
        }
        return UsageErrorHandler.install(new CommandLine(new Root()).addSubcommand(only.get()));
    }

    /** {@link SwitchMl} without its subcommands, for {@link #commandLine}. */
    @Command(name = "switchml", mixinStandardHelpOptions = true, versionProvider = io.switchml.protocol.BuildInfo.VersionProvider.class,
        description = "SwitchML software aggregation appliance and worker agent.")
    static final class Root implements Runnable
    {
        public void run()
        {
            new CommandLine(new SwitchMl()).usage(System.out);
        }
    }
}
