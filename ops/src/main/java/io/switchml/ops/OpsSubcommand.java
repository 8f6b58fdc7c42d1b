package io.switchml.ops;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.io.PrintWriter;
import java.util.concurrent.Callable;

/**
 * Base of the ops subcommands: finds the global options on the {@link OpsCommand} above it (however deep,
 * and whether or not {@code ops} runs under the {@code switchml} entry point), writes to the command
 * line's writers, and turns {@link OpsException}s into one line on stderr and their exit code; with {@code --json},
 * into one JSON object on stdout instead: {@code {"error": "...", "exit_code": 4}}.
 */
@Command(mixinStandardHelpOptions = true, sortOptions = false, versionProvider = Version.class,
    exitCodeListHeading = "%nExit codes:%n",
    exitCodeList = {
        OpsCommand.EXIT_OK, OpsCommand.EXIT_FAILED, OpsCommand.EXIT_USAGE, OpsCommand.EXIT_TIMED_OUT,
        OpsCommand.EXIT_UNREACHABLE})
abstract class OpsSubcommand implements Callable<Integer>
{
    @Spec
    CommandSpec spec;

    private Target target;

    /**
     * Do the command's work.
     *
     * @return the exit code.
     */
    abstract int execute() throws Exception;

    public final Integer call()
    {
        try
        {
            final int exitCode = execute();
            out().flush();
            return exitCode;
        }
        catch (final OpsException ex)
        {
            return fail(ex.getMessage() + (ex.exitCode() == OpsException.USAGE ? " (see --help)" : ""), ex.exitCode());
        }
        catch (final CommandLine.ParameterException ex)
        {
            throw ex;
        }
        catch (final IOException ex)
        {
            return fail("lost the appliance: " + ex, OpsException.UNREACHABLE);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            return OpsException.FAILED;
        }
        catch (final Exception ex)
        {
            return fail("failed: " + ex, OpsException.FAILED);
        }
    }

    private int fail(final String message, final int exitCode)
    {
        final PrintWriter out = out();
        if (json())
        {
            final java.util.Map<String, Object> error = new java.util.LinkedHashMap<>();
            error.put("error", message);
            error.put("exit_code", exitCode);
            out.println(io.switchml.protocol.Json.write(error));
            out.flush();
            return exitCode;
        }
        out.flush();
        final PrintWriter err = spec.commandLine().getErr();
        err.println(commandName() + ": " + message);
        err.flush();
        return exitCode;
    }

    String commandName()
    {
        return spec.qualifiedName();
    }

    OpsCommand options()
    {
        CommandSpec current = spec;
        while (current != null)
        {
            if (current.userObject() instanceof OpsCommand ops)
            {
                return ops;
            }
            current = current.parent();
        }
        throw new IllegalStateException(spec.qualifiedName() + " runs outside the ops command");
    }

    Target target()
    {
        if (target == null)
        {
            target = options().target();
        }
        return target;
    }

    boolean json()
    {
        return options().json;
    }

    PrintWriter out()
    {
        return spec.commandLine().getOut();
    }

    /**
     * @return whether the output may carry cursor movements and a cleared screen: a terminal, and not --json.
     */
    boolean interactive()
    {
        return !json() && options().isTerminal();
    }

    /**
     * @return whether block and box characters can be printed (stdout encodes UTF-8).
     */
    boolean unicode()
    {
        return options().unicode();
    }

    /**
     * Reject a bad combination of options as a usage error (exit code 2).
     */
    CommandLine.ParameterException usage(final String message)
    {
        return new CommandLine.ParameterException(spec.commandLine(), message);
    }
}
